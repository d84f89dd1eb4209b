//go:build e2e

package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
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
	w := newWorld(t, "passthrough.json", "--resolve", "pypi.org:443:"+pypi.addr)
	bundle := filepath.Join(t.TempDir(), "pypi.pem")
	writeFile(t, bundle, pypiCA.certPEM)

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
}
