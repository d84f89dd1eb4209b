package source

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
)

// TestSymlinksLeavingTheRepository: a symbolic link whose target is
// outside the git working tree is an error at the link, and nothing is
// read through it, whether a walk finds it, a kustomize build reads it or
// it is named; the same from disk and from a commit (which holds nothing
// outside the tree). Links that stay inside keep working.
func TestSymlinksLeavingTheRepository(t *testing.T) {
	const canary = "canary-outside-7c2f"
	outsideSecret := "apiVersion: v1\nkind: Secret\nmetadata: {name: acme-github-token, namespace: agents}\nstringData: {token: " + canary + "}\n"
	tests := map[string]struct {
		files    map[string]string // inside the repository
		links    map[string]string // inside the repository: name → target ("@" stands for the directory outside)
		paths    []string
		want     []string // diagnostics, as text, prefixes
		wantDocs []string
	}{
		"a file link found by a walk, relative": {
			links: map[string]string{"a/secret.yaml": "../../outside/secret.yaml"},
			paths: []string{"."},
			want:  []string{"a/secret.yaml:1:1: error InputInvalid: symbolic link whose target is outside the git working tree"},
		},
		"a file link found by a walk, absolute": {
			links: map[string]string{"a/agent.yaml": "@/secret.yaml"},
			paths: []string{"a"},
			want:  []string{"a/agent.yaml:1:1: error InputInvalid: symbolic link whose target is outside the git working tree"},
		},
		"a link that leads inside, then out": {
			links: map[string]string{"a/s.yaml": "../hop.yaml", "hop.yaml": "../outside/secret.yaml"},
			paths: []string{"a"},
			want:  []string{"a/s.yaml:1:1: error InputInvalid: symbolic link whose target is outside"},
		},
		"a directory link a kustomization reads through": {
			files: map[string]string{"k/kustomization.yaml": "resources: [base/secret.yaml]\n"},
			links: map[string]string{"k/base": "../../outside"},
			paths: []string{"."},
			want:  []string{"k/base:1:1: error InputInvalid: symbolic link whose target is outside the git working tree"},
		},
		"a file link a named kustomization reads": {
			files: map[string]string{"k/kustomization.yaml": "resources: [secret.yaml]\n"},
			links: map[string]string{"k/secret.yaml": "@/secret.yaml"},
			paths: []string{"k"},
			want:  []string{"k/secret.yaml:1:1: error InputInvalid: symbolic link whose target is outside the git working tree"},
		},
		"a named file that is a link": {
			links: map[string]string{"s.yaml": "../outside/secret.yaml"},
			paths: []string{"s.yaml"},
			want:  []string{"s.yaml:1:1: error InputInvalid: symbolic link whose target is outside the git working tree"},
		},
		// Loops end, on disk as in a commit: a walk reads each file once;
		// a kustomization's path through one resolves, as kustomize
		// resolves it; a chart's load fails as Helm's does.
		"a directory linking to itself, found by a walk": {
			files:    map[string]string{"a/c.yaml": connection},
			links:    map[string]string{"a/loop": "."},
			paths:    []string{"."},
			wantDocs: []string{"a/c.yaml#0 Connection/github-acme"},
		},
		"a chart holding a directory that links to itself": {
			files: map[string]string{"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n", "c/templates/c.yaml": "kind: Connection\n"},
			links: map[string]string{"c/sub/loop": "."},
			paths: []string{"."},
			want:  []string{"c/Chart.yaml:1:1: error HelmRenderFailed: Helm cannot render this chart with its default values (as helm template does, no engine object deploying it): sub/loop/loop/"},
		},
		"a kustomization reading through a directory that links to its parent": {
			files:    map[string]string{"k/kustomization.yaml": "resources: [loop/loop/loop/c.yaml]\n", "k/c.yaml": connection},
			links:    map[string]string{"k/loop": "."},
			paths:    []string{"k"},
			wantDocs: []string{"k/loop/loop/loop/c.yaml#0 Connection/github-acme"},
		},
		"links that stay inside are followed": {
			files:    map[string]string{"real/c.yaml": connection, "k/kustomization.yaml": "resources: [c.yaml]\n", "k/sub/c.yaml": connection},
			links:    map[string]string{"a/c.yaml": "../real/c.yaml", "k/c.yaml": "sub/c.yaml"},
			paths:    []string{"a", "k"},
			wantDocs: []string{"a/c.yaml#0 Connection/github-acme", "k/c.yaml#0 Connection/github-acme"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			top := t.TempDir()
			writeFiles(t, top, map[string]string{"outside/secret.yaml": outsideSecret})
			dir := filepath.Join(top, "repo")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			r, err := git.PlainInit(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			writeFiles(t, dir, tc.files)
			for name, target := range tc.links {
				target = strings.ReplaceAll(target, "@", filepath.Join(top, "outside"))
				p := filepath.Join(dir, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
			}
			commitAll(t, r, "links")
			check := func(from string, opts Options) (string, string) {
				docs, ds, err := testLoad(tc.paths, opts)
				var got []string
				for _, d := range ds {
					got = append(got, d.String())
				}
				if err != nil {
					got = append(got, err.Error())
				}
				if len(got) != len(tc.want) {
					t.Fatalf("%s: diagnostics:\n%s\nwant %d", from, strings.Join(got, "\n"), len(tc.want))
				}
				for i, w := range tc.want {
					if !strings.HasPrefix(got[i], w) {
						t.Errorf("%s: diagnostic %d:\n got %s\nwant %s...", from, i, got[i], w)
					}
				}
				if ids := docIDs(docs); !slices.Equal(ids, tc.wantDocs) {
					t.Errorf("%s: documents %q, want %q", from, ids, tc.wantDocs)
				}
				for _, d := range docs {
					if strings.Contains(d.Node.Value+nodesOf(t, []*Document{d}), canary) {
						t.Errorf("%s: a document holds the outside file's value", from)
					}
				}
				all := strings.Join(got, "\n")
				if strings.Contains(all, canary) || strings.Contains(all, top+"/outside") {
					t.Errorf("%s: a diagnostic names the target or its content:\n%s", from, all)
				}
				return all, strings.Join(docIDs(docs), "\n")
			}
			diskDiags, diskDocs := check("disk", Options{Dir: dir})
			tree := headTree(t, dir)
			emptyWorkTree(t, dir)
			treeDiags, treeDocs := check("commit", Options{Dir: dir, Tree: tree})
			if diskDiags != treeDiags || diskDocs != treeDocs {
				t.Errorf("the commit reads otherwise\ncommit:\n%s\n%s\ndisk:\n%s\n%s", treeDiags, treeDocs, diskDiags, diskDocs)
			}
		})
	}
}
