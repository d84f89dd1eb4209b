package schema

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestEveryKindIsInlined guards the fast path: a kind whose schema stops
// inlining (a new keyword, a reference to itself) would quietly validate
// at the old cost.
func TestEveryKindIsInlined(t *testing.T) {
	v := newValidator(t)
	for _, k := range kinds {
		if v.inlined[k] == nil {
			t.Errorf("%s has no inlined schema", k)
		}
	}
}

func TestInline(t *testing.T) {
	defs := map[string]any{
		"A":    map[string]any{"type": "string"},
		"B":    map[string]any{"properties": map[string]any{"a": map[string]any{"$ref": "#/$defs/A"}}},
		"Self": map[string]any{"items": map[string]any{"$ref": "#/$defs/Self"}},
		"a/b":  map[string]any{"const": 1},
	}
	tests := map[string]struct {
		in   any
		want any // nil: refused
	}{
		"a reference alone becomes the definition": {
			in:   map[string]any{"$ref": "#/$defs/A"},
			want: map[string]any{"type": "string"},
		},
		"nested references are inlined too": {
			in:   map[string]any{"$ref": "#/$defs/B"},
			want: map[string]any{"properties": map[string]any{"a": map[string]any{"type": "string"}}},
		},
		"a reference beside keywords joins allOf": {
			in: map[string]any{"$ref": "#/$defs/A", "maxLength": 3, "allOf": []any{map[string]any{"minLength": 1}}},
			want: map[string]any{"maxLength": 3, "allOf": []any{
				map[string]any{"minLength": 1}, map[string]any{"type": "string"}}},
		},
		"an escaped definition name": {
			in:   map[string]any{"$ref": "#/$defs/a~1b"},
			want: map[string]any{"const": 1},
		},
		"a comment stays": {
			in:   map[string]any{"$comment": "c", "type": "string"},
			want: map[string]any{"$comment": "c", "type": "string"},
		},
		"values are data, not schemas": {
			in:   map[string]any{"const": map[string]any{"$ref": "#/$defs/A"}, "enum": []any{map[string]any{"$id": "x"}}},
			want: map[string]any{"const": map[string]any{"$ref": "#/$defs/A"}, "enum": []any{map[string]any{"$id": "x"}}},
		},
		"a definition that refers to itself": {in: map[string]any{"$ref": "#/$defs/Self"}},
		"a reference into a definition":      {in: map[string]any{"$ref": "#/$defs/B/properties/a"}},
		"a reference to another document":    {in: map[string]any{"$ref": "https://example.com/s.json"}},
		"a missing definition":               {in: map[string]any{"$ref": "#/$defs/Nope"}},
		"a reference that is not a string":   {in: map[string]any{"$ref": 1}},
		"an $id":                             {in: map[string]any{"$id": "x", "type": "string"}},
		"a dynamic reference":                {in: map[string]any{"items": map[string]any{"$dynamicRef": "#x"}}},
		"nested definitions":                 {in: map[string]any{"$defs": map[string]any{"X": true}}},
		"properties are names, whatever they are called": {
			in: map[string]any{"properties": map[string]any{
				"const": map[string]any{"$ref": "#/$defs/A"},
				"$ref":  map[string]any{"items": map[string]any{"$ref": "#/$defs/A"}},
			}},
			want: map[string]any{"properties": map[string]any{
				"const": map[string]any{"type": "string"},
				"$ref":  map[string]any{"items": map[string]any{"type": "string"}},
			}},
		},
		"every applicator is walked": {
			in: map[string]any{
				"anyOf":             []any{map[string]any{"$ref": "#/$defs/A"}, true},
				"not":               map[string]any{"$ref": "#/$defs/A"},
				"patternProperties": map[string]any{"^x": map[string]any{"$ref": "#/$defs/A"}},
				"prefixItems":       []any{map[string]any{"$ref": "#/$defs/A"}},
			},
			want: map[string]any{
				"anyOf":             []any{map[string]any{"type": "string"}, true},
				"not":               map[string]any{"type": "string"},
				"patternProperties": map[string]any{"^x": map[string]any{"type": "string"}},
				"prefixItems":       []any{map[string]any{"type": "string"}},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := inline(defs, tt.in, nil)
			if tt.want == nil {
				if ok {
					t.Fatalf("inline = %v, want refused", got)
				}
				return
			}
			if !ok {
				t.Fatal("inline refused")
			}
			if g, w := mustJSON(t, got), mustJSON(t, tt.want); g != w {
				t.Fatalf("inline =\n%s\nwant\n%s", g, w)
			}
		})
	}
}

