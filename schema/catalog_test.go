package schema

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestCatalogGitHub(t *testing.T) {
	cat, err := Catalog()
	if err != nil {
		t.Fatal(err)
	}
	gh, ok := cat["github"]
	if !ok {
		t.Fatal("no github connector")
	}
	if gh.Env != "GITHUB_TOKEN" {
		t.Errorf("env = %q, want GITHUB_TOKEN", gh.Env)
	}
	hosts := map[string]ConnectorInject{}
	for _, h := range gh.Hosts {
		hosts[h.Host] = h.Inject
	}
	tests := map[string]struct {
		host        string
		header      string
		valuePrefix string
		basicUser   string
	}{
		"api bearer":     {host: "api.github.com", header: "Authorization", valuePrefix: "Bearer "},
		"uploads bearer": {host: "uploads.github.com", header: "Authorization", valuePrefix: "Bearer "},
		"git basic":      {host: "github.com", basicUser: "x-access-token"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in, ok := hosts[tc.host]
			if !ok {
				t.Fatalf("no host %s", tc.host)
			}
			switch {
			case tc.header != "":
				if in.Header == nil || in.Header.Name != tc.header || in.Header.ValuePrefix != tc.valuePrefix || in.Basic != nil {
					t.Errorf("inject = %+v, want header %s: %q", in, tc.header, tc.valuePrefix)
				}
			default:
				if in.Basic == nil || in.Basic.Username != tc.basicUser || in.Header != nil {
					t.Errorf("inject = %+v, want basic user %s", in, tc.basicUser)
				}
			}
		})
	}
	if len(gh.Hosts) != len(tests) {
		t.Errorf("github has %d hosts, want %d", len(gh.Hosts), len(tests))
	}
	// The read-only rules docs/spec.md §8 gives: reads, git fetch, LFS
	// download, GraphQL queries, each POST on the host that serves it.
	want := []Rule{
		{Methods: []string{"GET", "HEAD"}, PathPrefixes: []string{"/"}},
		{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/git-upload-pack"}, Hosts: []string{"github.com"}},
		{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/info/lfs/objects/batch"}, Body: map[string][]string{"operation": {"download"}}, Hosts: []string{"github.com"}},
		{Methods: []string{"POST"}, PathPatterns: []string{"/graphql"}, GraphQL: &GraphQL{Operations: []string{"query"}}, Hosts: []string{"api.github.com"}},
	}
	if len(gh.ReadOnly) != len(want) {
		t.Fatalf("github readOnly has %d rules, want %d", len(gh.ReadOnly), len(want))
	}
	for i, got := range gh.ReadOnly {
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("readOnly[%d] = %+v, want %+v", i, got, want[i])
		}
	}
	for _, r := range gh.ReadOnly {
		for _, p := range r.PathPatterns {
			if p == "/*/*/git-receive-pack" {
				t.Error("read-only github allows git-receive-pack (push)")
			}
		}
	}
}

// TestCatalogRuleHosts holds every built-in connector to what the
// compiler requires of an extension: a rule names only the connector's
// own hosts, and each host has a rule, since a proxy host without rules
// would allow every request.
func TestCatalogRuleHosts(t *testing.T) {
	cat, err := Catalog()
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range cat {
		if c.ReadOnly == nil {
			continue
		}
		own := map[string]bool{}
		for _, h := range c.Hosts {
			own[h.Host] = true
			if rules, index := c.ReadOnlyOn(h.Host); len(rules) == 0 || len(index) != len(rules) {
				t.Errorf("%s: host %s has %d read-only rules (%d indexes), want at least one", name, h.Host, len(rules), len(index))
			}
		}
		for i, r := range c.ReadOnly {
			for _, h := range r.Hosts {
				if !own[h] {
					t.Errorf("%s: readOnly[%d] names host %s, which is not the connector's", name, i, h)
				}
			}
		}
	}
}

