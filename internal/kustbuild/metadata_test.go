package kustbuild

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

func TestWithBuildMetadata(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string // buildMetadata after, or nil when the input is returned as is
	}{
		"none set":               {in: "resources: [a.yaml]\n", want: []string{"originAnnotations", "transformerAnnotations"}},
		"user options kept":      {in: "buildMetadata: [managedByLabel]\n", want: []string{"managedByLabel", "originAnnotations", "transformerAnnotations"}},
		"already set":            {in: "buildMetadata: [transformerAnnotations, originAnnotations]\n", want: []string{"transformerAnnotations", "originAnnotations"}},
		"not a list is replaced": {in: "buildMetadata: yes\n", want: []string{"originAnnotations", "transformerAnnotations"}},
		"not a mapping":          {in: "- a\n"},
		"invalid YAML":           {in: "a: [\n"},
		"empty":                  {in: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out := WithBuildMetadata([]byte(tc.in))
			if tc.want == nil {
				if !bytes.Equal(out, []byte(tc.in)) {
					t.Errorf("changed input it should leave to kustomize:\n%s", out)
				}
				return
			}
			var k struct {
				BuildMetadata []string `yaml:"buildMetadata"`
			}
			if err := yaml.Unmarshal(out, &k); err != nil {
				t.Fatalf("output does not parse: %v\n%s", err, out)
			}
			if !slices.Equal(k.BuildMetadata, tc.want) {
				t.Errorf("buildMetadata = %q; want %q", k.BuildMetadata, tc.want)
			}
		})
	}
}

// FuzzWithBuildMetadata checks what WithBuildMetadata promises: a
// document that is not one YAML mapping comes back byte for byte; a
// mapping comes back as a mapping with every field of the input unchanged,
// a buildMetadata list that keeps the input's entries in order and holds
// each annotation option exactly once, and applying it again changes
// nothing. An identity function fails on the first corpus entry.
func FuzzWithBuildMetadata(f *testing.F) {
	for _, s := range []string{"resources: [a.yaml]\n", "buildMetadata: [managedByLabel]\n", "- a\n", "a: &a [*a]\n", "buildMetadata: {a: b}\n",
		"# c\nresources:\n  - a.yaml # d\nbuildMetadata: [originAnnotations]\n", "{}\n", "a: 1\n---\nb: 2\n", "buildMetadata: [x, transformerAnnotations, x]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := WithBuildMetadata(data)
		in, ok := firstMapping(data)
		if !ok {
			if !bytes.Equal(out, data) {
				t.Fatalf("changed a document that is not a mapping:\n%q\n→\n%q", data, out)
			}
			return
		}
		got, ok := firstMapping(out)
		if !ok {
			t.Fatalf("the output of a mapping is not one:\n%q\n→\n%q", data, out)
		}
		inFields, inMeta := splitBuildMetadata(in)
		gotFields, gotMeta := splitBuildMetadata(got)
		if len(inFields) != len(gotFields) {
			t.Fatalf("fields %d → %d:\n%q\n→\n%q", len(inFields), len(gotFields), data, out)
		}
		for i := range inFields {
			if !sameNode(inFields[i], gotFields[i]) {
				t.Fatalf("field %d changed:\n%q\n→\n%q", i/2, data, out)
			}
		}
		if gotMeta == nil || gotMeta.Kind != yaml.SequenceNode {
			t.Fatalf("no buildMetadata list in:\n%q", out)
		}
		var want []string
		if inMeta != nil && inMeta.Kind == yaml.SequenceNode {
			for _, n := range inMeta.Content {
				want = append(want, n.Value)
			}
		}
		for _, opt := range []string{originAnnotationsOpt, transformerAnnotsOpt} {
			if !slices.Contains(want, opt) {
				want = append(want, opt)
			}
		}
		var have []string
		for _, n := range gotMeta.Content {
			have = append(have, n.Value)
		}
		if !slices.Equal(have, want) {
			t.Fatalf("buildMetadata %q, want %q, from:\n%q", have, want, data)
		}
		again, _ := firstMapping(WithBuildMetadata(out))
		if !sameNode(again, got) {
			t.Fatalf("not idempotent on:\n%q", out)
		}
	})
}

