//go:build e2e

package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpExamples runs the examples every command's -h shows, with bash,
// their placeholders filled in, in a git repository holding keyhole's
// examples/ (main, and origin/main
// as a clone has it). An example may find errors or changes (exit 1);
// exit 2 means the example itself is wrong. keyhole proxy's run until
// stopped and are not run.
func TestHelpExamples(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", bin+"/", "./cmd/keyhole", "./cmd/keyhole-proxy")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir, home := t.TempDir(), t.TempDir()
	if err := copyTree(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".local/share/bash-completion/completions", ".zsh/completions", ".config/fish/completions"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "HOME="+home, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GIT_AUTHOR_NAME=keyhole", "GIT_AUTHOR_EMAIL=test@keyhole.dev", "GIT_COMMITTER_NAME=keyhole", "GIT_COMMITTER_EMAIL=test@keyhole.dev", "GIT_CONFIG_NOSYSTEM=1")
	sh := func(script string) (int, string) {
		cmd := exec.Command("bash", "--noprofile", "--norc", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := sh("git init -q -b main && git add -A && git commit -q -m examples && git update-ref refs/remotes/origin/main HEAD"); code != 0 {
		t.Fatalf("git: %s", out)
	}
	ran := 0
	for _, c := range commands() {
		if c.name == "proxy" {
			continue
		}
		for _, ex := range examples(c.name) {
			ran++
			t.Run(ex, func(t *testing.T) {
				code, out := sh(fillPlaceholders(ex))
				if code != exitOK && code != exitFailed {
					t.Errorf("exit %d:\n%s", code, out)
				}
				if strings.Contains(out, "usage:") {
					t.Errorf("printed its usage:\n%s", out)
				}
			})
		}
	}
	if ran == 0 {
		t.Fatal("no examples")
	}
	for _, f := range []string{".local/share/bash-completion/completions/keyhole", ".zsh/completions/_keyhole", ".config/fish/completions/keyhole.fish"} {
		if b, err := os.ReadFile(filepath.Join(home, f)); err != nil || len(b) == 0 {
			t.Errorf("the completion example wrote no %s: %v", f, err)
		}
	}
}
