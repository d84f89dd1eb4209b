//go:build e2e

package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreCommitHook installs the repository's keyhole-check hook with the
// real pre-commit (language: golang builds keyhole from this checkout, as
// it would from a user's pinned rev) and runs it on a repository that
// checks clean, then on one with an error.
func TestPreCommitHook(t *testing.T) {
	needTools(t, "pre-commit", "git", "go")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	if err := copyTree(filepath.Join(root, "examples", "github-acme"), repo); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"PRE_COMMIT_HOME="+t.TempDir(),
		// pre-commit gives the build a GOPATH of its own; the module
		// cache stays this machine's, so nothing is downloaded again.
		"GOMODCACHE="+strings.TrimSpace(string(modcache)),
		"GIT_AUTHOR_NAME=keyhole", "GIT_AUTHOR_EMAIL=test@keyhole.dev",
		"GIT_COMMITTER_NAME=keyhole", "GIT_COMMITTER_EMAIL=test@keyhole.dev", "GIT_CONFIG_NOSYSTEM=1")
	do := func(name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = repo, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "agents"}} {
		if out, err := do("git", args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	out, err := do("pre-commit", "try-repo", root, "keyhole-check", "--all-files")
	if err != nil || !strings.Contains(out, "keyhole check") || !strings.Contains(out, "Passed") {
		t.Fatalf("pre-commit on a clean repository: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(repo, "connection.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(b), "usernameKey: user", "usernameKey: usr", 1)
	if broken == string(b) {
		t.Fatal("connection.yaml has no usernameKey: user to break")
	}
	if err := os.WriteFile(filepath.Join(repo, "connection.yaml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := do("git", "add", "-A"); err != nil {
		t.Fatalf("git add: %v\n%s", err, out)
	}
	out, err = do("pre-commit", "try-repo", root, "keyhole-check", "--all-files")
	if err == nil || !strings.Contains(out, "Failed") || !strings.Contains(out, "error ConnectionSecretKeyMissing") {
		t.Errorf("pre-commit on a broken repository: %v\n%s", err, out)
	}
}
