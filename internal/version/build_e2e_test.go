//go:build e2e

package version_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildPaths builds both binaries the ways keyhole is built and checks
// that `keyhole version` and `keyhole-proxy --version` say the same
// version and revision: with the linker flags scripts/version-ldflags.sh
// prints (make, the images, the release), and with the go command's own
// VCS stamping in a git checkout (go build, go install from a clone).
func TestBuildPaths(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is not on PATH (make test installs it): %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	head := strings.TrimSpace(run(t, root, nil, "git", "rev-parse", "HEAD"))
	tests := map[string]struct {
		env     []string
		ldflags bool
		clone   bool
		want    string // the start of both lines after the binary's name
	}{
		"linker flags from the environment": {
			env:     []string{"KEYHOLE_VERSION=v9.8.7", "KEYHOLE_REVISION=0123456789abcdef0123"},
			ldflags: true,
			want:    "v9.8.7 (0123456789ab) go",
		},
		"linker flags from git": {
			ldflags: true,
			want:    " (" + head[:12],
		},
		// In a clone of its own: the go command stamps only a checkout
		// whose .git is a directory, not a git worktree's .git file.
		"go build in a clone": {
			clone: true,
			want:  " (" + head[:12],
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			bin, dir := t.TempDir(), root
			if tc.clone {
				dir = t.TempDir()
				run(t, root, nil, "git", "clone", "-q", "--no-checkout", root, dir)
				run(t, dir, nil, "git", "checkout", "-q", head)
			}
			args := []string{"build", "-o", bin + "/"}
			if tc.ldflags {
				flags := strings.TrimSpace(run(t, root, tc.env, "scripts/version-ldflags.sh"))
				args = append(args, "-ldflags", flags)
			}
			// The machine's GOFLAGS may turn VCS stamping off; a user's
			// go build in a clone has it on.
			run(t, dir, []string{"GOFLAGS=-buildvcs=true"}, "go", append(args, "./cmd/keyhole", "./cmd/keyhole-proxy")...)
			k, ok := strings.CutPrefix(run(t, root, nil, filepath.Join(bin, "keyhole"), "version"), "keyhole ")
			if !ok {
				t.Fatalf("keyhole version printed %q", k)
			}
			p, ok := strings.CutPrefix(run(t, root, nil, filepath.Join(bin, "keyhole-proxy"), "--version"), "keyhole-proxy ")
			if !ok {
				t.Fatalf("keyhole-proxy --version printed %q", p)
			}
			if k != p {
				t.Errorf("keyhole version says %q, keyhole-proxy --version %q", k, p)
			}
			if !strings.Contains(k, tc.want) {
				t.Errorf("version %q does not hold %q", k, tc.want)
			}
		})
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr)
	}
	return string(out)
}
