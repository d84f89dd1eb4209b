package suggest

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const connHead = `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: c, namespace: agents}
spec:
  hosts: [api.example.com]
  credential: {kind: secret, secretRef: {name: s}}
  placement:
    inject:
      - hosts: [api.example.com]
        header: Authorization
        value: "Bearer {{ .token }}"
`

func TestRuleEdit(t *testing.T) {
	tests := map[string]struct {
		rules    string
		method   string
		prefixes []string
		want     string // the rules after the edit
		line     int
	}{
		"flow list of the rule with the method": {
			rules:  "        rules:\n          - methods: [GET]\n            pathPrefixes: [/a] # read-only\n",
			method: "GET", prefixes: []string{"/b"}, line: 13,
			want: "        rules:\n          - methods: [GET]\n            pathPrefixes: [/a, /b] # read-only\n",
		},
		"block list of the rule with the method": {
			rules:  "        rules:\n          - methods: [GET]\n            pathPrefixes:\n              - /a\n              # keep\n          - methods: [POST]\n            pathPrefixes: [/p]\n",
			method: "GET", prefixes: []string{"/b", "/c"}, line: 13,
			want: "        rules:\n          - methods: [GET]\n            pathPrefixes:\n              - /a\n              - /b\n              - /c\n              # keep\n          - methods: [POST]\n            pathPrefixes: [/p]\n",
		},
		"no rule with just the method: a new rule after the last": {
			rules:  "        rules:\n          - methods: [GET, HEAD]\n            pathPrefixes: [/a]\n",
			method: "GET", prefixes: []string{"/b"}, line: 15,
			want: "        rules:\n          - methods: [GET, HEAD]\n            pathPrefixes: [/a]\n          - methods: [GET]\n            pathPrefixes: [/b]\n",
		},
		"a rule with a body condition is left alone": {
			rules:  "        rules:\n          - methods: [POST]\n            pathPrefixes: [/lfs]\n            body: {operation: [download]}\n",
			method: "POST", prefixes: []string{"/lfs"}, line: 16,
			want: "        rules:\n          - methods: [POST]\n            pathPrefixes: [/lfs]\n            body: {operation: [download]}\n          - methods: [POST]\n            pathPrefixes: [/lfs]\n",
		},
		"flow rules": {
			rules:  "        rules: [{methods: [GET], pathPatterns: [/a/*]}]\n",
			method: "GET", prefixes: []string{"/b"}, line: 12,
			want: "        rules: [{methods: [GET], pathPatterns: [/a/*]}, {methods: [GET], pathPrefixes: [/b]}]\n",
		},
		"a path that needs quotes": {
			rules:  "        rules:\n          - methods: [GET]\n            pathPrefixes: [\"/a, b\"]\n",
			method: "GET", prefixes: []string{"/c, d", "/e#f"}, line: 13,
			want: "        rules:\n          - methods: [GET]\n            pathPrefixes: [\"/a, b\", \"/c, d\", \"/e#f\"]\n",
		},
		"no final newline": {
			rules:  "        rules:\n          - methods: [GET]\n            pathPrefixes:\n              - /a",
			method: "GET", prefixes: []string{"/b"}, line: 13,
			want: "        rules:\n          - methods: [GET]\n            pathPrefixes:\n              - /a\n              - /b\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := []byte(connHead + tc.rules)
			var doc yaml.Node
			if err := yaml.Unmarshal(src, &doc); err != nil {
				t.Fatal(err)
			}
			pl, err := ruleEdit("c.yaml", src, doc.Content[0], "api.example.com", tc.method, tc.prefixes)
			if err != nil {
				t.Fatal(err)
			}
			got := string(apply(src, []edit{pl.edit}))
			if got != connHead+tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.TrimPrefix(got, connHead), tc.want)
			}
			if pl.line != tc.line {
				t.Errorf("line %d, want %d", pl.line, tc.line)
			}
			var after yaml.Node
			if err := yaml.Unmarshal([]byte(got), &after); err != nil {
				t.Fatalf("the edit is not YAML: %v", err)
			}
		})
	}
}

func TestRuleEditRefuses(t *testing.T) {
	tests := map[string]string{
		"no entry for the host":  "apiVersion: v1\nspec:\n  placement:\n    inject:\n      - hosts: [other.example.com]\n        rules: [{methods: [GET], pathPrefixes: [/a]}]\n",
		"an entry without rules": "apiVersion: v1\nspec:\n  placement:\n    inject:\n      - hosts: [api.example.com]\n        header: X\n",
		"not a mapping":          "- a\n- b\n",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(in), &doc); err != nil {
				t.Fatal(err)
			}
			if _, err := ruleEdit("c.yaml", []byte(in), doc.Content[0], "api.example.com", "GET", []string{"/b"}); err == nil {
				t.Fatal("no error")
			}
		})
	}
}
