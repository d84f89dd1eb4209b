//go:build e2e

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"go.yaml.in/yaml/v3"
)

// TestWorkflowExample runs the Check, Diff, Comment and Access review
// steps of examples/github-actions/pull-request.yaml, as GitHub Actions
// runs them (bash -eo pipefail, GITHUB_* variables set, a temporary
// directory of the runner's), in real git repositories
// (testdata/script-workflow), with the stand-in gh of TestActionHostile
// and its "runner" and "nocanary" commands: the scripts are read from the
// example itself, so the example cannot drift from what keyhole does.
func TestWorkflowExample(t *testing.T) {
	needTools(t, "git", "bash", "jq")
	steps, err := workflowSteps("../examples/github-actions/pull-request.yaml", "keyhole", "Check", "Diff", "Comment", "Access review")
	if err != nil {
		t.Fatal(err)
	}
	p := scriptParams(t, "testdata/script-workflow", func(env *testscript.Env) error {
		dir := filepath.Join(env.WorkDir, "steps")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for name, script := range steps {
			if err := os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".sh"), []byte(script), 0o644); err != nil {
				return err
			}
		}
		env.Setenv("GITHUB_REPOSITORY", "acme/agents")
		env.Setenv("KEYHOLE_JOB_SECRET", canaryEnv)
		return setupRunner(env)
	})
	p.Cmds["runner"] = cmdRunner
	p.Cmds["nocanary"] = cmdNoCanary
	testscript.Run(t, p)
}

// workflowSteps returns the run scripts of the named steps of a job.
func workflowSteps(file, job string, names ...string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Name string `yaml:"name"`
				Run  string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	out := map[string]string{}
	for _, s := range wf.Jobs[job].Steps {
		out[s.Name] = s.Run
	}
	for _, n := range names {
		if out[n] == "" {
			return nil, fmt.Errorf("%s: job %s has no step %q with a run script", file, job, n)
		}
	}
	return out, nil
}
