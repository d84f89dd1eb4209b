//go:build e2e

package e2e

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sawBasicToken reports whether any request the git upstream saw carried
// Basic x-access-token:<the current token>.
func (w *world) sawBasicToken(reqs []recorded) bool {
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+w.token))
	for _, r := range reqs {
		if r.Header.Get("Authorization") == want {
			return true
		}
	}
	return false
}

// gitClone clones url through the proxy into a fresh directory and returns
// it, failing the test if git fails.
func (w *world) gitClone(t *testing.T, url string) string {
	t.Helper()
	gitBin := requireTool(t, "git")
	parent := t.TempDir()
	res := w.runClient(t, parent, w.sandboxEnv(t), gitBin, "clone", "--quiet", url, "widgets")
	if res.err != nil {
		t.Fatalf("git clone %s: %v\n%s", url, res.err, res.stderr)
	}
	work := filepath.Join(parent, "widgets")
	got, err := os.ReadFile(filepath.Join(work, "README.md"))
	if err != nil || string(got) != "widgets\n" {
		t.Fatalf("the clone's README.md is %q (%v), want the upstream's", got, err)
	}
	return work
}

// TestGitClone clones a real smart-HTTP repository through the proxy with
// the sandbox's git holding only the placeholder, or nothing at all.
func TestGitClone(t *testing.T) {
	tests := map[string]struct {
		config string
		url    string
	}{
		"Connection basic form, placeholder in the URL": {
			config: "github-acme.json",
			url:    "https://x-access-token:omnia-injected-github-acme@github.com/acme/widgets.git",
		},
		"Connection basic form, no credentials": {
			config: "github-acme.json",
			url:    "https://github.com/acme/widgets.git",
		},
		"agent connector substitute form, placeholder in the URL": {
			config: "substitute.json",
			url:    "https://x-access-token:omnia-injected-company@github.com/acme/widgets.git",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.config)
			work := w.gitClone(t, tc.url)
			if !w.sawBasicToken(w.git.find("POST", "/acme/widgets.git/git-upload-pack")) {
				t.Errorf("the upstream's upload-pack request did not carry the injected Basic credential")
			}
			// The agent file's example: ls-remote with the same URL.
			res := w.runClient(t, work, w.sandboxEnv(t), requireTool(t, "git"), "ls-remote", tc.url)
			if res.err != nil || !strings.Contains(res.stdout, "refs/heads/main") {
				t.Errorf("git ls-remote: %v\n%s%s", res.err, res.stdout, res.stderr)
			}
			w.wantLog(t, logQuery{host: "github.com", path: "/acme/widgets.git/git-upload-pack", reason: "allowed"})
		})
	}
}

// TestGitPush pushes a new commit through the proxy: read-only rules (the
// Connection with git read rules, and the agent connector's read-only
// default) refuse it before the upstream sees the pack; the example
// Connection without rules on github.com forwards it, which shows the
// upstream itself would have accepted the push.
func TestGitPush(t *testing.T) {
	tests := map[string]struct {
		config  string
		url     string
		refused bool
	}{
		"Connection with read-only git rules": {
			config:  "github-acme-readonly.json",
			url:     "https://x-access-token:omnia-injected-github-acme@github.com/acme/widgets.git",
			refused: true,
		},
		"agent connector substitute form is read-only": {
			config:  "substitute.json",
			url:     "https://x-access-token:omnia-injected-company@github.com/acme/widgets.git",
			refused: true,
		},
		"Connection without rules on github.com forwards writes": {
			config: "github-acme.json",
			url:    "https://github.com/acme/widgets.git",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.config)
			gitBin := requireTool(t, "git")
			work := w.gitClone(t, tc.url)
			before := w.gitState.head(t)
			writeFile(t, filepath.Join(work, "CHANGELOG.md"), []byte("pushed from the sandbox\n"))
			for _, args := range [][]string{{"add", "CHANGELOG.md"}, {"commit", "--quiet", "-m", "Change from the sandbox"}} {
				if res := w.runClient(t, work, w.sandboxEnv(t), gitBin, args...); res.err != nil {
					t.Fatalf("git %s: %v\n%s", args[0], res.err, res.stderr)
				}
			}
			res := w.runClient(t, work, w.sandboxEnv(t), gitBin, "push", "origin", "main")
			after := w.gitState.head(t)
			packs := w.git.find("POST", "/acme/widgets.git/git-receive-pack")
			if !tc.refused {
				if res.err != nil {
					t.Fatalf("git push: %v\n%s", res.err, res.stderr)
				}
				if after == before {
					t.Fatalf("the upstream's main did not move")
				}
				if !w.sawBasicToken(packs) {
					t.Errorf("the receive-pack request did not carry the injected Basic credential")
				}
				return
			}
			if res.err == nil {
				t.Fatalf("git push succeeded through a read-only connector\n%s", res.stderr)
			}
			if !strings.Contains(res.stderr, "403") {
				t.Errorf("git push failed without the proxy's 403:\n%s", res.stderr)
			}
			if after != before {
				t.Errorf("the upstream's main moved from %s to %s", before, after)
			}
			if len(packs) != 0 {
				t.Errorf("the upstream saw %d receive-pack POSTs", len(packs))
			}
			w.wantLog(t, logQuery{host: "github.com", path: "/acme/widgets.git/git-receive-pack", reason: "l7-not-allowed"})
		})
	}
}

// TestGitLFSBatch checks the read-only connector's Git LFS rule: a batch
// download is forwarded, an upload is refused by its JSON body.
func TestGitLFSBatch(t *testing.T) {
	w := newWorld(t, "substitute.json")
	auth := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:omnia-injected-company"))
	const url = "https://github.com/acme/widgets.git/info/lfs/objects/batch"
	tests := map[string]struct {
		body    string
		refused bool
	}{
		"download is forwarded": {body: `{"operation":"download","objects":[{"oid":"aa","size":1}]}`},
		"upload is refused":     {body: `{"operation":"upload","objects":[{"oid":"aa","size":1}]}`, refused: true},
		"operation missing":     {body: `{"objects":[]}`, refused: true},
		"not JSON":              {body: `operation=download`, refused: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(w.git.find("POST", "/acme/widgets.git/info/lfs"))
			res := w.curl(t, url, "-X", "POST", "-H", auth, "-H", "Content-Type: application/vnd.git-lfs+json", "--data-binary", tc.body)
			seen := w.git.find("POST", "/acme/widgets.git/info/lfs")[before:]
			if tc.refused {
				wantRefused(t, "batch", res.code, res.header, 403, "l7-not-allowed")
				if len(seen) != 0 {
					t.Errorf("the upstream saw the refused batch request")
				}
				return
			}
			if len(seen) != 1 {
				t.Fatalf("the upstream saw %d batch requests, want 1 (status %d, %s %q)", len(seen), res.code, refusal, res.header.Get(refusal))
			}
			if !w.sawBasicToken(seen) {
				t.Errorf("the forwarded batch request did not carry the substituted credential")
			}
		})
	}
}
