//go:build e2e

package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
)

// readOnlyGitHubConfig is the proxy config an agent's read-only github
// connector gets (docs/spec.md §8): the catalog's hosts and, on each,
// the read-only rules that hold there, as the compiler converts them, with the credential substituted
// for the placeholder omnia-injected-company.
func readOnlyGitHubConfig(t *testing.T) string {
	t.Helper()
	cat, err := schema.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	gh := cat["github"]
	c := config.Config{APIVersion: config.APIVersion, Kind: config.Kind, Sandbox: config.SandboxRef{Name: "support"}}
	for _, h := range gh.Hosts {
		var rules []config.Rule
		readOnly, _ := gh.ReadOnlyOn(h.Host)
		for _, r := range readOnly {
			rules = append(rules, compiler.ProxyRule(r))
		}
		c.Hosts = append(c.Hosts, config.Host{
			Name: h.Host, Connection: "company",
			Inject: config.Inject{Secret: "acme-github-token", Substitute: &config.SubstituteInject{Placeholder: "omnia-injected-company", Key: "token"}},
			Rules:  rules,
		})
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "github-readonly.json")
	writeFile(t, path, b)
	return path
}

// TestGhGraphQLReads runs the real gh through the read-only github
// connector: its GraphQL reads (gh issue list, gh pr view, gh api graphql
// with a query) reach api.github.com with the credential; a mutation
// through gh api graphql is refused by the proxy before api.github.com
// sees it.
func TestGhGraphQLReads(t *testing.T) {
	gh := requireTool(t, "gh")
	w := newWorld(t, readOnlyGitHubConfig(t))
	env := w.ghEnv(t, "GH_TOKEN=omnia-injected-company", "GH_PAGER=cat")
	reads := map[string]struct {
		args []string
		// want is what gh prints from the fake's answer; op is a word
		// of the document gh sent.
		want, op string
	}{
		"gh issue list":         {args: []string{"issue", "list", "-R", "acme/widgets"}, want: "Widgets wobble", op: "issues"},
		"gh pr view":            {args: []string{"pr", "view", "3", "-R", "acme/widgets"}, want: "Steady the widgets", op: "pullRequest"},
		"gh api graphql, query": {args: []string{"api", "graphql", "-f", "query=query { viewer { login } }"}, want: "acme-bot", op: "viewer"},
	}
	for name, tc := range reads {
		t.Run(name, func(t *testing.T) {
			before := len(w.apiState.graphQLSeen())
			res := w.runClient(t, t.TempDir(), env, gh, tc.args...)
			if res.err != nil {
				t.Fatalf("gh %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), res.err, res.stdout, res.stderr)
			}
			if !strings.Contains(res.stdout, tc.want) {
				t.Errorf("gh printed %q, want %q in it", res.stdout, tc.want)
			}
			seen := w.apiState.graphQLSeen()[before:]
			if len(seen) == 0 {
				t.Fatal("api.github.com saw no GraphQL request")
			}
			found := false
			for _, q := range seen {
				found = found || strings.Contains(q, tc.op)
				if strings.Contains(q, "mutation") {
					t.Errorf("a read sent a mutation: %s", q)
				}
			}
			if !found {
				t.Errorf("no document gh sent names %s: %q", tc.op, seen)
			}
		})
	}

	writes := map[string][]string{
		"a mutation":                   {"api", "--include", "graphql", "-f", "query=mutation { addStar(input: {starrableId: \"1\"}) { clientMutationId } }"},
		"a mutation beside a query":    {"api", "--include", "graphql", "-f", "query=query Q { viewer { login } } mutation M { addStar(input: {starrableId: \"1\"}) { clientMutationId } }", "-f", "operationName=Q"},
		"a mutation named as a query":  {"api", "--include", "graphql", "-f", "query=mutation viewer { addStar(input: {starrableId: \"1\"}) { clientMutationId } }"},
		"a subscription":               {"api", "--include", "graphql", "-f", "query=subscription { issueUpdated { id } }"},
		"a mutation behind a fragment": {"api", "--include", "graphql", "-f", "query=query { ...F } fragment F on Mutation { addStar(input: {starrableId: \"1\"}) { clientMutationId } }"},
	}
	for name, args := range writes {
		t.Run(name, func(t *testing.T) {
			w.wantGHRefused(t, env, gh, args...)
		})
	}
}
