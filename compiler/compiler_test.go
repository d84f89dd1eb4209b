package compiler

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	goldenfile "keyhole.dev/keyhole/internal/golden"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/fixture"
)

// golden compares got with the file at path (KEYHOLE_UPDATE=1 rewrites it).
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	goldenfile.Check(t, path, got)
}

// compileDir loads and compiles a fixture directory: walked, or, when it
// holds paths.txt, the paths that lists (one a line, relative to the
// fixture), named explicitly as a user would. It compiles it twice, with
// the loader keeping every node tree and with Digest releasing them as
// the CLI does, requires the same Result of both, and returns the second.
func compileDir(t *testing.T, dir string, opts Options) Result {
	t.Helper()
	v := fixture.Validator(t)
	var results [5]Result
	for i, digest := range []source.Digest{nil, Digest(v, opts), Digest(v, opts), Digest(v, opts), Digest(v, opts)} {
		docs, ds := fixture.Load(t, dir, digest)
		o := opts
		o.Loaded = ds
		o.OmitObjects = i == 2
		o.OmitPlans = i == 3
		o.OmitSuppressedMessages = i == 4
		results[i] = Compile(docs, v, o)
	}
	sameResult(t, results[0], results[1])
	// OmitObjects empties Plan.Objects and changes nothing else.
	withObjects := results[1]
	withObjects.Plan.Objects = nil
	withObjects.Units = slices.Clone(withObjects.Units)
	for i := range withObjects.Units {
		withObjects.Units[i].Plan.Objects = nil
	}
	sameResult(t, withObjects, results[2])
	// OmitPlans leaves every plan empty but for its operator, and
	// changes nothing else.
	noPlans := results[1]
	noPlans.Plan = Plan{Operator: noPlans.Plan.Operator}
	noPlans.Units = slices.Clone(noPlans.Units)
	for i := range noPlans.Units {
		noPlans.Units[i].Plan = Plan{Operator: noPlans.Units[i].Plan.Operator}
	}
	sameResult(t, noPlans, results[3])
	// OmitSuppressedMessages changes nothing but the suppressed
	// diagnostics' messages (which the order of diagnostics at one place
	// may follow).
	sameResult(t, suppressedBlank(results[1]), suppressedBlank(results[4]))
	return results[1]
}

// suppressedBlank is r with the messages of its suppressed diagnostics
// blanked, sorted again.
func suppressedBlank(r Result) Result {
	r.Diagnostics = slices.Clone(r.Diagnostics)
	for i := range r.Diagnostics {
		if r.Diagnostics[i].Suppressed != "" {
			r.Diagnostics[i].Message = ""
		}
	}
	r.Diagnostics.Sort()
	return r
}

// sameResult fails t unless a and b are the same Result, their objects'
// trees compared by content (one may hold the tree, the other read it
// again).
func sameResult(t *testing.T, a, b Result) {
	t.Helper()
	if got, want := render(b.Diagnostics), render(a.Diagnostics); !bytes.Equal(got, want) {
		t.Fatalf("diagnostics with Digest:\n%s\nwithout:\n%s", got, want)
	}
	norm := func(r Result) (Result, []string) {
		var trees []string
		plans := []*Plan{&r.Plan}
		r.Units = slices.Clone(r.Units)
		for i := range r.Units {
			plans = append(plans, &r.Units[i].Plan)
		}
		for _, p := range plans {
			p.Objects = slices.Clone(p.Objects)
			for i, o := range p.Objects {
				n, err := o.Tree()
				if err != nil {
					t.Fatalf("%s: %v", o.Source, err)
				}
				out, err := yaml.Marshal(n)
				if err != nil {
					t.Fatal(err)
				}
				trees = append(trees, string(out))
				p.Objects[i] = Object{Source: o.Source, Pos: o.Pos}
			}
		}
		return r, trees
	}
	ra, ta := norm(a)
	rb, tb := norm(b)
	if !reflect.DeepEqual(ra, rb) || !slices.Equal(ta, tb) {
		t.Fatalf("the Result with Digest differs from the Result without:\n%+v\n%+v", rb, ra)
	}
}

func render(ds diag.List) []byte {
	var b bytes.Buffer
	for _, d := range ds {
		if d.Suppressed != "" {
			b.WriteString("(suppressed by " + d.Suppressed + ") ")
		}
		b.WriteString(d.String() + "\n")
	}
	return b.Bytes()
}

// TestCheckFixtures runs every directory under testdata/checks: its YAML
// inputs and want.txt, the diagnostics expected, with code, severity,
// file, line and column. A fixture named -allowed runs with
// AllowMissingSecrets; one named sandbox-image... without a default
// sandbox image, which the others have.
func TestCheckFixtures(t *testing.T) {
	t.Chdir("testdata/checks")
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		t.Run(d.Name(), func(t *testing.T) {
			opts := Options{AllowMissingSecrets: strings.HasSuffix(d.Name(), "-allowed")}
			// Only the fixtures about images go without a default one.
			if !strings.HasPrefix(d.Name(), "sandbox-image") {
				opts.DefaultSandboxImage = "ghcr.io/acme/fixture:1"
			}
			res := compileDir(t, d.Name(), opts)
			golden(t, filepath.Join(d.Name(), "want.txt"), render(res.Diagnostics))
		})
	}
}

// TestFixturesSayEachOnce: no fixture's want.txt holds one diagnostic
// twice (the same severity, code, position and message): what keyhole
// says of one place, it says once.
func TestFixturesSayEachOnce(t *testing.T) {
	wants, _ := filepath.Glob("testdata/checks/*/want.txt")
	if len(wants) == 0 {
		t.Fatal("no fixture under testdata/checks")
	}
	for _, w := range wants {
		b, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			if line != "" && seen[line] {
				t.Errorf("%s says twice: %s", w, line)
			}
			seen[line] = true
		}
	}
}

// TestEveryCheckHasAFixture keeps the table and the fixtures together: a
// code no fixture produces is a check nobody has seen fire.
func TestEveryCheckHasAFixture(t *testing.T) {
	seen := map[string]bool{}
	wants, _ := filepath.Glob("testdata/checks/*/want.txt")
	for _, w := range wants {
		b, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range table() {
			if bytes.Contains(b, []byte(" "+c.Code+": ")) {
				seen[c.Code] = true
			}
		}
	}
	for _, c := range table() {
		if !seen[c.Code] {
			t.Errorf("no fixture under testdata/checks produces %s", c.Code)
		}
	}
}

// TestAgentFieldsAreTheSchemas: the loader tells keyhole's agent.yaml from
// another tool's by the agent's fields, so it must know the schema's.
func TestAgentFieldsAreTheSchemas(t *testing.T) {
	var doc struct {
		Defs map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(schema.JSONSchema(), &doc); err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(maps.Keys(doc.Defs["Agent"].Properties))
	if got := slices.Sorted(slices.Values(source.AgentFields())); !slices.Equal(got, want) || len(want) == 0 {
		t.Fatalf("source.AgentFields() = %v, the schema's Agent has %v", got, want)
	}
}
