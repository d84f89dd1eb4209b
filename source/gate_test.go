package source

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
)

// TestGitignoreNeverHidesTracked: a file git tracks is in the repository,
// and a cluster gets it, whatever a .gitignore says; a pull request that
// adds a .gitignore matching it (or its directory) beside it hides it
// from neither check nor diff, on the disk or in the commit. An untracked
// file the .gitignore matches is still skipped.
func TestGitignoreNeverHidesTracked(t *testing.T) {
	conn := func(name string) string {
		return "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: " + name + "}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: t}}\n"
	}
	dir, r := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"deploy/admin.yaml":      conn("admin"),
		"deploy/sub/nested.yaml": conn("nested"),
	})
	commitAll(t, r, "the sandboxes")
	// The pull request's .gitignore, committed after the files it names,
	// and an untracked file it matches.
	writeFiles(t, dir, map[string]string{
		".gitignore":          "admin.yaml\nsub/\nlocal*.yaml\n",
		"deploy/local-x.yaml": conn("untracked"),
	})
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Add(".gitignore"); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Commit("ignore them", &git.CommitOptions{Author: testSig, Committer: testSig}); err != nil {
		t.Fatal(err)
	}
	names := func(opts Options) []string {
		docs, _, err := Load([]string{"deploy"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range docs {
			out = append(out, d.Object().Name)
		}
		slices.Sort(out)
		return out
	}
	want := []string{"admin", "nested"}
	if got := names(Options{Dir: dir}); !slices.Equal(got, want) {
		t.Errorf("from disk: read %v, want %v (tracked files read, the untracked one skipped)", got, want)
	}
	if got := names(Options{Dir: dir, Tree: headTree(t, dir)}); !slices.Equal(got, want) {
		t.Errorf("from the commit: read %v, want %v", got, want)
	}
	_, ds, _ := Load([]string{"deploy"}, Options{Dir: dir})
	var notes []string
	for _, f := range Ignored(ds) {
		notes = append(notes, filepath.ToSlash(f))
	}
	if !slices.ContainsFunc(notes, func(f string) bool { return strings.HasSuffix(f, "local-x.yaml") }) {
		t.Errorf("the untracked ignored file is not named as skipped: %v", notes)
	}
}
