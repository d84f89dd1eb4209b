//go:build e2e

package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestGitLFS runs the real git-lfs through the proxy against a small LFS
// server on github.com (lfsStore), with the read-only connector: git lfs
// pull downloads an object through a batch download, and git lfs push
// (git push's pre-push hook) is refused at its upload batch, so the
// object never reaches the upstream and the push fails.
func TestGitLFS(t *testing.T) {
	w := newWorld(t, "substitute.json")
	gitBin := requireTool(t, "git")
	requireTool(t, "git-lfs")
	const url = "https://x-access-token:omnia-injected-company@github.com/acme/widgets.git"
	data := []byte("a large widget\n")
	oid := w.gitState.lfs.put(data)
	// The upstream's repository gets an LFS pointer to the object,
	// committed by a git with no LFS filter, as a pointer.
	server := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Acme", "GIT_AUTHOR_EMAIL=dev@acme.invalid", "GIT_COMMITTER_NAME=Acme", "GIT_COMMITTER_EMAIL=dev@acme.invalid"}
	seed := filepath.Join(t.TempDir(), "seed")
	bare := filepath.Join(w.gitState.root, "acme", "widgets.git")
	run := func(env []string, dir string, args ...string) clientResult {
		return w.runClient(t, dir, env, gitBin, args...)
	}
	if res := run(server, filepath.Dir(seed), "clone", "--quiet", bare, seed); res.err != nil {
		t.Fatalf("git clone %s: %v\n%s", bare, res.err, res.stderr)
	}
	writeFile(t, filepath.Join(seed, ".gitattributes"), []byte("*.bin filter=lfs diff=lfs merge=lfs -text\n"))
	writeFile(t, filepath.Join(seed, "widget.bin"), fmt.Appendf(nil, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", oid, len(data)))
	for _, args := range [][]string{{"add", ".gitattributes", "widget.bin"}, {"commit", "--quiet", "-m", "Track widgets in LFS"}, {"push", "--quiet", "origin", "main"}} {
		if res := run(server, seed, args...); res.err != nil {
			t.Fatalf("git %s: %v\n%s", args[0], res.err, res.stderr)
		}
	}

	env := w.sandboxEnv(t, "GIT_LFS_SKIP_SMUDGE=1")
	parent := t.TempDir()
	work := filepath.Join(parent, "widgets")
	for _, step := range []struct {
		dir  string
		args []string
	}{
		{dir: parent, args: []string{"lfs", "install", "--skip-repo"}},
		{dir: parent, args: []string{"clone", "--quiet", url, "widgets"}},
		{dir: work, args: []string{"lfs", "pull"}},
	} {
		if res := run(env, step.dir, step.args...); res.err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(step.args, " "), res.err, res.stderr)
		}
	}
	if got, err := os.ReadFile(filepath.Join(work, "widget.bin")); err != nil || string(got) != string(data) {
		t.Fatalf("git lfs pull left widget.bin as %q (%v), want the object", got, err)
	}
	if _, downloads := w.gitState.lfs.counts("download"); downloads == 0 {
		t.Errorf("the upstream saw no download batch")
	}
	if !w.sawBasicToken(w.git.find("POST", "/acme/widgets.git/info/lfs/objects/batch")) {
		t.Errorf("the download batch did not carry the substituted credential")
	}

	before := w.gitState.head(t)
	writeFile(t, filepath.Join(work, "second.bin"), []byte("another large widget\n"))
	for _, args := range [][]string{
		// Straight to the upload batch: the locking API is refused too,
		// and git-lfs could stop there.
		{"config", "lfs.locksverify", "false"},
		{"add", "second.bin"},
		{"commit", "--quiet", "-m", "Add a widget"},
	} {
		if res := run(env, work, args...); res.err != nil {
			t.Fatalf("git %s: %v\n%s", args[0], res.err, res.stderr)
		}
	}
	res := run(env, work, "push", "origin", "main")
	if res.err == nil {
		t.Fatalf("git push with an LFS object succeeded through a read-only connector\n%s", res.stderr)
	}
	if !strings.Contains(res.stderr, "batch response") {
		t.Errorf("git push did not fail at the LFS upload batch:\n%s", res.stderr)
	}
	if objects, uploads := w.gitState.lfs.counts("upload"); objects != 1 || uploads != 0 {
		t.Errorf("the upstream holds %d objects and saw %d upload batches, want 1 and 0", objects, uploads)
	}
	if after := w.gitState.head(t); after != before {
		t.Errorf("the upstream's main moved from %s to %s", before, after)
	}
	w.wantLog(t, logQuery{host: "github.com", path: "/acme/widgets.git/info/lfs/objects/batch", reason: "l7-not-allowed"})
}

// BenchmarkGitCloneAndPush times what git over smart HTTP costs through
// the proxy, per operation: a fresh clone (GET info/refs, then POSTs to
// git-upload-pack) and the push of one new commit (GET info/refs, POST
// git-receive-pack). The proxy opens a new upstream connection for each
// request with a body, which these POSTs all are; upstream_posts/op says
// how many each operation made.
func BenchmarkGitCloneAndPush(b *testing.B) {
	w := newWorld(b, "github-acme.json")
	gitBin := requireTool(b, "git")
	const url = "https://github.com/acme/widgets.git"
	var clone, push time.Duration
	for i := 0; b.Loop(); i++ {
		parent := b.TempDir()
		start := time.Now()
		res := w.runClient(b, parent, w.sandboxEnv(b), gitBin, "clone", "--quiet", url, "widgets")
		clone += time.Since(start)
		if res.err != nil {
			b.Fatalf("git clone: %v\n%s", res.err, res.stderr)
		}
		work := filepath.Join(parent, "widgets")
		writeFile(b, filepath.Join(work, fmt.Sprintf("change-%d.md", i)), []byte("pushed from the sandbox\n"))
		for _, args := range [][]string{{"add", "."}, {"commit", "--quiet", "-m", "Change from the sandbox"}} {
			if res := w.runClient(b, work, w.sandboxEnv(b), gitBin, args...); res.err != nil {
				b.Fatalf("git %s: %v\n%s", args[0], res.err, res.stderr)
			}
		}
		start = time.Now()
		res = w.runClient(b, work, w.sandboxEnv(b), gitBin, "push", "--quiet", "origin", "main")
		push += time.Since(start)
		if res.err != nil {
			b.Fatalf("git push: %v\n%s", res.err, res.stderr)
		}
	}
	b.ReportMetric(float64(clone.Microseconds())/float64(b.N), "clone-µs/op")
	b.ReportMetric(float64(push.Microseconds())/float64(b.N), "push-µs/op")
	b.ReportMetric(float64(len(w.git.find("POST", "")))/float64(b.N), "upstream_posts/op")
}
