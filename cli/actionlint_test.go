//go:build e2e

package cli

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// repoYAML lists the repository's GitHub workflows (every YAML file with
// both on: and jobs:, the examples' included) and actions (action.yml),
// as absolute paths.
func repoYAML(t *testing.T) (workflows, actions []string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") && name != ".github" || name == "testdata" || name == "golden" || name == "golden-omnia") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(name); ext != ".yml" && ext != ".yaml" {
			return nil
		}
		if name == "action.yml" || name == "action.yaml" {
			actions = append(actions, p)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var top map[string]any
		if yaml.Unmarshal(b, &top) != nil {
			return nil // a multi-document manifest, not a workflow
		}
		_, on := top["on"]
		_, jobs := top["jobs"]
		if on && jobs {
			workflows = append(workflows, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return workflows, actions
}

// TestActionlint lints every workflow in the repository with actionlint
// (tools/actionlint, its own module), with shellcheck on their run
// scripts; actionlint also checks each local action a workflow uses
// (uses: ./) against its action.yml. The action's own run scripts are
// shellchecked directly, since actionlint reads an action.yml only for
// its inputs and outputs.
func TestActionlint(t *testing.T) {
	shellcheck, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatalf("shellcheck is not on PATH (make test installs it): %v", err)
	}
	workflows, actions := repoYAML(t)
	for _, want := range []string{".github/workflows/ci.yml", ".github/workflows/release.yml", ".github/workflows/keyhole.yml", "examples/github-actions/pull-request.yaml"} {
		if !slices.ContainsFunc(workflows, func(w string) bool { return strings.HasSuffix(w, "/"+want) }) {
			t.Errorf("workflow %s not found (found %v)", want, workflows)
		}
	}
	if len(actions) == 0 {
		t.Fatal("no action.yml found")
	}
	t.Run("workflows", func(t *testing.T) {
		cmd := exec.Command("go", append([]string{"tool", "actionlint", "-no-color", "-shellcheck", shellcheck}, workflows...)...)
		cmd.Dir = "../tools/actionlint"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("actionlint: %v\n%s", err, out)
		}
	})
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range actions {
		rel, err := filepath.Rel(root, a)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(rel, func(t *testing.T) {
			steps := actionSteps(t, a)
			if len(steps) == 0 {
				t.Fatal("no run steps")
			}
			dir := t.TempDir()
			for _, s := range steps {
				f := filepath.Join(dir, s.ID+".sh")
				if err := os.WriteFile(f, []byte(s.Run), 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command(shellcheck, "--shell=bash", "--severity=style", f).CombinedOutput(); err != nil {
					t.Errorf("shellcheck of step %q: %v\n%s", s.Name, err, out)
				}
			}
		})
	}
}

// actionSteps returns the steps of an action that run a script.
func actionSteps(t *testing.T, file string) []actionStep {
	t.Helper()
	var out []actionStep
	for _, s := range readAction(t, file).Runs.Steps {
		if s.Run != "" {
			out = append(out, s)
		}
	}
	return out
}
