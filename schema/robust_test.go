package schema

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// validConnection is a valid Connection of seven lines, for a case to add
// its own line 8.
const validConnection = `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: c}
spec:
  hosts: [a.example.com]
  credential: {kind: secret, secretRef: {name: s}}
  placement: {}
`

// TestValidateEdgeCases covers input the schema cannot describe: YAML
// features with no JSON form, and trees built to exhaust the validator.
func TestValidateEdgeCases(t *testing.T) {
	tests := map[string]struct {
		kind Kind
		src  string
		want []Violation
	}{
		"aliases and merge keys resolve like the loader does": {
			kind: KindSecret,
			src: `apiVersion: v1
kind: Secret
metadata: &meta
  name: token
  labels: {a: b}
stringData:
  <<: {token: canary-value}
  user: x
`,
		},
		"merged key that is bad is reported at its source": {
			kind: KindConnection,
			src: `base: &rule {methods: [FETCH], pathPrefixes: [/]}
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: c}
spec:
  hosts: [a.example.com]
  credential: {kind: secret, secretRef: {name: s}}
  placement:
    inject:
      - hosts: [a.example.com]
        rules:
          - <<: *rule
`,
			want: []Violation{
				{Line: 1, Column: 1, Path: "base", Message: `unknown field "base"; want one of apiVersion, kind, metadata, spec, status`},
				{Line: 1, Column: 24, Path: "spec.placement.inject[0].rules[0].methods[0]", Message: `"FETCH" is not an HTTP method; want one of GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH`},
			},
		},
		"non-string keys": {
			kind: KindAgent,
			src: `name: a
mode: text
llm: l
? [x, y]
: 1
7: seven
`,
			want: []Violation{
				{Line: 4, Column: 3, Path: "", Message: `a mapping key must be a string, not a list`},
				{Line: 6, Column: 1, Path: `["7"]`, Message: `unknown field "7"; want one of allowed_domains, connectors, description, instructions, llm, mode, name, sandbox, sandbox_options`},
			},
		},
		"duplicate keys": {
			kind: KindAgent,
			src:  "name: a\nmode: text\nllm: l\nmode: voice\n",
			want: []Violation{
				{Line: 4, Column: 1, Path: "mode", Message: `duplicate field "mode"`},
			},
		},
		"custom tags and timestamps keep their text": {
			kind: KindAgent,
			src:  "name: !custom a\nmode: text\nllm: 2001-12-14\ninstructions: !!binary aGVsbG8=\n",
		},
		"numbers where strings belong": {
			kind: KindAgent,
			src:  "name: a\nmode: text\nllm: 0x1F\ndescription: .inf\nallowed_domains: [1e3]\n",
			want: []Violation{
				{Line: 3, Column: 6, Path: "llm", Message: `want a string, got a number`},
				{Line: 4, Column: 14, Path: "description", Message: noJSONNumber},
				{Line: 5, Column: 19, Path: "allowed_domains[0]", Message: `want a string, got a number`},
			},
		},
		// Kubernetes' YAML-to-JSON conversion refuses the whole document
		// (json: unsupported value: +Inf), so a field that takes anything
		// does not take these.
		"infinity and NaN where anything goes": {
			kind: KindConnection,
			src: validConnection + `status: {a: [-.Inf, .NaN, +.inf, !!float .nan], b: ".inf", c: 1e3}
`,
			want: []Violation{
				{Line: 8, Column: 14, Path: "status.a[0]", Message: noJSONNumber},
				{Line: 8, Column: 21, Path: "status.a[1]", Message: noJSONNumber},
				{Line: 8, Column: 27, Path: "status.a[2]", Message: noJSONNumber},
				{Line: 8, Column: 34, Path: "status.a[3]", Message: noJSONNumber},
			},
		},
		// yaml.v3, which kustomize, Flux and keyhole's loader read with,
		// refuses a tag its text is not a value of: `!!bool yes` is YAML
		// 1.1's. The message names the tag, never the text, which may be
		// a Secret's.
		"explicit tags their text is not a value of": {
			kind: KindConnection,
			src: validConnection + `status: {a: !!bool yes, b: !!int 12x, c: !!float one, d: !!null nil, e: !!bool true, f: !!int 0x1F, g: !!float 1, h: !!null ~, i: !!str 12}
`,
			want: []Violation{
				{Line: 8, Column: 13, Path: "status.a", Message: taggedNot("!!bool", "true or false")},
				{Line: 8, Column: 28, Path: "status.b", Message: taggedNot("!!int", "a number")},
				{Line: 8, Column: 42, Path: "status.c", Message: taggedNot("!!float", "a number")},
				{Line: 8, Column: 58, Path: "status.d", Message: taggedNot("!!null", "null")},
			},
		},
		"a tagged value that does not hold where a type is wanted is said once": {
			kind: KindAgent,
			src:  "name: a\nmode: text\nllm: l\nconnectors: [{name: github, sandbox: !!bool yes}, {name: x, sandbox: .inf}]\n",
			want: []Violation{
				{Line: 4, Column: 38, Path: "connectors[0].sandbox", Message: taggedNot("!!bool", "true or false")},
				{Line: 4, Column: 70, Path: "connectors[1].sandbox", Message: noJSONNumber},
			},
		},
		"a tagged secret value that does not hold": {
			kind: KindSecret,
			src:  "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  token: !!int canary-s3cr3t\n",
			want: []Violation{{Line: 5, Column: 10, Path: "stringData.token", Message: taggedNot("!!int", "a number")}},
		},
		"infinity as a secret value is not quoted": {
			kind: KindSecret,
			src:  "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  token: .inf\n",
			want: []Violation{{Line: 5, Column: 10, Path: "stringData.token", Message: noJSONNumber}},
		},
		"null document": {
			kind: KindConnection,
			src:  "~\n",
			want: []Violation{{Line: 1, Column: 1, Path: "", Message: `want a mapping, got null`}},
		},
		"long values are truncated": {
			kind: KindConnection,
			src: `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: c}
spec:
  hosts: [` + strings.Repeat("é", 40) + `.com]
  credential: {kind: secret, secretRef: {name: s}}
  placement: {}
`,
			want: []Violation{
				{Line: 5, Column: 11, Path: "spec.hosts[0]", Message: `"` + strings.Repeat("é", 30) + `..." is not a host: want a lowercase DNS name without scheme, port or path`},
			},
		},
		"label keys are quoted in paths": {
			kind: KindConnection,
			src: `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: c
  labels:
    app.kubernetes.io/name: [x]
spec:
  hosts: [a.example.com]
  credential: {kind: secret, secretRef: {name: s}}
  placement: {}
`,
			want: []Violation{
				{Line: 6, Column: 29, Path: `metadata.labels["app.kubernetes.io/name"]`, Message: `want a string, got a list`},
			},
		},
		"secret value of the wrong type is not quoted": {
			kind: KindSecret,
			src:  "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata:\n  token: {canary: 1}\n",
			want: []Violation{{Line: 5, Column: 10, Path: "data.token", Message: `want a string, got a mapping`}},
		},
		"unknown kind": {
			kind: Kind("Deployment"),
			src:  "a: 1\n",
			want: []Violation{{Message: `no schema for kind "Deployment"`}},
		},
	}
	v := newValidator(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := v.Validate(tc.kind, parse(t, tc.src))
			if !equalViolations(got, tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", lines(got), lines(tc.want))
			}
			for _, g := range got {
				if strings.Contains(g.Message, canary) {
					t.Errorf("violation leaks a secret value: %s", g)
				}
			}
		})
	}
}