// firstMapping decodes the first document of data as WithBuildMetadata
// does and returns its root when it is a mapping.
func firstMapping(data []byte) (*yaml.Node, bool) {
	var doc yaml.Node
	if DecodeYAML(yaml.NewDecoder(bytes.NewReader(data)), &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, false
	}
	return doc.Content[0], true
}

// splitBuildMetadata returns a mapping's key and value nodes other than
// buildMetadata's, in order, and buildMetadata's value (the last one).
func splitBuildMetadata(m *yaml.Node) (fields []*yaml.Node, meta *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == buildMetadataField {
			meta = m.Content[i+1]
			continue
		}
		fields = append(fields, m.Content[i], m.Content[i+1])
	}
	return fields, meta
}

// sameNode compares two YAML trees by what they mean: kind, resolved tag,
// value (any spelling of null is null) and children; an alias by the
// anchor it names.
func sameNode(a, b *yaml.Node) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Kind != b.Kind || a.ShortTag() != b.ShortTag() || len(a.Content) != len(b.Content) {
		return false
	}
	if a.Value != b.Value && a.ShortTag() != "!!null" {
		return false // every spelling of null is null
	}
	if a.Kind == yaml.AliasNode {
		return true
	}
	for i := range a.Content {
		if !sameNode(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}

// TestWritten: a scalar's value as the engine applies it is the value
// kustomize's own writing of the object reads back (RNode.MarshalJSON,
// which Resource.AsYAML calls): a folded scalar with a more-indented line
// gains a blank line before it; any other scalar is as written.
func TestWritten(t *testing.T) {
	const grafana = "object.spec.template.spec.containers.exists(c,\n  c.image.startsWith(\"docker.io/grafana/\")\n)"
	tests := map[string]struct {
		src  string
		want string
	}{
		"folded, a more-indented line": {
			src:  "expression: >-\n  object.spec.template.spec.containers.exists(c,\n    c.image.startsWith(\"docker.io/grafana/\")\n  )\n",
			want: "object.spec.template.spec.containers.exists(c,\n\n  c.image.startsWith(\"docker.io/grafana/\")\n)",
		},
		"folded, lines folded into one": {src: "expression: >-\n  a\n  b\n", want: "a b"},
		"folded, a blank line":          {src: "expression: >\n  a\n\n  b\n", want: "a\nb\n"},
		"literal, a more-indented line": {src: "expression: |-\n  " + strings.ReplaceAll(grafana, "\n", "\n  ") + "\n", want: grafana},
		"plain":                         {src: "expression: a b\n", want: "a b"},
		"double-quoted with breaks":     {src: "expression: \"a\\n  b\"\n", want: "a\n  b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rn, err := kyaml.Parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			n := rn.YNode().Content[1]
			if got := Written(n); got != tc.want {
				t.Errorf("Written = %q, want %q", got, tc.want)
			}
			// What kustomize writes of the object, read back.
			js, err := rn.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var back struct{ Expression string }
			if err := json.Unmarshal(js, &back); err != nil {
				t.Fatal(err)
			}
			if back.Expression != tc.want {
				t.Errorf("kustomize writes %q, want %q", back.Expression, tc.want)
			}
			// A copy (BuiltNode's) holds it, in a style writing it as it is.
			c := copyNode(rn.YNode())
			out, err := kyaml.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var again struct{ Expression string }
			if err := yaml.Unmarshal(out, &again); err != nil || again.Expression != tc.want {
				t.Errorf("the copy written out reads %q (%v), want %q:\n%s", again.Expression, err, tc.want, out)
			}
		})
	}
}
