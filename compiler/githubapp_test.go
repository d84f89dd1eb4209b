package compiler

import (
	"maps"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestGitHubAppScope derives a minted token's scope from a Connection's
// rules: the repositories the paths name, read for GET and HEAD and
// write otherwise, metadata:read with any permission.
func TestGitHubAppScope(t *testing.T) {
	tests := map[string]struct {
		inject    string
		repos     []string
		perms     map[string]string
		unscoped  []string
		unlimited bool // no rules: the installation's own permissions
	}{
		"pulls read and write": {
			inject: `[{hosts: [api.github.com], rules: [{methods: [GET, POST], pathPrefixes: [/repos/acme/widgets/pulls]}]}]`,
			repos:  []string{"widgets"}, perms: map[string]string{"pull_requests": "write", "metadata": "read"},
		},
		"contents read": {
			inject: `[{hosts: [api.github.com], rules: [{methods: [GET], pathPrefixes: [/repos/acme/widgets/contents]}]}]`,
			repos:  []string{"widgets"}, perms: map[string]string{"contents": "read", "metadata": "read"},
		},
		"git fetch": {
			inject: `[{hosts: [github.com], rules: [{methods: [GET], pathPatterns: [/acme/widgets.git/info/refs]}, {methods: [POST], pathPatterns: [/acme/widgets.git/git-upload-pack]}]}]`,
			repos:  []string{"widgets"}, perms: map[string]string{"contents": "read", "metadata": "read"},
		},
		"git push": {
			inject: `[{hosts: [github.com], rules: [{methods: [POST], pathPatterns: [/acme/widgets/git-receive-pack]}]}]`,
			repos:  []string{"widgets"}, perms: map[string]string{"contents": "write", "metadata": "read"},
		},
		"write wins over read": {
			inject: `[{hosts: [api.github.com], rules: [{methods: [PUT], pathPrefixes: [/repos/acme/a/contents]}, {methods: [GET], pathPrefixes: [/repos/acme/b/contents]}]}]`,
			repos:  []string{"a", "b"}, perms: map[string]string{"contents": "write", "metadata": "read"},
		},
		"any repository": {
			inject: `[{hosts: [api.github.com], rules: [{methods: [GET], pathPatterns: [/repos/acme/*/issues/**]}, {methods: [GET], pathPrefixes: [/repos/acme/widgets/pulls]}]}]`,
			perms:  map[string]string{"issues": "read", "pull_requests": "read", "metadata": "read"},
		},
		"commit statuses": {
			inject: `[{hosts: [api.github.com], rules: [{methods: [POST], pathPatterns: [/repos/acme/widgets/commits/*/statuses]}]}]`,
			repos:  []string{"widgets"}, perms: map[string]string{"statuses": "write", "metadata": "read"},
		},
		"no rules": {
			inject:    `[{hosts: [api.github.com]}]`,
			unlimited: true,
		},
		"unscoped": {
			inject:   `[{hosts: [api.github.com], rules: [{methods: [POST], pathPrefixes: [/graphql, /repos/acme/widgets]}]}]`,
			perms:    map[string]string{},
			unscoped: []string{"/graphql", "/repos/acme/widgets"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var w connectionWire
			if err := yaml.Unmarshal([]byte(`{spec: {placement: {inject: `+tc.inject+`}}}`), &w); err != nil {
				t.Fatal(err)
			}
			s := githubAppScope(&w, "api.github.com")
			if !slices.Equal(s.Repositories, tc.repos) {
				t.Errorf("repositories %v, want %v", s.Repositories, tc.repos)
			}
			if tc.unlimited != (s.Permissions == nil) || !tc.unlimited && !maps.Equal(s.Permissions, tc.perms) {
				t.Errorf("permissions %v, want %v", s.Permissions, tc.perms)
			}
			var unscoped []string
			for _, u := range s.Unscoped {
				unscoped = append(unscoped, u.path)
			}
			if !slices.Equal(unscoped, tc.unscoped) {
				t.Errorf("unscoped %v, want %v", unscoped, tc.unscoped)
			}
		})
	}
}
