package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go.yaml.in/yaml/v3"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestValidateOperatorFixtures checks AgentRuntime and ToolRegistry
// documents against the shipped operator CRDs: what the operator's API
// server refuses is reported at its position, what it accepts is not.
func TestValidateOperatorFixtures(t *testing.T) {
	tests := map[string]struct {
		kind Kind
		file string
		// version is the operator declared; empty for DefaultOperator.
		version string
		want    []string
	}{
		"agentruntime valid": {kind: KindAgentRuntime, file: "operator/agentruntime-valid.yaml"},
		"toolregistry valid": {kind: KindToolRegistry, file: "operator/toolregistry-valid.yaml"},
		"agentruntime misspelt, mistyped and against its rules": {
			kind: KindAgentRuntime, file: "operator/agentruntime-errors.yaml",
			want: []string{
				`5:1: spec: mode 'agent' allows only 'websocket', 'a2a' and 'custom' facades`,
				`5:1: spec: spec.facades must not contain duplicate facade types`,
				`6:3: spec.promptPackref: unknown field "promptPackref" (did you mean "promptPackRef"?)`,
				`10:13: spec.facades[0].port: want an integer, got a string`,
				`12:13: spec.facades[2].type: "grpc" is not allowed here; want one of websocket, a2a, rest, mcp, custom`,
				`14:15: spec.runtime.replicas: want an integer, got a string`,
			},
		},
		"agentruntime against the rules of operator v0.9.0-beta.17": {
			kind: KindAgentRuntime, file: "operator/agentruntime-errors.yaml", version: "v0.9.0-beta.17",
			want: []string{
				`5:1: spec: mode 'agent' allows only 'websocket' and 'a2a' facades`,
				`5:1: spec: spec.facades must not contain duplicate facade types`,
				`6:3: spec.promptPackref: unknown field "promptPackref" (did you mean "promptPackRef"?)`,
				`10:13: spec.facades[0].port: want an integer, got a string`,
				`12:13: spec.facades[2].type: "grpc" is not allowed here; want one of websocket, a2a, rest, mcp`,
				`14:15: spec.runtime.replicas: want an integer, got a string`,
			},
		},
		"agentruntime without its required fields": {
			kind: KindAgentRuntime, file: "operator/agentruntime-missing.yaml",
			want: []string{
				`6:3: spec: missing required field "facades"`,
				`6:3: spec: missing required field "promptPackRef"`,
			},
		},
		"agentruntime in function mode without its schemas": {
			kind: KindAgentRuntime, file: "operator/agentruntime-cel.yaml",
			want: []string{
				`5:1: spec: mode 'function' allows only 'rest' and 'mcp' facades`,
				`5:1: spec: mode 'function' requires exactly one 'rest' facade`,
				`5:1: spec: spec.inputSchema is required when spec.mode is 'function'`,
				`5:1: spec: spec.outputSchema is required when spec.mode is 'function'`,
			},
		},
		"toolregistry misspelt": {
			kind: KindToolRegistry, file: "operator/toolregistry-errors.yaml",
			want: []string{`6:3: spec.handler: unknown field "handler" (did you mean "handlers"?)`},
		},
	}
	v := newValidator(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			op := DefaultOperator()
			if tc.version != "" {
				var err error
				if op, err = LookupOperator(tc.version); err != nil {
					t.Fatal(err)
				}
			}
			got := strs(v.ValidateOperator(op, tc.kind, parseFile(t, tc.file)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

func strs(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.String())
	}
	return out
}

// TestOperatorSchemaFeatures checks the conversion of each CRD schema
// feature on a CRD written for it: defaults applied before validation,
// int-or-string, nullable, strict objects, preserved fields, list-map and
// set uniqueness, CEL rules, and the rules that are left to the server.
func TestOperatorSchemaFeatures(t *testing.T) {
	crd, err := os.ReadFile("testdata/operator/synthetic-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := compileCRDs(map[Kind][]byte{KindAgentRuntime: crd}, Group, rootSchema)
	if err != nil {
		t.Fatal(err)
	}
	const head = "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: AgentRuntime\nmetadata: {name: x}\n"
	many := make([]string, 200)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	tests := map[string]struct {
		spec string
		want []string
	}{
		"valid; the rules on the stored object and on Kubernetes-only functions are left to the server": {
			spec: "spec: {name: abc, port: 8080, note: null, url: not a url, labels: {a: b}, free: {x: {y: 1}}, ports: [{port: 1}, {port: 2, name: b}], tags: [a, b]}\nstatus: {ready: maybe, written: by the operator}",
		},
		"int-or-string takes a name": {
			spec: "spec: {name: abc, port: http}",
		},
		"the default of replicas meets the rule on mode": {
			spec: "spec: {name: abc, mode: slow, replicas: 2}",
		},
		"a rule over a defaulted field": {
			spec: "spec: {name: abc, mode: slow}",
			want: []string{`4:1: spec: slow mode needs two replicas`},
		},
		"each kind of violation": {
			spec: "spec: {name: ABC, replicas: 9, empty: {x: 1}, ports: [{port: 1}, {port: 1, name: b}], tags: [a, a], port: true, note: 3, mode: medium}",
			want: []string{
				`4:1: spec: at most five replicas`,
				`4:14: spec.name: "ABC" does not match "^[a-z]+$"`,
				`4:40: spec.empty.x: unknown field "x"`,
				`4:66: spec.ports[1]: duplicate entry: item 0 has the same port=1`,
				`4:93: spec.tags: items at index 0 and 1 are equal`,
				`4:107: spec.port: want an integer or a string, got a boolean`,
				`4:119: spec.note: want a string or null, got a number`,
				`4:128: spec.mode: "medium" is not allowed here; want one of fast, slow`,
			},
		},
		"a required field": {
			spec: "spec: {replicas: 1}",
			want: []string{`4:7: spec: missing required field "name"`},
		},
		"a rule past the cost limit is refused, as the server refuses it": {
			spec: "spec: {name: abc, items: [" + strings.Join(many, ", ") + "]}",
			want: []string{`4:1: spec: the operator's rule "!has(self.items) || self.items.all(x, self.items.all(y, self...." cannot be evaluated on this value: operation cancelled: actual cost limit exceeded`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := strs(sch.validate(KindAgentRuntime, parse(t, head+tc.spec)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestOperatorVersions covers the declared versions: a known one has no
// sandbox feature, an unknown one is refused with the known ones listed.
func TestOperatorVersions(t *testing.T) {
	def := DefaultOperator()
	if !def.Sandbox || def.Declared || def.Version != OperatorVersions()[0] {
		t.Errorf("DefaultOperator() = %+v", def)
	}
	op, err := LookupOperator("v0.9.0-beta.17")
	if err != nil || op.Sandbox || !op.Declared {
		t.Errorf("LookupOperator(v0.9.0-beta.17) = %+v, %v", op, err)
	}
	if _, err := LookupOperator("v9"); !errors.Is(err, ErrUnknownOperator) || !strings.Contains(err.Error(), "v0.9.0-beta.17") {
		t.Errorf("LookupOperator(v9) error = %v", err)
	}
	for _, v := range OperatorVersions() {
		crds, err := OperatorCRDs(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"agentruntimes.omnia.altairalabs.ai", "toolregistries.omnia.altairalabs.ai"} {
			if !strings.Contains(string(crds), "name: "+name) {
				t.Errorf("OperatorCRDs(%s) lacks %s", v, name)
			}
		}
		for _, k := range OperatorKinds() {
			if _, err := compileOperator(v, k); err != nil {
				t.Errorf("compiling operator %s's %s: %v", v, k, err)
			}
		}
	}
}

// TestOperatorProvenance keeps the operator's files as they were copied:
// each hash in operator/README.md must match its file, and every file of
// a release directory must be listed there.
func TestOperatorProvenance(t *testing.T) {
	checkProvenance(t, "operator", OperatorVersions()...)
}

// checkProvenance keeps files copied from elsewhere as they were: each
// file of each release directory under dir must have its sha256 recorded
// in dir/README.md as "<hash> <release>/<file>". It returns how many files
// each release directory holds.
func checkProvenance(t *testing.T, dir string, releases ...string) map[string]int {
	t.Helper()
	readme, err := os.ReadFile(dir + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && len(f[0]) == 64 {
			listed[f[1]] = f[0]
		}
	}
	files := map[string]int{}
	for _, r := range releases {
		entries, err := os.ReadDir(dir + "/" + r)
		if err != nil {
			t.Fatal(err)
		}
		files[r] = len(entries)
		for _, e := range entries {
			name := r + "/" + e.Name()
			b, err := os.ReadFile(dir + "/" + name)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			want, ok := listed[name]
			switch {
			case !ok:
				t.Errorf("%s/%s has no hash in %s/README.md", dir, name, dir)
			case hex.EncodeToString(sum[:]) != want:
				t.Errorf("%s/%s has changed since it was copied: sha256 %x, README.md records %s", dir, name, sum, want)
			}
		}
	}
	return files
}

// BenchmarkOperatorCompile is what the first AgentRuntime, or the first
// ToolRegistry, of a run costs once: reading the shipped CRD, converting
// it and compiling its JSON Schema and CEL rules.
func BenchmarkOperatorCompile(b *testing.B) {
	for _, k := range OperatorKinds() {
		b.Run(string(k), func(b *testing.B) {
			for b.Loop() {
				if _, err := compileOperator(OperatorVersions()[0], k); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateOperator is what each AgentRuntime costs after that:
// defaults, the strict schema and the CEL rules, with the schema compiled.
func BenchmarkValidateOperator(b *testing.B) {
	v := newValidator(b)
	doc := parseFile(b, "operator/agentruntime-valid.yaml")
	if vs := v.ValidateOperator(DefaultOperator(), KindAgentRuntime, doc); len(vs) > 0 {
		b.Fatal(vs)
	}
	for b.Loop() {
		v.ValidateOperator(DefaultOperator(), KindAgentRuntime, doc)
	}
}

// FuzzValidateOperator: whatever the document, checking it against the
// operator's CRDs never panics or hangs, and every violation has a
// message and a position that is not negative.
func FuzzValidateOperator(f *testing.F) {
	v := newValidator(f)
	fuzzViolations(f, "ValidateOperator", OperatorKinds(), []string{
		"spec: {promptPackRef: {name: p}, facades: [{type: websocket}]}\n",
		"spec: {mode: function, facades: [{type: rest}, {type: rest}, {type: mcp}]}\n",
		"spec: {facades: &f [{type: a2a}], runtime: {replicas: 1.5, resources: {limits: {cpu: '1e3'}}}}\n",
		"spec: {handlers: [{name: a, type: http, timeout: 10s}, {name: a}]}\n",
		"spec: {facades: [{type: custom, image: ''}], rollout: {trigger: {}}}\n",
		"spec: [1, 2]\n",
		"spec: {<<: {promptPackRef: {name: p}}}\n",
		"status: {x: 1}\nspec: null\n",
	}, func(k Kind, n *yaml.Node) []Violation { return v.ValidateOperator(DefaultOperator(), k, n) })
}

// TestOperatorAdversarial: documents built to be expensive or strange are
// reported, not walked without end (a rule that would run past the cost
// limit is TestOperatorSchemaFeatures').
func TestOperatorAdversarial(t *testing.T) {
	var facades strings.Builder
	facades.WriteString("spec:\n  promptPackRef: {name: p}\n  facades:\n")
	for range 3000 {
		facades.WriteString("    - {type: websocket}\n")
	}
	tests := map[string]struct {
		src  string
		want string
	}{
		"a long list under a rule quadratic in it": {
			src:  facades.String(),
			want: "spec.facades: maximum 4 items required, but found 3000 items",
		},
		"an alias bomb": {
			src:  "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\nspec: {facades: *f}\n",
			want: "too large to check",
		},
	}
	v := newValidator(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			got := strs(v.ValidateOperator(DefaultOperator(), KindAgentRuntime, parse(t, tc.src)))
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("want %q among:\n%s", tc.want, strings.Join(got, "\n"))
			}
		})
	}
}
