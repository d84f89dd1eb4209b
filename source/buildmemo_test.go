package source

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// TestMemoBuilds loads a kustomize overlay, changes the repository, and
// loads it again with the same Memo, from the disk after the disk and
// after a commit of the first state: the build is reused exactly when
// nothing it asked of the filesystem answers otherwise, and the second
// load returns what a load without the Memo returns.
func TestMemoBuilds(t *testing.T) {
	files := map[string]string{
		"base/kustomization.yaml":          "resources: [connection.yaml, secret.yaml, linked.yaml]\n",
		"base/connection.yaml":             connection,
		"base/secret.yaml":                 secretAndClass,
		"overlays/prod/kustomization.yaml": "resources: [../../base]\nnamePrefix: prod-\n",
		"overlays/prod/notes.txt":          "not read by the build\n",
		"other/readme.md":                  "# elsewhere\n",
		"base/parts/a.yaml":                "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\nstringData: {k: v}\n",
		"base/parts/b.yaml":                "apiVersion: v1\nkind: Secret\nmetadata: {name: b}\nstringData: {k: v}\n",
		"base/linked.yaml":                 "link:parts/a.yaml",
	}
	tests := map[string]struct {
		change map[string]string // file → new content; "" removes it, "link:T" makes it a link to T
		reused bool
	}{
		"unchanged":                  {reused: true},
		"a file it does not read":    {change: map[string]string{"other/readme.md": "# changed\n", "overlays/prod/notes.txt": "changed\n"}, reused: true},
		"a file it reads":            {change: map[string]string{"base/connection.yaml": strings.Replace(connection, "api.github.com, github.com", "api.github.com", 1)}},
		"lines moved":                {change: map[string]string{"base/secret.yaml": "# one line down\n" + secretAndClass}},
		"its kustomization":          {change: map[string]string{"overlays/prod/kustomization.yaml": "resources: [../../base]\nnamePrefix: staging-\n"}},
		"a second kustomization":     {change: map[string]string{"base/Kustomization": "resources: [connection.yaml]\n"}},
		"a base it reads removed":    {change: map[string]string{"base/secret.yaml": ""}},
		"a file it asked for exists": {change: map[string]string{"base/kustomization.yml": "resources: []\n"}},
		"a link retargeted":          {change: map[string]string{"base/linked.yaml": "link:parts/b.yaml"}},
		"a link's target changed":    {change: map[string]string{"base/parts/a.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: c}\nstringData: {k: v}\n"}},
		"a link out of the build":    {change: map[string]string{"base/linked.yaml": "link:../other/a.yaml", "other/a.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\nstringData: {k: v}\n"}},
		// The build asks where the link leads, which is not where it led.
		"a link to the same bytes": {change: map[string]string{"base/linked.yaml": "link:parts/c.yaml", "base/parts/c.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\nstringData: {k: v}\n"}},
	}
	for name, tc := range tests {
		for _, from := range []string{"disk", "commit"} {
			t.Run(name+"/"+from, func(t *testing.T) {
				dir, repo := gitRepo(t)
				write(t, dir, files)
				memo := NewMemo()
				opts := Options{Dir: dir, Memo: memo}
				if from == "commit" {
					commitAll(t, repo, "base")
					opts.Tree = headTree(t, dir)
				}
				if _, _, err := testLoad([]string{"overlays/prod"}, opts); err != nil {
					t.Fatal(err)
				}
				if memo.BuildHits() != 0 {
					t.Fatalf("the first load reused %d builds", memo.BuildHits())
				}
				write(t, dir, tc.change)
				again, againDiags, err := testLoad([]string{"overlays/prod"}, Options{Dir: dir, Memo: memo})
				if err != nil {
					t.Fatal(err)
				}
				fresh, freshDiags, err := testLoad([]string{"overlays/prod"}, Options{Dir: dir})
				if err != nil {
					t.Fatal(err)
				}
				if a, f := loadView(again), loadView(fresh); a != f || !reflect.DeepEqual(againDiags, freshDiags) {
					t.Errorf("with the memo:\n%s%v\nwithout:\n%s%v", a, againDiags, f, freshDiags)
				}
				if got := memo.BuildHits() == 1; got != tc.reused {
					t.Errorf("build reused: %v, want %v", got, tc.reused)
				}
				if len(fresh) == 0 && len(freshDiags) == 0 {
					t.Error("the second load read nothing and said nothing")
				}
			})
		}
	}
}

// write writes files as TestMemoBuilds's changes say: "" removes one,
// "link:T" makes it a symbolic link to T.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for f, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		target, link := strings.CutPrefix(body, "link:")
		if body == "" || link {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
		switch {
		case body == "":
		case link:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		default:
			writeFiles(t, dir, map[string]string{f: body})
		}
	}
}

// loadView writes out what a Load gave, as a reader of its documents sees
// them: each document's place and unit, and each node's value with where
// the document says it was written.
func loadView(docs []*Document) string {
	var b strings.Builder
	for _, d := range docs {
		unit := ""
		if u := d.Unit(); u != nil {
			unit = u.Name
		}
		fmt.Fprintf(&b, "%s#%d at %v, unit %q, walked %v\n", d.File, d.Index, d.Pos, unit, d.Walked())
		var walk func(n *yaml.Node, depth int)
		walk = func(n *yaml.Node, depth int) {
			pos, field := d.Where(n)
			fmt.Fprintf(&b, "%*s%d %q %d:%d at %v %q\n", depth*2, "", n.Kind, n.Value, n.Line, n.Column, pos, field)
			for _, c := range n.Content {
				walk(c, depth+1)
			}
		}
		walk(d.Node, 1)
	}
	return b.String()
}

// TestMemoBuildsAtOnce loads a kustomize overlay twice at the same time
// with one Memo, as the two sides of a diff of one commit do: whichever
// builds second finds the first under way and waits for it, so the
// overlay is built once, and both loads give what a load without the Memo
// gives.
func TestMemoBuildsAtOnce(t *testing.T) {
	dir, _ := gitRepo(t)
	write(t, dir, map[string]string{
		"base/kustomization.yaml":          "resources: [connection.yaml, secret.yaml]\n",
		"base/connection.yaml":             connection,
		"base/secret.yaml":                 secretAndClass,
		"overlays/prod/kustomization.yaml": "resources: [../../base]\nnamePrefix: prod-\n",
	})
	fresh, freshDiags, err := testLoad([]string{"overlays/prod"}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := loadView(fresh)
	for range 20 {
		memo := NewMemo()
		var views [2]string
		var diags [2]diag.List
		var errs [2]error
		var wg sync.WaitGroup
		for i := range views {
			wg.Go(func() {
				docs, d, err := testLoad([]string{"overlays/prod"}, Options{Dir: dir, Memo: memo})
				views[i], diags[i], errs[i] = loadView(docs), d, err
			})
		}
		wg.Wait()
		for i := range views {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if views[i] != want || !reflect.DeepEqual(diags[i], freshDiags) {
				t.Fatalf("load %d with the memo:\n%s%v\nwithout:\n%s%v", i, views[i], diags[i], want, freshDiags)
			}
		}
		if memo.BuildHits() != 1 {
			t.Fatalf("two loads at once reused %d builds, want 1", memo.BuildHits())
		}
	}
}
