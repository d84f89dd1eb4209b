//go:build e2e

package e2e

import (
	"fmt"
	"testing"
)

// TestPathTricks sends request targets that a normalizing server would
// resolve inside or outside the allowed prefix /repos/acme/widgets. The
// proxy must refuse them as sent, never normalize them into an allowed
// path, and the upstream must see none of them. A raw TLS client sends the
// bytes exactly, where curl or a library would clean them up first.
func TestPathTricks(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	tests := map[string]struct {
		target string
	}{
		"dot-dot segments":               {target: "/repos/acme/widgets/../../../user"},
		"single dot segment":             {target: "/repos/acme/./widgets"},
		"encoded dot-dot":                {target: "/repos/acme/widgets/%2e%2e/%2e%2e/%2e%2e/user"},
		"mixed-case encoded dot-dot":     {target: "/repos/acme/widgets/%2E%2e/%2e%2E/%2e%2e/user"},
		"encoded slash":                  {target: "/repos/acme/widgets%2f..%2f..%2f..%2fuser"},
		"lowercase encoded slash":        {target: "/repos/acme/widgets/x%2F..%2F..%2Fuser"},
		"backslash":                      {target: "/repos/acme/widgets\\..\\..\\..\\user"},
		"encoded backslash":              {target: "/repos/acme/widgets/%5c..%5c..%5cuser"},
		"empty segment":                  {target: "/repos/acme/widgets//x"},
		"leading double slash":           {target: "//repos/acme/widgets"},
		"semicolon parameter":            {target: "/repos/acme/widgets;/../../../user"},
		"encoded NUL":                    {target: "/repos/acme/widgets/%00"},
		"encoded newline":                {target: "/repos/acme/widgets/%0d%0aX-Evil:%201"},
		"fragment":                       {target: "/repos/acme/widgets#/../../user"},
		"asterisk form":                  {target: "*"},
		"absolute form to the same host": {target: "https://api.github.com/repos/acme/widgets/../../../user"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(w.api.requests())
			c, br, err := w.tunnel(t, "api.github.com:443", "api.github.com")
			if err != nil {
				t.Fatal(err)
			}
			resp := roundTrip(t, c, br, "GET", fmt.Sprintf("GET %s HTTP/1.1\r\nHost: api.github.com\r\n\r\n", tc.target))
			switch {
			case resp.StatusCode == 400:
				// The HTTP parser rejected the request line: also fine.
			default:
				wantRefused(t, tc.target, resp.StatusCode, resp.Header, 403, "l7-not-allowed")
			}
			if seen := w.api.requests()[before:]; len(seen) != 0 {
				t.Errorf("the upstream saw %q", seen[0].URI)
			}
		})
	}
}
