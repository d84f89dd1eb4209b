//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// TestHTTP2Curl: curl speaking HTTP/2 in the tunnel (offering h2 in ALPN,
// or with prior knowledge, offering it alone) gets its requests decided
// and injected as over HTTP/1.1, its refusals as HTTP/2 responses, and
// never the credential, which the upstream (HTTP/1.1 only here) echoes.
func TestHTTP2Curl(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	for _, flag := range []string{"--http2", "--http2-prior-knowledge"} {
		t.Run(flag, func(t *testing.T) {
			res := w.curl(t, "https://api.github.com/repos/acme/widgets/echo", flag, "-v")
			if res.code != 200 {
				t.Fatalf("status %d (%s %q)", res.code, refusal, res.header.Get(refusal))
			}
			if !strings.Contains(res.stderr, "using HTTP/2") {
				t.Errorf("curl did not speak HTTP/2 in the tunnel:\n%s", res.stderr)
			}
			if got := res.header.Get("X-Echo-Authorization"); got != "Bearer [REDACTED]" {
				t.Errorf("X-Echo-Authorization came back as %q, want Bearer [REDACTED]", got)
			}
			res = w.curl(t, "https://api.github.com/orgs/acme", flag, "-v")
			wantRefused(t, "GET /orgs/acme over HTTP/2", res.code, res.header, 403, "l7-not-allowed")
			if !strings.Contains(res.stderr, "using HTTP/2") {
				t.Errorf("the refusal was not an HTTP/2 response:\n%s", res.stderr)
			}
		})
	}
	if n := len(w.api.find("GET", "/orgs")); n != 0 {
		t.Errorf("the upstream saw %d refused requests", n)
	}
	w.wantLog(t, logQuery{host: "api.github.com", method: "GET", path: "/repos/acme/widgets/echo", decision: "inject", reason: "allowed"})
	w.wantLog(t, logQuery{host: "api.github.com", method: "GET", path: "/orgs/acme", decision: "refuse", reason: "l7-not-allowed"})
}
