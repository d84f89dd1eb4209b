package proxy

import (
	"fmt"
	"net/http"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// TestPrepareHeader: the header the upstream gets comes from the
// decision alone: the credential only where the decision carries a host
// policy, in place of every copy the sandbox sent, the sandbox's
// forwarding headers never, and a whole, uncompressed body asked for
// where responses are scrubbed.
func TestPrepareHeader(t *testing.T) {
	cfg := &config.Config{APIVersion: config.APIVersion, Kind: config.Kind, Sandbox: config.SandboxRef{Name: "s"},
		Hosts: []config.Host{{Name: "api.example.com", Connection: "c",
			Inject: config.Inject{Secret: "sec", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}}}},
		Passthrough: []string{"pypi.org"}}
	lookup := func(_, key string) (Secret, error) { return newSecret(canary + key), nil }
	sandbox := func() http.Header {
		return http.Header{
			"Authorization": {"Bearer omnia-injected-c"}, "authorization": {"Bearer sandbox"},
			"X-Forwarded-For": {"10.0.0.1"}, "Forwarded": {"for=10.0.0.1"}, "X-Forwarded-Host": {"x"}, "X-Forwarded-Proto": {"http"},
			"Range": {"bytes=0-3"}, "if-range": {`"e"`}, "Accept-Encoding": {"gzip"}, "Accept": {"*/*"},
		}
	}
	tests := map[string]struct {
		scrubBodies bool
		req         policy.RequestInfo
		want        http.Header
		scrubs      bool // the response is scrubbed of the credential
	}{
		"passthrough": {
			req: policy.RequestInfo{Kind: policy.KindPlain, Method: "GET", Target: "http://pypi.org/simple/"},
			want: http.Header{"Authorization": {"Bearer omnia-injected-c"}, "authorization": {"Bearer sandbox"}, "User-Agent": {""},
				"Range": {"bytes=0-3"}, "if-range": {`"e"`}, "Accept-Encoding": {"gzip"}, "Accept": {"*/*"}},
		},
		"injected": {
			req: policy.RequestInfo{Kind: policy.KindTunnel, Method: "GET", Target: "/", ConnectHost: "api.example.com", SNI: "api.example.com", Host: "api.example.com", BodyComplete: true},
			want: http.Header{"Authorization": {"Bearer " + canary + "token"}, "User-Agent": {""},
				"Range": {"bytes=0-3"}, "if-range": {`"e"`}, "Accept-Encoding": {"gzip"}, "Accept": {"*/*"}},
			scrubs: true,
		},
		"injected, response bodies scrubbed": {
			scrubBodies: true,
			req:         policy.RequestInfo{Kind: policy.KindTunnel, Method: "GET", Target: "/", ConnectHost: "api.example.com", SNI: "api.example.com", Host: "api.example.com", BodyComplete: true},
			want:        http.Header{"Authorization": {"Bearer " + canary + "token"}, "User-Agent": {""}, "Accept-Encoding": {"identity"}, "Accept": {"*/*"}},
			scrubs:      true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := *cfg
			c.ScrubResponseBodies = tc.scrubBodies
			p, err := policy.NewPolicy(&c)
			if err != nil {
				t.Fatal(err)
			}
			d := p.Decide(tc.req)
			if !d.Allowed() {
				t.Fatalf("decision %v", d)
			}
			h := sandbox()
			sc, err := prepareHeader(h, d, secretInjector(lookup))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(h) != fmt.Sprint(tc.want) {
				t.Fatalf("header = %v\nwant     %v", h, tc.want)
			}
			if sc.inj.Empty() == tc.scrubs || sc.body != tc.scrubBodies {
				t.Fatalf("scrubbing the credential %v, bodies %v; want %v, %v", !sc.inj.Empty(), sc.body, tc.scrubs, tc.scrubBodies)
			}
		})
	}
}
