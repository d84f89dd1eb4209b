package suggest

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/proxy/config"
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
		"a rule that lets a WebSocket upgrade is left alone": {
			rules:  "        rules:\n          - methods: [GET]\n            pathPrefixes: [/realtime]\n            websocket: true\n",
			method: "GET", prefixes: []string{"/models"}, line: 16,
			want: "        rules:\n          - methods: [GET]\n            pathPrefixes: [/realtime]\n            websocket: true\n          - methods: [GET]\n            pathPrefixes: [/models]\n",
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

// FuzzRuleEditPath holds the edit to writing any path a rule can name so
// that YAML reads it back as that path, in a flow list, a block list
// and a new rule: a path from the log never changes the YAML around it.
func FuzzRuleEditPath(f *testing.F) {
	for _, p := range []string{"/a", "/a, b", "/e#f", "/x: y", "/\"q\"", "/'s'", "/[a]", "/{a}", "/a\\b", "/é", "/a\tb", "/ a", "/a #b", "/-", "/&a", "/*a"} {
		f.Add(p)
	}
	rules := map[string]string{
		"flow":  "        rules:\n          - methods: [GET]\n            pathPrefixes: [/z]\n",
		"block": "        rules:\n          - methods: [GET]\n            pathPrefixes:\n              - /z\n",
		"new":   "        rules:\n          - methods: [POST]\n            pathPrefixes: [/z]\n",
	}
	f.Fuzz(func(t *testing.T, p string) {
		if config.CheckPathPrefix(p) != nil {
			return
		}
		for name, r := range rules {
			src := []byte(connHead + r)
			var doc yaml.Node
			if err := yaml.Unmarshal(src, &doc); err != nil {
				t.Fatal(err)
			}
			pl, err := ruleEdit("c.yaml", src, doc.Content[0], "api.example.com", "GET", []string{p})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var after struct {
				Spec struct {
					Placement struct {
						Inject []struct {
							Rules []struct {
								Methods      []string `yaml:"methods"`
								PathPrefixes []string `yaml:"pathPrefixes"`
							} `yaml:"rules"`
						} `yaml:"inject"`
					} `yaml:"placement"`
				} `yaml:"spec"`
			}
			out := apply(src, []edit{pl.edit})
			if err := yaml.Unmarshal(out, &after); err != nil {
				t.Fatalf("%s: %q: the edit is not YAML: %v\n%s", name, p, err, out)
			}
			rs := after.Spec.Placement.Inject[0].Rules
			last := rs[len(rs)-1].PathPrefixes
			if last[len(last)-1] != p {
				t.Fatalf("%s: wrote %q, read back %q\n%s", name, p, last[len(last)-1], out)
			}
		}
	})
}

// TestWarnings: an edit that lets code push with git, or send any GraphQL
// operation, says so; reads and other writes get no warning, since their
// paths say what they allow.
func TestWarnings(t *testing.T) {
	tests := map[string]struct {
		method string
		paths  []string
		want   []string
	}{
		"git push": {"POST", []string{"/acme/widgets.git/git-receive-pack"},
			[]string{"/acme/widgets.git/git-receive-pack is git push: code in the sandbox could push to acme/widgets with the credential"}},
		"git push with a query": {"POST", []string{"/acme/w/git-receive-pack?x=1"},
			[]string{"/acme/w/git-receive-pack is git push: code in the sandbox could push to acme/w with the credential"}},
		"GraphQL": {"POST", []string{"/api/graphql"},
			[]string{"POST /api/graphql allows every GraphQL operation, mutations included; if the agent only reads, give the rule graphql: {operations: [query]} instead"}},
		"git fetch":           {"POST", []string{"/acme/widgets.git/git-upload-pack"}, nil},
		"an issue comment":    {"POST", []string{"/repos/acme/widgets/issues/7/comments"}, nil},
		"a GET of the path":   {"GET", []string{"/acme/widgets.git/git-receive-pack", "/graphql"}, nil},
		"a graphql-like name": {"POST", []string{"/graphqlx"}, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := warnings(tc.method, tc.paths); !slices.Equal(got, tc.want) {
				t.Errorf("warnings(%s, %q) = %q, want %q", tc.method, tc.paths, got, tc.want)
			}
		})
	}
}
