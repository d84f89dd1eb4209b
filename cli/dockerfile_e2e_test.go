//go:build e2e

package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDockerfileBuild runs each Dockerfile's go build step, as the build
// stage runs it (from the repository root, VERSION and REVISION given),
// outside Docker, which cannot run here: the binary must be static and
// stamped with what the build arguments say.
func TestDockerfileBuild(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"keyhole", "keyhole-proxy"} {
		t.Run(bin, func(t *testing.T) {
			var step string
			for _, in := range readDockerfile(t, filepath.Join(root, "cmd", bin, "Dockerfile")) {
				if in.op == "RUN" && strings.Contains(in.args, "go build") {
					step = in.args
				}
			}
			out := t.TempDir()
			cmd := exec.Command("bash", "-eo", "pipefail", "-c", strings.ReplaceAll(step, "/out/", out+"/"))
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "VERSION=v9.8.7", "REVISION=0123456789abcdef0123456789abcdef01234567")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", step, err, b)
			}
			exe := filepath.Join(out, bin)
			info, err := exec.Command("go", "version", "-m", exe).Output()
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"CGO_ENABLED=0", "-trimpath=true"} {
				if !strings.Contains(string(info), want) {
					t.Errorf("go version -m does not show %s:\n%s", want, info)
				}
			}
			arg := "version"
			if bin == "keyhole-proxy" {
				arg = "--version"
			}
			v, err := exec.Command(exe, arg).Output()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(v), bin+" v9.8.7 (0123456789ab) ") {
				t.Errorf("%s %s: %s", bin, arg, v)
			}
		})
	}
}
