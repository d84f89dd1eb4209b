package source

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzLoad feeds arbitrary bytes through Load (as standard input) and
// checks the loader's promises: no panic or hang, every diagnostic at a
// position inside the input, every document a mapping without aliases or
// merge keys left, and the same answer twice.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		connection,
		secretAndClass,
		agent,
		secretAndClass + "---\n" + connection,
		"apiVersion: v1\nkind: A\nbase: &b {methods: [GET]}\nrules:\n  - *b\n  - <<: *b\n    methods: [POST]\n",
		billionLaughs(),
		`{"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="}}`,
		"...\n---\napiVersion: v1\r\nkind: A\r\n...\n",
		"\uFEFFapiVersion: v1\nkind: A\nx: {a: 1, a: 2}\n",
		"- a\n- b\n",
		"a:\n\tb: 1\n",
		"apiVersion: v1\nkind: A\nx: &x\n  y: *x\n",
	} {
		f.Add([]byte(seed))
	}
	for _, seed := range encodedSeeds(f) {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		load := func() ([]*Document, []string) {
			docs, ds, err := testLoad([]string{"-"}, Options{Stdin: bytes.NewReader(data), MaxFileSize: 1 << 20, Dir: "/"})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			lines := lineBound(data)
			var out []string
			for _, d := range ds {
				if d.Pos.File != "-" || d.Pos.Line < 1 || d.Pos.Column < 1 || d.Pos.Line > lines {
					t.Fatalf("diagnostic outside the input (%d lines): %v", lines, d)
				}
				out = append(out, d.String())
			}
			return docs, out
		}
		docs, ds := load()
		for _, d := range docs {
			if d.Node == nil || d.Node.Kind != yaml.MappingNode {
				t.Fatalf("document %d is not a mapping", d.Index)
			}
			if d.Pos.Line < 1 || d.Pos.Column < 1 {
				t.Fatalf("document %d at %v", d.Index, d.Pos)
			}
			checkPlain(t, d.Node, 0)
			d.Object()
		}
		docs2, ds2 := load()
		if !reflect.DeepEqual(ds, ds2) || len(docs) != len(docs2) {
			t.Fatalf("two loads differ:\n%v\n%v", ds, ds2)
		}
	})
}

// lineBound is an upper bound on the lines yaml.v3 counts in data: every
// LF, CR, NEL, LS and PS may end one, in the bytes as given or in their
// text decoded from UTF-16 or UTF-32.
func lineBound(data []byte) int {
	n := 0
	for _, b := range [][]byte{data, sniffText(data)} {
		n = max(n, 1+bytes.Count(b, []byte("\n"))+bytes.Count(b, []byte("\r"))+
			bytes.Count(b, []byte("\u0085"))+bytes.Count(b, []byte("\u2028"))+bytes.Count(b, []byte("\u2029")))
	}
	return n
}

// encodedSeeds are seeds saved in UTF-16 and UTF-32, with and without a
// byte order mark, valid and not.
func encodedSeeds(f *testing.F) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(encodings)) {
		out = append(out,
			encode(f, name, connection),
			encode(f, name, "apiVersion: v1\r\nkind: A\u2028x: {a: 1, a: 2}\n"),
			encode(f, name, "kind: Connection\nmetadata: [\n"))
	}
	return append(out,
		"\xFF\xFEa\x00:\x00 \x00\x3D\xD8\n\x00",
		"\xFE\xFF\x00a\x00:\x00",
		"\xFF\xFE\x00\x00k\x00\x00\x00:\x00\x00\x00\x00\x00\x11\x00",
		"\x00\x00\xFE\xFF\x00\x00\xD8\x00")
}

// checkPlain fails when an alias or a merge key is left in the tree.
func checkPlain(t *testing.T, n *yaml.Node, depth int) {
	if depth > 20000 {
		t.Fatal("tree deeper than the parser allows: a cycle?")
	}
	if n.Kind == yaml.AliasNode {
		t.Fatalf("alias left at %d:%d", n.Line, n.Column)
	}
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 && c.Kind == yaml.ScalarNode && c.ShortTag() == "!!merge" {
			t.Fatalf("merge key left at %d:%d", c.Line, c.Column)
		}
		checkPlain(t, c, depth+1)
	}
}

// FuzzParseWalked reads any bytes as a file a walk found, under the scope
// rule (scope.go) and with Lists expanded: no panic, every diagnostic
// inside the input, every document a mapping at a position of its own,
// the same answer twice, and a file that is skipped yields one note and
// nothing else.
func FuzzParseWalked(f *testing.F) {
	for _, seed := range []string{
		connection,
		"{% raw %}\na: {{ .Values.x }}\n{% endraw %}\n",
		"value: \"Bearer {{ .token }}\"\nx: [\n",
		"apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: Secret, metadata: {name: s}}\n  - 3\n",
		"apiVersion: v1\nkind: FooList\nitems: {a: b}\n",
		"apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: List\n    items: [{kind: X}]\n",
		"[1, 2, 3]\n",
		"title: a\ntitle: b\n",
		"kind: Connection\nmetadata: [\n",
		"apiVersion: omnia.altairalabs.ai/v1alpha1\n\x00",
	} {
		f.Add([]byte(seed), "x.yaml")
	}
	for _, seed := range encodedSeeds(f) {
		f.Add([]byte(seed), "x.yaml")
	}
	f.Add([]byte("name: a\nconnectors: [\n"), "agent.yaml")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		if name == "" || strings.ContainsAny(name, "/\x00") {
			name = "x.yaml"
		}
		lines := lineBound(data)
		docs, ds := parse(name, data, true, nil)
		for _, d := range ds {
			if d.Pos.File != name || d.Pos.Line < 1 || d.Pos.Column < 1 || d.Pos.Line > lines {
				t.Fatalf("diagnostic outside the input (%d lines): %v", lines, d)
			}
			if d.Code == CodeInputSkipped && strings.Contains(d.Message, "not read as objects") && (len(ds) != 1 || len(docs) != 0) {
				t.Fatalf("a skipped file gave more than its note: %d docs, %v", len(docs), ds)
			}
		}
		for _, d := range docs {
			if d.Node == nil || d.Node.Kind != yaml.MappingNode || d.Pos.Line < 1 || d.Pos.Column < 1 {
				t.Fatalf("document %d at %v is not a placed mapping", d.Index, d.Pos)
			}
			checkPlain(t, d.Node, 0)
		}
		docs2, ds2 := parse(name, data, true, nil)
		if !reflect.DeepEqual(ds, ds2) || len(docs) != len(docs2) {
			t.Fatalf("two parses differ:\n%v\n%v", ds, ds2)
		}
	})
}