// TestReadOnlyOn: a rule without hosts holds on every host; one with
// hosts only on those, and the indexes are the catalog's.
func TestReadOnlyOn(t *testing.T) {
	cat, err := Catalog()
	if err != nil {
		t.Fatal(err)
	}
	gh := cat["github"]
	for _, tt := range []struct {
		host  string
		index []int
	}{
		{"api.github.com", []int{0, 3}},
		{"uploads.github.com", []int{0}},
		{"github.com", []int{0, 1, 2}},
		{"example.com", []int{0}},
	} {
		rules, index := gh.ReadOnlyOn(tt.host)
		if !reflect.DeepEqual(index, tt.index) {
			t.Errorf("ReadOnlyOn(%s) indexes = %v, want %v", tt.host, index, tt.index)
		}
		for k, r := range rules {
			if !reflect.DeepEqual(r, gh.ReadOnly[index[k]]) {
				t.Errorf("ReadOnlyOn(%s)[%d] is not readOnly[%d]", tt.host, k, index[k])
			}
		}
	}
}

// TestCatalogEntriesValidate round-trips every built-in entry through
// YAML and the Connector schema: the Go types' YAML names and the CUE
// must agree, or a repository's extension could not be written.
func TestCatalogEntriesValidate(t *testing.T) {
	cat, err := Catalog()
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"anthropic", "github", "gitlab", "linear", "npm", "openai", "slack"}
	if got := slices.Sorted(maps.Keys(cat)); !slices.Equal(got, wantNames) {
		t.Errorf("catalog has %v, want %v", got, wantNames)
	}
	v := newValidator(t)
	for name, c := range cat {
		t.Run(name, func(t *testing.T) {
			if len(c.Tools) == 0 {
				t.Error("no tools")
			}
			b, err := yaml.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if vs := v.Validate(KindConnector, parse(t, string(b))); len(vs) > 0 {
				t.Errorf("entry does not validate as a Connector:\n%s", lines(vs))
			}
			var back Connector
			if err := yaml.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.Name != c.Name || len(back.Hosts) != len(c.Hosts) || len(back.ReadOnly) != len(c.ReadOnly) {
				t.Errorf("YAML round trip changed the entry: %+v", back)
			}
		})
	}
}

func TestCatalogReturnsFreshCopies(t *testing.T) {
	a, err := Catalog()
	if err != nil {
		t.Fatal(err)
	}
	a["github"] = Connector{Name: "github", Env: "CHANGED"}
	b, err := Catalog()
	if err != nil {
		t.Fatal(err)
	}
	if b["github"].Env != "GITHUB_TOKEN" {
		t.Error("a caller's change to the catalog leaked into the next call")
	}
}

func TestMergeCatalog(t *testing.T) {
	gh := Connector{Name: "github", Env: "GITHUB_TOKEN", Hosts: []ConnectorHost{{Host: "api.github.com"}}, Tools: []string{"a"}}
	ghe := Connector{Name: "github", Env: "GHE_TOKEN", Hosts: []ConnectorHost{{Host: "api.ghe.acme.internal"}}}
	jira := Connector{Name: "jira", Env: "JIRA_TOKEN"}
	tests := map[string]struct {
		base, extra map[string]Connector
		want        map[string]string // name -> env
		wantTools   int               // tools of github in the result
	}{
		"extra adds":           {base: map[string]Connector{"github": gh}, extra: map[string]Connector{"jira": jira}, want: map[string]string{"github": "GITHUB_TOKEN", "jira": "JIRA_TOKEN"}, wantTools: 1},
		"extra replaces whole": {base: map[string]Connector{"github": gh}, extra: map[string]Connector{"github": ghe}, want: map[string]string{"github": "GHE_TOKEN"}, wantTools: 0},
		"no extra":             {base: map[string]Connector{"github": gh}, want: map[string]string{"github": "GITHUB_TOKEN"}, wantTools: 1},
		"no base":              {extra: map[string]Connector{"jira": jira}, want: map[string]string{"jira": "JIRA_TOKEN"}},
		"both empty":           {want: map[string]string{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			baseBefore := maps.Clone(tc.base)
			got := MergeCatalog(tc.base, tc.extra)
			envs := map[string]string{}
			for k, c := range got {
				envs[k] = c.Env
			}
			if !maps.Equal(envs, tc.want) {
				t.Errorf("MergeCatalog = %v, want %v", envs, tc.want)
			}
			if g, ok := got["github"]; ok && len(g.Tools) != tc.wantTools {
				t.Errorf("github tools = %v, want %d (an override must not inherit fields)", g.Tools, tc.wantTools)
			}
			if len(tc.base) != len(baseBefore) || tc.base["github"].Env != baseBefore["github"].Env {
				t.Error("MergeCatalog modified base")
			}
		})
	}
}