func equalViolations(a, b []Violation) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestValidateHostileTrees builds trees the YAML parser would refuse or
// the loader would cut short: they must be reported, not walked forever.
func TestValidateHostileTrees(t *testing.T) {
	deep := func(depth int) *yaml.Node {
		root := &yaml.Node{Kind: yaml.MappingNode, Line: 1, Column: 1}
		cur := root
		for range depth {
			next := &yaml.Node{Kind: yaml.MappingNode, Line: 1, Column: 1}
			cur.Content = append(cur.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "a"}, next)
			cur = next
		}
		return root
	}
	laughs := func() *yaml.Node {
		// Each level is a list of ten aliases of the one below: 10^9
		// leaves if expanded.
		leaf := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "lol"}
		cur := leaf
		for range 9 {
			seq := &yaml.Node{Kind: yaml.SequenceNode}
			for range 10 {
				seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.AliasNode, Alias: cur})
			}
			cur = seq
		}
		return &yaml.Node{Kind: yaml.MappingNode, Line: 1, Column: 1, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "allowed_domains"}, cur,
		}}
	}
	cycle := func() *yaml.Node {
		m := &yaml.Node{Kind: yaml.MappingNode, Line: 1, Column: 1}
		m.Content = []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!str", Value: "x"}, {Kind: yaml.AliasNode, Alias: m}}
		return m
	}
	huge := func() *yaml.Node {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Line: 1, Column: 1}
		for range maxNodes + 1 {
			seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "a.example.com"})
		}
		return &yaml.Node{Kind: yaml.MappingNode, Line: 1, Column: 1, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "allowed_domains"}, seq,
		}}
	}
	fanOut := func(anchor, open, close string, levels int) *yaml.Node {
		// Each level is ten aliases of the one below, in YAML text: the
		// parser keeps them as aliases and only expansion explodes.
		var b strings.Builder
		fmt.Fprintf(&b, "%s0: &%s0 %sx: 1%s\n", anchor, anchor, open, close)
		for i := 1; i < levels; i++ {
			refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*%s%d, ", anchor, i-1), 10), ", ")
			if open == "{" {
				fmt.Fprintf(&b, "%s%d: &%s%d {<<: [%s]}\n", anchor, i, anchor, i, refs)
			} else {
				fmt.Fprintf(&b, "%s%d: &%s%d [%s]\n", anchor, i, anchor, i, refs)
			}
		}
		return parse(t, b.String())
	}
	tests := map[string]struct {
		doc  *yaml.Node
		want string
	}{
		"alias bomb in YAML text":     {doc: fanOut("a", "[", "]", 10), want: "nests too deeply or is too large"},
		"merge-key bomb":              {doc: fanOut("m", "{", "}", 12), want: "nests too deeply or is too large"},
		"nested past the depth limit": {doc: deep(maxDepth + 10), want: "nests too deeply or is too large"},
		"billion laughs":              {doc: laughs(), want: "nests too deeply or is too large"},
		"alias cycle":                 {doc: cycle(), want: "nests too deeply or is too large"},
		"more nodes than the budget":  {doc: huge(), want: "nests too deeply or is too large"},
		"nil document":                {doc: nil, want: "the document is empty"},
		"empty document node":         {doc: &yaml.Node{Kind: yaml.DocumentNode}, want: "want a mapping, got null"},
	}
	v := newValidator(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			got := v.Validate(KindAgent, tc.doc)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Validate took %v on a tree it should refuse quickly", d)
			}
			if len(got) == 0 || !strings.Contains(got[0].Message, tc.want) {
				t.Errorf("got %v, want a violation containing %q", got, tc.want)
			}
			if len(got) > maxViolations+1 {
				t.Errorf("got %d violations, want at most %d", len(got), maxViolations+1)
			}
		})
	}
}

