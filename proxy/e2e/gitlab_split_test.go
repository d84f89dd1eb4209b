//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/pipeline"
)

// TestGitLabTwoForms: one self-hosted GitLab host serves its API, which
// reads the token in PRIVATE-TOKEN, and git over HTTPS, which reads it
// as basic auth. The Connection in testdata/gitlab-split splits the host
// between two inject entries; compiled by keyhole, it runs the proxy, and
// the real git clones and the real curl reads the API through it, each
// request getting its own form and never the other's. A push, which no
// rule allows, is refused before GitLab sees it.
func TestGitLabTwoForms(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	gitlab := startUpstream(t, w.upstreamCA, []string{"gitlab.acme.dev"}, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/v4/") {
			if r.Header.Get("PRIVATE-TOKEN") != w.token || r.Header.Get("Authorization") != "" {
				http.Error(rw, "want PRIVATE-TOKEN alone", http.StatusUnauthorized)
				return
			}
			rw.Header().Set("Content-Type", "application/json")
			rw.Write([]byte(`[{"iid":1,"title":"first"}]`))
			return
		}
		if r.Header.Get("PRIVATE-TOKEN") != "" {
			http.Error(rw, "git reads basic auth, not PRIVATE-TOKEN", http.StatusBadRequest)
			return
		}
		w.gitState.ServeHTTP(rw, r)
	}))

	checked, err := pipeline.Check(pipeline.Options{Paths: []string{filepath.Join("testdata", "gitlab-split")}})
	if err != nil {
		t.Fatal(err)
	}
	if checked.Result.Diagnostics.Count(diag.Warning) > 0 || checked.Result.Diagnostics.HasErrors() {
		t.Fatalf("check: %v", checked.Result.Diagnostics)
	}
	var cfg []byte
	for _, u := range checked.Result.Units {
		for _, s := range u.Plan.Sandboxes {
			if cfg, err = json.Marshal(s.Proxy); err != nil {
				t.Fatal(err)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "proxy.json")
	writeFile(t, path, cfg)
	w.proxy.stop()
	w.proxy = w.startProxy(t, path, "--resolve", "gitlab.acme.dev:443:"+gitlab.addr)

	api := w.curl(t, "https://gitlab.acme.dev/api/v4/projects/7/issues")
	if api.code != http.StatusOK || !strings.Contains(api.body, `"title":"first"`) {
		t.Fatalf("GET the API: %d %q %s", api.code, api.body, api.stderr)
	}
	parent := t.TempDir()
	res := w.runClient(t, parent, w.sandboxEnv(t), requireTool(t, "git"), "clone", "--quiet", "https://gitlab.acme.dev/acme/widgets.git", "widgets")
	if res.err != nil {
		t.Fatalf("git clone: %v\n%s", res.err, res.stderr)
	}
	if !w.sawBasicToken(gitlab.find("POST", "/acme/widgets.git/git-upload-pack")) {
		t.Errorf("GitLab's upload-pack request did not carry the basic credential")
	}
	push := w.curl(t, "https://gitlab.acme.dev/acme/widgets.git/git-receive-pack", "-X", "POST")
	wantRefused(t, "POST git-receive-pack", push.code, push.header, http.StatusForbidden, "l7-not-allowed")
	for _, r := range gitlab.requests() {
		if strings.HasSuffix(r.URI, "git-receive-pack") {
			t.Errorf("GitLab got %s %s, which no rule allows", r.Method, r.URI)
		}
	}
	w.assertNoSecret(t, "curl", api.stderr+api.body)
	w.assertNoSecret(t, "git", res.stdout+res.stderr)
}
