package proxy

import "testing"

// TestRooted: the proxy dials a name of two labels or more as a fully
// qualified one, so no resolver tries it under the pod's search domains
// first (the netns test TestProxyLookupsFullyQualified in proxy/e2e
// shows the questions a resolver gets); address literals and single
// labels are dialled as written.
func TestRooted(t *testing.T) {
	tests := map[string]struct{ addr, want string }{
		"a name":                  {addr: "pass.example:443", want: "pass.example.:443"},
		"a deeper name":           {addr: "api.github.com:8443", want: "api.github.com.:8443"},
		"already fully qualified": {addr: "pass.example.:443", want: "pass.example.:443"},
		"IPv4 literal":            {addr: "192.0.2.1:443", want: "192.0.2.1:443"},
		"IPv6 literal":            {addr: "[2001:db8::1]:443", want: "[2001:db8::1]:443"},
		"IPv6 literal with zone":  {addr: "[fe80::1%eth0]:443", want: "[fe80::1%eth0]:443"},
		"a single label":          {addr: "localhost:8080", want: "localhost:8080"},
		"no port":                 {addr: "pass.example", want: "pass.example"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := rooted(tc.addr); got != tc.want {
				t.Errorf("rooted(%q) = %q, want %q", tc.addr, got, tc.want)
			}
		})
	}
}
