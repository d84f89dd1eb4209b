package source

import (
	"slices"
	"strings"
	"testing"
)

// TestAgentBesideKustomization: an agent file beside a kustomization is
// not a kustomize resource, and a walk does not read a kustomization's
// directory; the build reads it, into its own deploy unit, beside the
// root or beside a base it builds, named or walked, from disk or from a
// commit.
func TestAgentBesideKustomization(t *testing.T) {
	const agentYAML = "name: support\nmode: text\nconnectors:\n  - name: github\n    connection: github-acme\n    sandbox: true\n"
	tests := map[string]struct {
		files map[string]string
		paths []string
		want  []string // file#index kind/name @unit
	}{
		"beside a kustomization a walk finds": {
			files: map[string]string{
				"apps/k/kustomization.yaml": "resources: [connection.yaml]\n",
				"apps/k/connection.yaml":    connection,
				"apps/k/agent.yaml":         agentYAML,
			},
			paths: []string{"apps"},
			want:  []string{"apps/k/connection.yaml#0 Connection/github-acme @apps/k", "apps/k/agent.yaml#0 Agent/support @apps/k"},
		},
		"agent.yml beside a kustomization named": {
			files: map[string]string{
				"k/kustomization.yaml": "resources: [connection.yaml]\n",
				"k/connection.yaml":    connection,
				"k/agent.yml":          agentYAML,
			},
			paths: []string{"k"},
			want:  []string{"k/connection.yaml#0 Connection/github-acme @k", "k/agent.yml#0 Agent/support @k"},
		},
		"beside a base two overlays build": {
			files: map[string]string{
				"base/kustomization.yaml":  "resources: [connection.yaml]\n",
				"base/connection.yaml":     connection,
				"base/agent.yaml":          agentYAML,
				"prod/kustomization.yaml":  "resources: [../base]\nnamePrefix: prod-\n",
				"stage/kustomization.yaml": "resources: [../base]\nnamePrefix: stage-\n",
			},
			paths: []string{"."},
			want: []string{
				"base/connection.yaml#0 Connection/prod-github-acme @prod", "base/agent.yaml#0 Agent/support @prod",
				"base/connection.yaml#0 Connection/stage-github-acme @stage", "base/agent.yaml#0 Agent/support @stage",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir, r := gitRepo(t)
			writeFiles(t, dir, tc.files)
			commitAll(t, r, "agents")
			ids := func(opts Options) []string {
				docs, ds, err := testLoad(tc.paths, opts)
				if err != nil || len(ds) > 0 {
					t.Fatalf("Load: %v\n%v", err, ds)
				}
				var out []string
				for i, id := range docIDs(docs) {
					out = append(out, id+" @"+docs[i].Unit().Name)
				}
				return out
			}
			if got := ids(Options{Dir: dir}); !slices.Equal(got, tc.want) {
				t.Errorf("disk:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
			tree := headTree(t, dir)
			emptyWorkTree(t, dir)
			if got := ids(Options{Dir: dir, Tree: tree}); !slices.Equal(got, tc.want) {
				t.Errorf("commit:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
		})
	}
}
