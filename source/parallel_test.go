package source

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"keyhole.dev/keyhole/internal/gitfs"
)

// TestLoadParallelismIsInvisible loads the same trees, from disk and from
// a commit, with one worker and with several, and requires the same
// documents, positions, diagnostics and errors in the same order: files
// parse in parallel, but their results are taken in walk order.
func TestLoadParallelismIsInvisible(t *testing.T) {
	many := map[string]string{}
	for i := range 60 {
		dir := fmt.Sprintf("team-%d", i%7)
		switch i % 6 {
		case 0:
			many[fmt.Sprintf("%s/c-%02d.yaml", dir, i)] = connection + "---\n" + secretAndClass
		case 1:
			many[fmt.Sprintf("%s/bad-%02d.yaml", dir, i)] = "apiVersion: v1\nkind: [\n"
		case 2:
			many[fmt.Sprintf("%s/list-%02d.yaml", dir, i)] = "- a\n- b\n"
		case 3:
			many[fmt.Sprintf("%s/big-%02d.yaml", dir, i)] = connection + strings.Repeat("# padding\n", 200)
		case 4:
			many[fmt.Sprintf("%s/k-%02d/kustomization.yaml", dir, i)] = "resources: [s.yaml]\n"
			many[fmt.Sprintf("%s/k-%02d/s.yaml", dir, i)] = "apiVersion: v1\nkind: Secret\nmetadata: {name: k}\nstringData: {token: x}\n"
		case 5:
			many[fmt.Sprintf("%s/agents/a-%02d/agent.yaml", dir, i)] = agent
		}
	}
	tests := map[string]struct {
		paths  []string
		max    int64
		commit bool
	}{
		"a walked tree": {paths: []string{"repo"}},
		"a tree and files in it named again": {
			paths: []string{"repo/team-0/c-00.yaml", "repo", "repo/team-1/bad-01.yaml"},
		},
		"files over the size limit":       {paths: []string{"repo"}, max: 1500},
		"a missing path among the others": {paths: []string{"repo", "missing.yaml"}},
		"a commit's tree":                 {paths: []string{"repo"}, commit: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir, r := gitRepo(t)
			files := map[string]string{}
			for k, v := range many {
				files["repo/"+k] = v
			}
			writeFiles(t, dir, files)
			opts := Options{Dir: dir, MaxFileSize: tc.max}
			if tc.commit {
				commitAll(t, r, "files")
				repo, err := gitfs.OpenRepo(dir)
				if err != nil {
					t.Fatal(err)
				}
				if opts.Tree, err = repo.Tree("HEAD"); err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(filepath.Join(dir, "repo")); err != nil {
					t.Fatal(err)
				}
			}
			opts.Parallelism = 1
			wantDocs, wantDiags, wantErr := loaded(t, tc.paths, opts)
			if len(wantDocs) == 0 || len(wantDiags) == 0 {
				t.Fatalf("one worker loaded %d documents and %d diagnostics: the case tests too little", len(wantDocs), len(wantDiags))
			}
			for _, workers := range []int{2, 8} {
				for run := range 3 {
					opts.Parallelism = workers
					docs, diags, errText := loaded(t, tc.paths, opts)
					if got, want := strings.Join(docs, "\n---\n"), strings.Join(wantDocs, "\n---\n"); got != want {
						t.Fatalf("%d workers, run %d: documents differ from one worker's\ngot:\n%s\nwant:\n%s", workers, run, got, want)
					}
					if got, want := strings.Join(diags, "\n"), strings.Join(wantDiags, "\n"); got != want {
						t.Fatalf("%d workers, run %d: diagnostics differ from one worker's\ngot:\n%s\nwant:\n%s", workers, run, got, want)
					}
					if errText != wantErr {
						t.Fatalf("%d workers, run %d: error %q, one worker's %q", workers, run, errText, wantErr)
					}
				}
			}
		})
	}
}
