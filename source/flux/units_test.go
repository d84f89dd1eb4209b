package flux

import (
	"strings"
	"testing"
)

// A release name past Helm's 53 characters is shortened as helm-controller
// shortens it: its first 40, a hyphen, 12 digits of its SHA-256; one
// within the limit is kept.
func TestShortReleaseName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"podinfo", "podinfo"},
		{strings.Repeat("a", 53), strings.Repeat("a", 53)},
		// sha256("aaa…a" × 54) = a3f01b693925…
		{strings.Repeat("a", 54), strings.Repeat("a", 40) + "-" + "a3f01b693925"},
	} {
		got := shortReleaseName(tc.in)
		if got != tc.want {
			t.Errorf("shortReleaseName(%d chars) = %q, want %q", len(tc.in), got, tc.want)
		}
		if len(got) > 53 {
			t.Errorf("shortReleaseName(%d chars) is %d long, past Helm's 53", len(tc.in), len(got))
		}
	}
}
