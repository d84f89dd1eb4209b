//go:build e2e

package e2e

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPassthrough checks a host listed only in passthrough: the tunnel is
// bytes end to end (the client sees the upstream's own certificate, not a
// leaf from the sandbox CA), nothing is injected, and the placeholder the
// sandbox sends stays a placeholder.
func TestPassthrough(t *testing.T) {
	pypiCA := newCA(t, t.TempDir(), "pypi-ca")
	pypi := startUpstream(t, pypiCA, []string{"pypi.org"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("simple index\n"))
	}))
	plain := startPlainUpstream(t)
	w := newWorld(t, "passthrough.json", "--resolve", "pypi.org:443:"+pypi.addr, "--resolve", "pypi.org:80:"+plain.addr)
	bundle := filepath.Join(t.TempDir(), "pypi.pem")
	writeFile(t, bundle, pypiCA.CertPEM)

	res := w.curl(t, "https://pypi.org/simple/", "--cacert", bundle, "-H", "Authorization: Bearer omnia-injected-github-acme")
	if res.code != 200 || res.body != "simple index\n" {
		t.Fatalf("through the tunnel: %d %q (%v %s)", res.code, res.body, res.exit, res.stderr)
	}
	seen := pypi.requests()
	if len(seen) != 1 || seen[0].Header.Get("Authorization") != "Bearer omnia-injected-github-acme" {
		t.Errorf("the passthrough upstream did not see the sandbox's own header untouched")
	}
	w.wantLog(t, logQuery{host: "pypi.org", decision: "tunnel", reason: "allowed"})

	res = w.curl(t, "https://pypi.org/simple/") // CURL_CA_BUNDLE is the sandbox bundle
	if res.code == 200 || !strings.Contains(res.stderr, "certificate") {
		t.Errorf("a passthrough host verified against the sandbox CA: status %d, %s", res.code, res.stderr)
	}

	t.Run("plain http is forwarded without hop-by-hop or proxy headers", func(t *testing.T) {
		res := w.curl(t, "http://pypi.org/simple/", "--proxy-user", "sandbox:secret",
			"-H", "Connection: X-Hop", "-H", "X-Hop: 1", "-H", "X-Kept: 1")
		if res.code != 200 {
			t.Fatalf("status %d (%s %q)", res.code, refusal, res.header.Get(refusal))
		}
		seen := plain.requests()
		if len(seen) != 1 {
			t.Fatalf("the upstream saw %d requests", len(seen))
		}
		h := seen[0].Header
		for _, k := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Hop"} {
			if h.Get(k) != "" {
				t.Errorf("the upstream saw %s", k)
			}
		}
		if h.Get("X-Kept") != "1" {
			t.Errorf("an end-to-end header was dropped")
		}
		if seen[0].URI != "/simple/" {
			t.Errorf("the upstream saw request-target %q, want origin-form /simple/", seen[0].URI)
		}
		w.wantLog(t, logQuery{host: "pypi.org", decision: "forward", reason: "allowed"})
	})
}

// startPlainUpstream is an HTTP (no TLS) upstream for absolute-form
// requests to a passthrough host.
func startPlainUpstream(t *testing.T) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{addr: ln.Addr().String()}
	srv := &http.Server{
		Handler: u.recording(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("plain index\n"))
		})),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return u
}
