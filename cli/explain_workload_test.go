package cli

import (
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// TestInjectionWorkloadIdentity: explain says a credential of the proxy's
// own identity comes from no Secret, and names none.
func TestInjectionWorkloadIdentity(t *testing.T) {
	for name, tc := range map[string]struct {
		in   config.Inject
		want string
	}{
		"aws": {in: config.Inject{AWSSigV4: &config.AWSSigV4Inject{Identity: config.IdentityWorkload, Region: "us-east-1", Service: "s3"}},
			want: "for service s3 in region us-east-1 with the temporary credentials of the proxy's own AWS identity"},
		"google": {in: config.Inject{Google: &config.GoogleInject{Identity: config.IdentityWorkload, Audience: "https://run.example"}},
			want: "an ID token for audience https://run.example of the proxy's own identity, from its pod's metadata server"},
	} {
		t.Run(name, func(t *testing.T) {
			got := injection(tc.in)
			if !strings.Contains(got, tc.want) || strings.Contains(got, "Secret ") {
				t.Errorf("injection = %q, want it to say %q and name no Secret", got, tc.want)
			}
		})
	}
}
