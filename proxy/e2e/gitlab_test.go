//go:build e2e

package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitLabProjectPath: a Connection limited to one GitLab project named
// by its path, /api/v4/projects/acme%2Fwidgets with encodedSlash:
// segment, lets the real curl read the project's issues through the
// proxy, forwarded with the %2F as sent and the credential; another
// project of the group, the project's path spelled out of it with dot
// segments between encoded '/' (plain or encoded dots), a project nested
// under it and the path with its '/' unencoded are refused
// (l7-not-allowed), and GitLab gets none of them.
func TestGitLabProjectPath(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	gitlab := startUpstream(t, w.upstreamCA, []string{"gitlab.acme.dev"}, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("PRIVATE-TOKEN") != w.token {
			http.Error(rw, "no credential", http.StatusUnauthorized)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.Write([]byte(`[{"iid":1,"title":"first"}]`))
	}))
	w.proxy = w.startProxy(t, filepath.Join("testdata", "gitlab-project.json"), "--resolve", "gitlab.acme.dev:443:"+gitlab.addr)

	ok := w.curl(t, "https://gitlab.acme.dev/api/v4/projects/acme%2Fwidgets/issues?state=opened")
	if ok.code != http.StatusOK || !strings.Contains(ok.body, `"title":"first"`) {
		t.Fatalf("GET the project's issues: %d %q %s", ok.code, ok.body, ok.stderr)
	}
	for _, path := range []string{
		"/api/v4/projects/acme%2Fother/issues",
		"/api/v4/projects/acme%2F..%2Fother/issues",
		"/api/v4/projects/acme%2Fwidgets%2F..%2F..%2Fother",
		"/api/v4/projects/acme%2Fwidgets%2F%2e%2e",
		"/api/v4/projects/acme%2Fwidgets%2Fsub/issues",
		"/api/v4/projects/acme%2Fwidgets%252F..%252Fother",
		"/api/v4/projects/acme/widgets/issues",
	} {
		res := w.curl(t, "https://gitlab.acme.dev"+path, "--path-as-is")
		wantRefused(t, "GET "+path, res.code, res.header, http.StatusForbidden, "l7-not-allowed")
	}
	var uris []string
	for _, r := range gitlab.requests() {
		uris = append(uris, r.URI)
	}
	if len(uris) != 1 || uris[0] != "/api/v4/projects/acme%2Fwidgets/issues?state=opened" {
		t.Errorf("GitLab got %q, want only the project's issues with the %%2F as sent", uris)
	}
}
