package source

import (
	"encoding/json"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestJSONEscapedSlash: JSON allows "\/" for "/" (serializers that guard
// against "</script>" write it), and a JSON file is read as kubectl reads
// it. Every node keeps the line and column it has in the file.
func TestJSONEscapedSlash(t *testing.T) {
	tests := map[string]struct {
		in string
		// want is the value of key "p", at line and column.
		want      string
		line, col int
		// next is the column of key "q", after "p"'s value, on line 1.
		next int
	}{
		"one escape": {
			in:   `{"p": "\/repos\/acme", "q": 1}`,
			want: "/repos/acme", line: 1, col: 7, next: 24,
		},
		"an escaped backslash before a slash is two characters": {
			in:   `{"p": "a\\/b", "q": 1}`,
			want: `a\/b`, line: 1, col: 7, next: 16,
		},
		"several lines, the escape on the second": {
			in:   "{\n  \"p\": \"https:\\/\\/x\",\n  \"q\": 1\n}",
			want: "https://x", line: 2, col: 8, next: 3,
		},
		"non-ASCII before the escape": {
			in:   `{"é": "ü\/", "p": "\/", "q": 1}`,
			want: "/", line: 1, col: 19, next: 25,
		},
		"a list": {
			in:   `[{"p": "\/", "q": 2}]`,
			want: "/", line: 1, col: 8, next: 14,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var root yaml.Node
			src, shifts := jsonSlashes([]byte(tc.in))
			if err := yaml.Unmarshal(src, &root); err != nil {
				t.Fatalf("parse: %v", err)
			}
			shifts.restore(&root)
			m := root.Content[0]
			if m.Kind == yaml.SequenceNode {
				m = m.Content[0]
			}
			var p, q *yaml.Node
			for i := 0; i+1 < len(m.Content); i += 2 {
				switch m.Content[i].Value {
				case "p":
					p = m.Content[i+1]
				case "q":
					q = m.Content[i]
				}
			}
			if p.Value != tc.want || p.Line != tc.line || p.Column != tc.col {
				t.Errorf("p = %q at %d:%d; want %q at %d:%d", p.Value, p.Line, p.Column, tc.want, tc.line, tc.col)
			}
			if q.Column != tc.next {
				t.Errorf("q at column %d; want %d", q.Column, tc.next)
			}
		})
	}
}

// TestJSONEscapedSlashOnlyInJSON: YAML that is not JSON keeps yaml.v3's
// reading (as kustomize's), and a file without the escape is not copied.
func TestJSONEscapedSlashOnlyInJSON(t *testing.T) {
	for name, in := range map[string]string{
		"YAML":                "p: \"\\/\"\n",
		"no escape":           `{"p": "/"}`,
		"an escape elsewhere": `{"p": "\n"}`,
	} {
		t.Run(name, func(t *testing.T) {
			src, shifts := jsonSlashes([]byte(in))
			if shifts != nil || string(src) != in {
				t.Errorf("rewrote %q to %q", in, src)
			}
		})
	}
}

// TestParseJSONEscapedSlash reads a Connection in JSON through Parse.
func TestParseJSONEscapedSlash(t *testing.T) {
	in := `{"apiVersion": "omnia.altairalabs.ai\/v1alpha1", "kind": "Connection", "metadata": {"name": "a"},
 "spec": {"hosts": ["api.github.com"], "placement": {"inject": [{"rules": [{"pathPrefix": "\/repos\/acme"}]}]}}}`
	docs, ds := Parse("c.json", []byte(in))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	if o := docs[0].Object(); o.APIVersion != "omnia.altairalabs.ai/v1alpha1" || o.Kind != "Connection" {
		t.Errorf("object %+v", o)
	}
	var w struct {
		Spec struct {
			Placement struct {
				Inject []struct {
					Rules []struct {
						PathPrefix string `yaml:"pathPrefix"`
					} `yaml:"rules"`
				} `yaml:"inject"`
			} `yaml:"placement"`
		} `yaml:"spec"`
	}
	if err := docs[0].Node.Decode(&w); err != nil {
		t.Fatal(err)
	}
	if got := w.Spec.Placement.Inject[0].Rules[0].PathPrefix; got != "/repos/acme" {
		t.Errorf("pathPrefix %q; want /repos/acme", got)
	}
}

// FuzzJSONSlashes: on any input jsonSlashes does not panic, removes only
// the backslashes it records, and on valid JSON changes nothing JSON
// reads.
func FuzzJSONSlashes(f *testing.F) {
	for _, s := range []string{`{"a": "\/"}`, `["\\/", "\/\/"]`, `{"é\/": "\"\/"}`, "{\n\"a\":\"\\/\"}", `[`, `{"a": "\`, `p: "\/"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, shifts := jsonSlashes(in)
		n := 0
		for _, at := range shifts {
			n += len(at)
		}
		if len(out) != len(in)-n {
			t.Fatalf("%q became %q, %d backslashes recorded", in, out, n)
		}
		if !json.Valid(in) {
			return
		}
		var a, b any
		if json.Unmarshal(in, &a) != nil || json.Unmarshal(out, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("%q read as JSON differs from %q", in, out)
		}
		var root yaml.Node
		if yaml.Unmarshal(out, &root) == nil {
			shifts.restore(&root)
		}
	})
}