// TestValidateConcurrent shares one Validator between goroutines, as the
// compiler does; run with -race.
func TestValidateConcurrent(t *testing.T) {
	v := newValidator(t)
	good := parseFile(t, "connection/valid.yaml")
	bad := parseFile(t, "connection/errors.yaml")
	done := make(chan []int)
	for range 4 {
		go func() {
			var counts []int
			for range 50 {
				counts = append(counts, len(v.Validate(KindConnection, good)), len(v.Validate(KindConnection, bad)))
			}
			done <- counts
		}()
	}
	for range 4 {
		for i, n := range <-done {
			want := 0
			if i%2 == 1 {
				want = 11
			}
			if n != want {
				t.Fatalf("concurrent Validate returned %d violations, want %d", n, want)
			}
		}
	}
}

// fuzzViolations adds seeds to f's corpus and feeds validate (named
// name in a failure) every YAML document the fuzzer makes, for each of
// kinds: it never panics, returns within 3 seconds, and gives each
// violation a message and a position that is not negative.
func fuzzViolations(f *testing.F, name string, kinds []Kind, seeds []string, validate func(Kind, *yaml.Node) []Violation) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(src), &n); err != nil {
			return
		}
		for _, k := range kinds {
			start := time.Now()
			vs := validate(k, &n)
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("%s(%s) took %v", name, k, d)
			}
			for _, vi := range vs {
				if vi.Message == "" || vi.Line < 0 || vi.Column < 0 {
					t.Fatalf("bad violation %+v for %q", vi, src)
				}
			}
		}
	})
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {a: '!!'}\n",
		"a: &x [*x]\n",
		"<<: [*a, {b: 1}]\n",
		"? {a: 1}\n: b\n",
		"hosts: [API.example.com]\nhsots: 1\n",
		"- - - - [1, 2, {a: !!binary aGk=}]\n",
		"{a: !!bool yes, b: !!int 0x1F, c: !!float 1_0, d: !!null ~}\n",
		"name: a\nmode: text\nllm: l\nconnectors: [{name: github, sandbox: true}]\n",
		"inject: {}\nhosts: [{host: x, inject: {header: {name: a}, basic: {username: ''}}}]\n",
	} {
		f.Add(s)
	}
	v := newValidator(f)
	f.Fuzz(func(t *testing.T, src string) {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(src), &n); err != nil {
			return
		}
		for _, k := range kinds {
			agree(t, v, k, &n)
			start := time.Now()
			vs := v.Validate(k, &n)
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("Validate(%s) took %v", k, d)
			}
			for _, vi := range vs {
				if vi.Message == "" {
					t.Fatalf("empty message in %v for %q", vi, src)
				}
				if vi.Line < 0 || vi.Column < 0 {
					t.Fatalf("bad position in %v", vi)
				}
			}
		}
	})
}

func TestViolationCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: a\nmode: text\nllm: l\nallowed_domains:\n")
	for range 250 {
		b.WriteString("  - 1\n")
	}
	got := newValidator(t).Validate(KindAgent, parse(t, b.String()))
	if len(got) != maxViolations+1 {
		t.Fatalf("got %d violations, want %d", len(got), maxViolations+1)
	}
	if last := got[maxViolations]; last.Message != "150 more violations not shown; fix these first" || last.Line != 1 {
		t.Errorf("last violation = %v", last)
	}
}

// taggedNot is the violation of a scalar whose explicit tag its text is
// not a value of.
func taggedNot(tag, want string) string {
	return "the text tagged " + tag + " is not a value of that type, and YAML 1.2 readers (kustomize, Flux, keyhole) refuse the document; drop the tag, or write " + want
}

// noJSONNumber is the violation of a YAML infinity or NaN.
const noJSONNumber = `infinity and NaN are numbers JSON has no form for; quote the value if it is text`
