//go:build e2e

package cli

import (
	"os/exec"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestGitScripts runs testdata/script-git/*.txtar: the scripts that build
// repositories with the real git binary (keyhole diff against branches,
// worktrees and shallow clones made as users make them). They need git
// on PATH, so they run under the e2e tag, which `make test` sets after
// installing git; without git they fail, they never skip.
func TestGitScripts(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is not on PATH (make test installs it): %v", err)
	}
	testscript.Run(t, scriptParams(t, "testdata/script-git", nil))
}
