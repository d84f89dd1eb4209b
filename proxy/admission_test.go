package proxy

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/policy"
)

// TestAdmitTunnel: one admission for both listeners, each outcome its
// own type: only an injected host is an interception (with its host's
// policy), only a passthrough host is dialled, and a refused or failed
// tunnel holds no slot.
func TestAdmitTunnel(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		// By name, so the dial is checked: loopback, not in internalHosts.
		_, port, _ := net.SplitHostPort(o.Resolve["pypi.org:443"])
		o.Resolve["pypi.org:443"] = "localhost:" + port
	})
	tests := map[string]struct {
		target string
		full   bool // no tunnel slot free
		want   string
		reason policy.Reason
		status int
		dialed bool // refused at the dial, not by the decision
	}{
		"injected":                      {target: "API.github.com.:443", want: "interception", reason: policy.ReasonAllowed},
		"not listed":                    {target: "example.com:443", want: "refused", reason: policy.ReasonHostNotAllowed},
		"another port":                  {target: "api.github.com:8443", want: "refused", reason: policy.ReasonHostNotAllowed},
		"no slot free":                  {target: "api.github.com:443", full: true, want: "failed", reason: policy.ReasonAllowed, status: http.StatusServiceUnavailable},
		"passthrough, internal address": {target: "pypi.org:443", want: "refused", reason: policy.ReasonHostNotAllowed, dialed: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			held := 0
			reserve := func() (func(), bool) {
				if tc.full {
					return nil, false
				}
				held++
				return func() { held-- }, true
			}
			a := h.srv.admitTunnel(context.Background(), h.srv.state.Load(), tc.target, reserve)
			d := a.decision()
			if d.Reason != tc.reason {
				t.Fatalf("reason %s, want %s", d.Reason, tc.reason)
			}
			switch a := a.(type) {
			case interception:
				if tc.want != "interception" || a.d.HostPolicy() == nil || a.d.HostPolicy().Name != "api.github.com" || held != 1 {
					t.Fatalf("interception of %s (host policy %v, %d slots held), want %s", a.d.Host, a.d.HostPolicy(), held, tc.want)
				}
				a.release()
			case tunnelRefused:
				if tc.want != "refused" || held != 0 || tc.dialed != strings.Contains(a.d.Message, "internalHosts") {
					t.Fatalf("refused: %s (%d slots held), want %s", a.d.Message, held, tc.want)
				}
			case tunnelFailed:
				if tc.want != "failed" || a.status != tc.status || held != 0 {
					t.Fatalf("failed with %d (%d slots held), want %s %d", a.status, held, tc.want, tc.status)
				}
			case passthrough:
				a.upstream.Close()
				t.Fatalf("passthrough to %s, want %s", a.d.Host, tc.want)
			}
		})
	}
	// By address, the operator's choice: dialled.
	h2 := newHarness(t)
	a := h2.srv.admitTunnel(context.Background(), h2.srv.state.Load(), "pypi.org:443", func() (func(), bool) { return func() {}, true })
	p, ok := a.(passthrough)
	if !ok {
		t.Fatalf("pypi.org admitted as %T, want a passthrough", a)
	}
	p.upstream.Close()
	if p.d.HostPolicy() != nil || p.d.Action != policy.ActionTunnel {
		t.Fatalf("passthrough decision %v carries a host policy", p.d)
	}
}