// TestInlinedAgrees requires the inlined schema of each kind to accept
// exactly what the original accepts, on every document of the fixtures
// and examples and on variants of each: every field dropped in turn,
// every scalar replaced by values of other types and shapes, every list
// emptied, an unknown field added to every mapping.
func TestInlinedAgrees(t *testing.T) {
	v := newValidator(t)
	var docs []*yaml.Node
	for _, root := range []string{"testdata", "../compiler/testdata", "../examples"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || (!strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".yml")) {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			dec := yaml.NewDecoder(bytes.NewReader(b))
			for {
				var n yaml.Node
				if err := dec.Decode(&n); err != nil {
					break // the end, or YAML that does not parse: no document to compare on
				}
				docs = append(docs, &n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var checked, accepted int
	for _, doc := range docs {
		for _, k := range kinds {
			ok := agree(t, v, k, doc)
			checked++
			if ok {
				accepted++
			}
		}
		// A variant is compared on its own kind's schema, where it is
		// nearly valid and the two schemas' every branch is taken.
		own := ownKinds(doc)
		for _, variant := range variants(doc) {
			for _, k := range own {
				agree(t, v, k, variant)
				checked++
			}
		}
	}
	// The fixtures hold valid documents of every kind: a comparison that
	// never saw the two accept would prove little.
	if len(docs) < 50 || accepted < 20 {
		t.Fatalf("%d documents, %d accepted: too few to compare the schemas on", len(docs), accepted)
	}
	t.Logf("%d documents, %d validations compared, %d of the documents' own accepted", len(docs), checked, accepted)
}

// ownKinds is the kind doc says it is, or, when it says none, the two
// kinds that carry no apiVersion and kind.
func ownKinds(doc *yaml.Node) []Kind {
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	var apiVersion, kind string
	for i := 0; root.Kind == yaml.MappingNode && i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "apiVersion":
			apiVersion = root.Content[i+1].Value
		case "kind":
			kind = root.Content[i+1].Value
		}
	}
	if k, ok := Lookup(apiVersion, kind); ok {
		return []Kind{k}
	}
	if apiVersion == "" && kind == "" {
		return []Kind{KindAgent, KindConnector}
	}
	return nil
}

// agree fails t when the inlined schema and the original disagree on n,
// and reports whether the original accepted it.
func agree(t testing.TB, v *Validator, k Kind, n *yaml.Node) bool {
	t.Helper()
	c := converter{}
	val := c.value(n, 0)
	if c.overflow {
		return false
	}
	orig := v.schemas[k].Validate(val) == nil
	if in := v.inlined[k].Validate(val) == nil; in != orig {
		var b strings.Builder
		if err := yaml.NewEncoder(&b).Encode(n); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("%s: the original schema accepts: %v, the inlined one: %v, on\n%s", k, orig, in, b.String())
	}
	return orig
}

// variants returns copies of doc, each changed in one place.
func variants(doc *yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	replacements := []*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: ""},
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: "UPPER case"},
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.Repeat("a", 300)},
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: "/a/b"},
		{Kind: yaml.ScalarNode, Tag: "!!int", Value: "-1"},
		{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"},
		{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"},
		{Kind: yaml.MappingNode, Tag: "!!map"},
		{Kind: yaml.SequenceNode, Tag: "!!seq"},
	}
	var walk func(n *yaml.Node, edit func(func(*yaml.Node)))
	walk = func(n *yaml.Node, edit func(func(*yaml.Node))) {
		switch n.Kind {
		case yaml.DocumentNode:
			for i := range n.Content {
				walk(n.Content[i], func(f func(*yaml.Node)) { edit(func(c *yaml.Node) { f(c.Content[i]) }) })
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				edit(func(c *yaml.Node) { c.Content = append(c.Content[:i:i], c.Content[i+2:]...) })
				walk(n.Content[i+1], func(f func(*yaml.Node)) { edit(func(c *yaml.Node) { f(c.Content[i+1]) }) })
			}
			edit(func(c *yaml.Node) {
				c.Content = append(c.Content[:len(c.Content):len(c.Content)],
					&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "zzUnknown"},
					&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: "1"})
			})
		case yaml.SequenceNode:
			edit(func(c *yaml.Node) { c.Content = nil })
			for i := range n.Content {
				walk(n.Content[i], func(f func(*yaml.Node)) { edit(func(c *yaml.Node) { f(c.Content[i]) }) })
			}
		case yaml.ScalarNode:
			for _, r := range replacements {
				edit(func(c *yaml.Node) { *c = *r })
			}
		}
	}
	walk(doc, func(f func(*yaml.Node)) {
		c := copyNode(doc)
		f(c)
		out = append(out, c)
	})
	return out
}

func copyNode(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, e := range n.Content {
		c.Content[i] = copyNode(e)
	}
	return &c
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
