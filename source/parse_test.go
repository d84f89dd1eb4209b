package source

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// billionLaughs is the classic alias bomb: ten levels of nine aliases each,
// 10^9 nodes if expanded.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nl0: &l0 lol\n")
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [", i, i)
		for j := 0; j < 9; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// want is one expected diagnostic: code and position (line:col).
type want struct {
	code      string
	line, col int
	// contains is a part of the message that makes it actionable.
	contains string
}

func TestParseAdversarial(t *testing.T) {
	tests := map[string]struct {
		input    string
		file     string
		wantDocs int
		want     []want
	}{
		"binary file": {
			input: "apiVersion: v1\nkind: A\x00\x01\x02",
			want:  []want{{code: CodeInputInvalid, line: 2, col: 8, contains: "binary file"}},
		},
		"invalid UTF-8 points at the first bad byte": {
			input: "apiVersion: v1\nkind: Secret\nname: ab\xffcd\n",
			want:  []want{{code: CodeInputInvalid, line: 3, col: 9, contains: "0xFF"}},
		},
		"invalid UTF-8 after multi-byte characters counts characters": {
			input: "k: ééé\xc3\n",
			want:  []want{{code: CodeInputInvalid, line: 1, col: 7, contains: "not valid UTF-8"}},
		},
		"lone CR and NEL end lines as yaml.v3 counts them": {
			input: "apiVersion: v1\rkind: A\u0085x: ab\xff\n",
			want:  []want{{code: CodeInputInvalid, line: 3, col: 6, contains: "0xFF"}},
		},
		"UTF-16 with a truncated last character": {
			input: "\xff\xfea\x00:",
			want:  []want{{code: CodeInputInvalid, line: 1, col: 2, contains: "invalid UTF-16LE"}},
		},
		"control character": {
			input: "apiVersion: v1\nkind: A\nx: \"a\x07b\"\n",
			want:  []want{{code: CodeInputInvalid, line: 3, col: 6, contains: "U+0007"}},
		},
		"alias bomb": {
			input: billionLaughs(),
			want:  []want{{code: CodeYAMLAliasLimit, line: 8, col: 10, contains: "10000 nodes"}},
		},
		"alias to its own anchor": {
			input: "apiVersion: v1\nkind: A\na: &x\n  b: *x\n",
			want:  []want{{code: CodeYAMLInvalid, line: 4, col: 6, contains: "expand forever"}},
		},
		"document without kind": {
			input: "apiVersion: v1\nmetadata:\n  name: x\n",
			want:  []want{{code: CodeKindMissing, line: 1, col: 1, contains: "no kind"}},
		},
		"document without apiVersion, second in stream": {
			input:    "apiVersion: v1\nkind: A\n---\n\n  kind: Secret\n",
			wantDocs: 1,
			want:     []want{{code: CodeKindMissing, line: 5, col: 3, contains: "no apiVersion"}},
		},
		"kind that is not a string": {
			input: "apiVersion: v1\nkind: [Secret]\n",
			want:  []want{{code: CodeKindMissing, line: 1, col: 1, contains: "kind"}},
		},
		"agent.yaml needs no kind": {
			file:     "agents/a/agent.yaml",
			input:    "name: a\nsandbox: daytona\n",
			wantDocs: 1,
		},
		"top-level list": {
			input: "- apiVersion: v1\n  kind: A\n",
			want:  []want{{code: CodeInputInvalid, line: 1, col: 1, contains: "is a list"}},
		},
		"top-level scalar": {
			input: "---\n  just text\n",
			want:  []want{{code: CodeInputInvalid, line: 2, col: 3, contains: "is a scalar"}},
		},
		"tab indentation": {
			input: "apiVersion: v1\nkind: A\nspec:\n\thosts: []\n",
			want:  []want{{code: CodeYAMLInvalid, line: 4, col: 1, contains: "cannot start any token"}},
		},
		"syntax error stops the stream once": {
			input:    "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: [\n---\napiVersion: v1\nkind: B\n---\nalso: [broken\n",
			wantDocs: 1,
			want:     []want{{code: CodeYAMLInvalid, line: 6, col: 1, contains: "in document 2"}}, // the marker that ends the open flow
		},
		"duplicate key at the repeat": {
			input: "apiVersion: v1\nkind: A\nspec:\n  hosts: [a]\n  other: 1\n  hosts: [b]\n",
			want:  []want{{code: CodeYAMLInvalid, line: 6, col: 3, contains: "line 4, column 3"}},
		},
		"duplicate keys in flow and quoted form": {
			input: "apiVersion: v1\nkind: A\nx: {a: 1, \"a\": 2}\n",
			want:  []want{{code: CodeYAMLInvalid, line: 3, col: 11, contains: "already defined at line 3, column 5"}},
		},
		"different tags are different keys": {
			input:    "apiVersion: v1\nkind: A\nx: {1: a, \"1\": b}\n",
			wantDocs: 1,
		},
		"BOM": {
			input:    "\uFEFFapiVersion: v1\nkind: A\n",
			wantDocs: 1,
		},
		"CRLF line ends": {
			input:    "apiVersion: v1\r\nkind: A\r\n---\r\napiVersion: v1\r\nkind: B\r\n",
			wantDocs: 2,
		},
		"separators only": {
			input: "---\n---\n---\n",
		},
		"empty file": {input: ""},
		"comments only": {
			input: "# nothing\n# here\n",
		},
		"end markers": {
			input:    "...\napiVersion: v1\nkind: A\n...\n---\napiVersion: v1\nkind: B\n...\n",
			wantDocs: 2,
		},
		"end marker alone": {input: "...\n"},
		"JSON": {
			input:    `{"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="}}`,
			wantDocs: 1,
		},
		"JSON with a syntax error": {
			input: "{\"apiVersion\": \"v1\",\n \"kind\": \"Secret\"\n \"data\": {}}",
			want:  []want{{code: CodeYAMLInvalid, line: 3, col: 1, contains: "did not find expected ',' or '}'"}},
		},
		"unclosed flow sequence points at its line, not the one before": {
			input: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\ndata:\n  a: [1, 2\n  b: c\n",
			want:  []want{{code: CodeYAMLInvalid, line: 6, col: 1, contains: "did not find expected ',' or ']'"}},
		},
		"a key indented short points at that key": {
			input: "apiVersion: v1\nkind: A\nspec:\n  a: 1\n b: 2\n",
			want:  []want{{code: CodeYAMLInvalid, line: 5, col: 1, contains: "did not find expected key"}},
		},
		"a key among list items points at the list": {
			input: "apiVersion: v1\nkind: A\nspec:\n  - x\n  y: 2\n",
			want:  []want{{code: CodeYAMLInvalid, line: 4, col: 1, contains: "did not find expected '-' indicator"}},
		},
		"unclosed flow at the end of the file points at its last line": {
			input: "apiVersion: v1\nkind: A\nspec: [\n",
			want:  []want{{code: CodeYAMLInvalid, line: 3, col: 1, contains: "did not find expected node content"}},
		},
		"a scanner error keeps its line": {
			input: "apiVersion: v1\nkind: A\nspec:\n  - b\n  c\n",
			want:  []want{{code: CodeYAMLInvalid, line: 5, col: 1, contains: "could not find expected ':'"}},
		},
		"bad merge key": {
			input: "apiVersion: v1\nkind: A\nx:\n  <<: [1]\n",
			want:  []want{{code: CodeYAMLInvalid, line: 4, col: 8, contains: "merge key"}},
		},
		"unknown anchor": {
			input: "apiVersion: v1\nkind: A\nx: *nope\n",
			want:  []want{{code: CodeYAMLInvalid, line: 3, col: 4, contains: "anchor that is not defined"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := tc.file
			if file == "" {
				file = "in.yaml"
			}
			docs, ds := Parse(file, []byte(tc.input))
			if len(docs) != tc.wantDocs {
				t.Errorf("%d documents, want %d", len(docs), tc.wantDocs)
			}
			if len(ds) != len(tc.want) {
				t.Fatalf("diagnostics:\n%v\nwant %d", ds, len(tc.want))
			}
			for i, w := range tc.want {
				d := ds[i]
				if d.Code != w.code || d.Pos.Line != w.line || d.Pos.Column != w.col || d.Pos.File != file || d.Severity != diag.Error {
					t.Errorf("got %v, want %s at %s:%d:%d", d, w.code, file, w.line, w.col)
				}
				if !strings.Contains(d.Message, w.contains) {
					t.Errorf("message %q does not say %q", d.Message, w.contains)
				}
			}
		})
	}
}

// TestAliasBombBounded expands the billion-laughs document and checks
// that refusing it costs a bounded, small amount of memory and no more
// than a bounded number of allocations.
func TestAliasBombBounded(t *testing.T) {
	data := []byte(billionLaughs())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, ds := Parse("bomb.yaml", data)
	runtime.ReadMemStats(&after)
	if len(ds) != 1 || ds[0].Code != CodeYAMLAliasLimit {
		t.Fatalf("diagnostics %v, want one YAMLAliasLimit", ds)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > 8<<20 {
		t.Errorf("refusing the bomb allocated %d bytes, want < 8 MiB", alloc)
	}
	allocs := testing.AllocsPerRun(3, func() { Parse("bomb.yaml", data) })
	t.Logf("refusing a %d-byte alias bomb: %d bytes allocated, %.0f allocations", len(data), alloc, allocs)
	if allocs > 3*maxAliasNodes {
		t.Errorf("%v allocations, want at most %d", allocs, 3*maxAliasNodes)
	}
}

// TestAliasesResolved checks callers see plain nodes: aliases copied,
// merge keys applied, explicit keys winning, and anchors expanded as many
// times as they are used, just under the limit.
func TestAliasesResolved(t *testing.T) {
	input := `apiVersion: v1
kind: A
base: &base
  methods: [GET, HEAD]
  pathPrefixes: [/repos]
rules:
  - *base
  - <<: *base
    methods: [POST]
  - <<: [{a: 1}, {a: 2, b: 2}]
`
	docs, ds := Parse("a.yaml", []byte(input))
	if len(ds) > 0 || len(docs) != 1 {
		t.Fatalf("Parse: %v", ds)
	}
	var out struct {
		Rules []map[string]any `yaml:"rules"`
	}
	if err := docs[0].Node.Decode(&out); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(out.Rules)
	want := "[map[methods:[GET HEAD] pathPrefixes:[/repos]] map[methods:[POST] pathPrefixes:[/repos]] map[a:1 b:2]]"
	if got != want {
		t.Errorf("rules = %s, want %s", got, want)
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.AliasNode {
			t.Errorf("alias node left at %d:%d", n.Line, n.Column)
		}
		for i, c := range n.Content {
			if n.Kind == yaml.MappingNode && i%2 == 0 && c.ShortTag() == "!!merge" {
				t.Errorf("merge key left at %d:%d", c.Line, c.Column)
			}
			walk(c)
		}
	}
	walk(docs[0].Node)
	// A copy keeps its anchor's position: the editor shows the definition.
	second := Lookup(docs[0].Node, "rules").Content[0]
	if m := Lookup(second, "methods"); m.Line != 4 || m.Column != 12 {
		t.Errorf("copied node at %d:%d, want 4:12", m.Line, m.Column)
	}

	// 99 aliases of a 100-node anchor: 9900 copies, within the limit.
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: A\nx: &x [")
	for i := 0; i < 99; i++ {
		b.WriteString("1, ")
	}
	b.WriteString("1]\ny: [")
	for i := 0; i < 99; i++ {
		b.WriteString("*x, ")
	}
	b.WriteString("*x]\n")
	if _, ds := Parse("many.yaml", []byte(b.String())); len(ds) != 1 || ds[0].Code != CodeYAMLAliasLimit {
		t.Errorf("100 aliases of 101 nodes: %v, want YAMLAliasLimit", ds)
	}
	within := strings.Replace(b.String(), "*x]", "1]", 1)
	if docs, ds := Parse("many.yaml", []byte(within)); len(ds) > 0 || len(docs) != 1 {
		t.Errorf("99 aliases of 101 nodes: %v, want no diagnostics", ds)
	}
}

// TestNoSecretInDiagnostics plants a canary secret value in broken inputs
// of every kind the loader reports and checks no diagnostic or error
// repeats it.
func TestNoSecretInDiagnostics(t *testing.T) {
	const canary = "CANARY-s3cr3t-7f1d"
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  token: " + canary + "\n"
	tests := map[string]string{
		"syntax error after the value":  secret + "x: [\n",
		"syntax error inside the value": "apiVersion: v1\nkind: Secret\nstringData:\n  token: \"" + canary + "\n  bad: [\n",
		"duplicate key":                 secret + "stringData:\n  token: " + canary + "\n",
		"duplicate key holding it":      "apiVersion: v1\nkind: Secret\nstringData:\n  " + canary + ": 1\n  " + canary + ": 2\n",
		"control character in it":       secret + "  other: \"" + canary + "\x01\"\n",
		"invalid UTF-8 in it":           secret + "  other: " + canary + "\xfe\n",
		"no kind":                       "apiVersion: v1\nstringData:\n  token: " + canary + "\n",
		"a scalar document":             canary + "\n",
		"a list document":               "- " + canary + "\n",
		"tab after it":                  secret + "\t" + canary + ": 1\n",
		"bad merge":                     secret + "m:\n  <<: " + canary + "\n",
		"alias bomb":                    strings.Replace(billionLaughs(), "lol", canary, 1),
		"unknown anchor":                secret + "x: *" + canary + "\n",
	}
	for name, input := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"s.yaml": input})
			_, ds, err := testLoad([]string{"s.yaml", "missing-" + canary[:6] + ".yaml"}, Options{Dir: dir})
			if len(ds) == 0 {
				t.Fatal("no diagnostic: the input was meant to be broken")
			}
			for _, d := range ds {
				if strings.Contains(d.Message, canary) || strings.Contains(d.String(), canary) {
					t.Errorf("diagnostic leaks the secret: %v", d)
				}
			}
			if err != nil && strings.Contains(err.Error(), canary) {
				t.Errorf("error leaks the secret: %v", err)
			}
		})
	}
}

func TestFlowVariableHint(t *testing.T) {
	tests := map[string]struct {
		data string
		hint bool
	}{
		"unquoted variable in a flow sequence": {data: "hosts: [api.${DOMAIN}, github.com]\n", hint: true},
		"unquoted variable in a flow mapping":  {data: "c: {sandbox: w, connection: ${APP}-github}\n", hint: true},
		"quoted variable in a flow sequence":   {data: "hosts: [\"api.${DOMAIN}\", [\n", hint: false},
		"flow sequence broken, no variable":    {data: "hosts: [a, b\nnext: x\n", hint: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ds := Parse("f.yaml", []byte(tc.data))
			if len(ds) != 1 || ds[0].Code != CodeYAMLInvalid {
				t.Fatalf("want one YAMLInvalid, got %v", ds)
			}
			if got := strings.Contains(ds[0].Message, "must be quoted"); got != tc.hint {
				t.Errorf("hint = %v, want %v: %s", got, tc.hint, ds[0].Message)
			}
		})
	}
}
