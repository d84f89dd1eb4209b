package cli

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// action is the part of an action.yml the tests read.
type action struct {
	Inputs map[string]struct {
		Description string `yaml:"description"`
		Default     string `yaml:"default"`
	} `yaml:"inputs"`
	Outputs map[string]struct {
		Description string `yaml:"description"`
		Value       string `yaml:"value"`
	} `yaml:"outputs"`
	Runs struct {
		Using string       `yaml:"using"`
		Steps []actionStep `yaml:"steps"`
	} `yaml:"runs"`
}

type actionStep struct {
	ID               string            `yaml:"id"`
	Name             string            `yaml:"name"`
	If               string            `yaml:"if"`
	Uses             string            `yaml:"uses"`
	Shell            string            `yaml:"shell"`
	WorkingDirectory string            `yaml:"working-directory"`
	Env              map[string]string `yaml:"env"`
	Run              string            `yaml:"run"`
}

func readAction(t *testing.T, file string) action {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var a action
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return a
}

// expr is one ${{ ... }} expression.
var expr = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// TestActionMetadata keeps action.yml what its tests and docs assume:
// documented inputs and outputs, scripts that read their inputs from the
// environment (never ${{ }} pasted into a script, where a value could
// inject shell), each run step with an id and bash.
func TestActionMetadata(t *testing.T) {
	a := readAction(t, "../action.yml")
	if a.Runs.Using != "composite" {
		t.Errorf("runs.using %q, want composite", a.Runs.Using)
	}
	doc, err := os.ReadFile("../docs/action.md")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, s := range a.Runs.Steps {
		ids[s.ID] = s.ID != ""
	}
	for name, in := range a.Inputs {
		if in.Description == "" {
			t.Errorf("input %s has no description", name)
		}
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/action.md does not document input %s", name)
		}
	}
	for name, out := range a.Outputs {
		if out.Description == "" {
			t.Errorf("output %s has no description", name)
		}
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/action.md does not document output %s", name)
		}
		m := regexp.MustCompile(`^\$\{\{ steps\.([a-z-]+)\.outputs\.[a-z-]+ \}\}$`).FindStringSubmatch(out.Value)
		if m == nil || !ids[m[1]] {
			t.Errorf("output %s: value %q is not a step's output", name, out.Value)
		}
	}
	for _, s := range a.Runs.Steps {
		if s.Run == "" {
			continue
		}
		if s.ID == "" || s.Shell != "bash" {
			t.Errorf("step %q: id %q, shell %q: want an id and bash", s.Name, s.ID, s.Shell)
		}
		if strings.Contains(s.Run, "${{") {
			t.Errorf("step %q pastes an expression into its script: pass it through env", s.Name)
		}
		for k, v := range s.Env {
			if _, err := translateExpr(v, nil); err != nil {
				t.Errorf("step %q env %s: %v", s.Name, k, err)
			}
		}
	}
	for name, in := range a.Inputs {
		for _, m := range expr.FindAllStringSubmatch(in.Default, -1) {
			if m[1] != "github.token" {
				t.Errorf("input %s: default %q", name, in.Default)
			}
		}
	}
}

// translateExpr turns a step's env value, one ${{ }} reference, into the
// shell expression a test wrapper evaluates: inputs.X is $INPUT_X (set
// to its default by the wrapper unless the test sets it), github.a.b is
// $GITHUB_A_B, steps.S.outputs.K is read from the file that step wrote as
// its GITHUB_OUTPUT. Anything else is an error: the tests could not run
// the step as GitHub does.
func translateExpr(v string, inputs []string) (string, error) {
	m := expr.FindStringSubmatch(v)
	if m == nil || m[0] != v {
		return "", fmt.Errorf("%q is not one ${{ }} reference", v)
	}
	ref := m[1]
	parts := strings.Split(ref, ".")
	switch {
	case parts[0] == "inputs" && len(parts) == 2:
		if inputs != nil && !slices.Contains(inputs, parts[1]) {
			return "", fmt.Errorf("no input %s", parts[1])
		}
		return `"$` + inputVar(parts[1]) + `"`, nil
	case parts[0] == "github" && len(parts) >= 2:
		return `"${` + strings.ToUpper(strings.Join(parts, "_")) + `-}"`, nil
	case parts[0] == "steps" && len(parts) == 4 && parts[2] == "outputs":
		return fmt.Sprintf(`"$(sed -n 's/^%s=//p' "$WORK/outputs/%s" 2>/dev/null | tail -n 1)"`, parts[3], parts[1]), nil
	}
	return "", fmt.Errorf("unsupported reference %q", ref)
}

// inputVar is the variable a test sets to give an input a value.
func inputVar(name string) string {
	return "INPUT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}
