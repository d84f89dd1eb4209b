package testrepo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestCommitAllSameHash: the same files committed in two repositories
// give the same commit, and a file deleted from the working tree leaves
// the next commit.
func TestCommitAllSameHash(t *testing.T) {
	files := map[string]string{"a.yaml": "a: 1\n", "sub/b.yaml": "b: 2\n"}
	dir1, r1 := Init(t)
	dir2, r2 := Init(t)
	WriteFiles(t, dir1, files)
	WriteFiles(t, dir2, files)
	if h1, h2 := CommitAll(t, r1, "m"), CommitAll(t, r2, "m"); h1 != h2 {
		t.Fatalf("the same files committed as %s and %s", h1, h2)
	}
	if err := os.Remove(filepath.Join(dir1, "sub", "b.yaml")); err != nil {
		t.Fatal(err)
	}
	h := CommitAll(t, r1, "without b")
	c, err := r1.CommitObject(h)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.File("sub/b.yaml"); err == nil {
		t.Fatal("the deleted file is still in the commit")
	}
	if _, err := tree.File("a.yaml"); err != nil {
		t.Fatalf("a.yaml: %v", err)
	}
}

// TestCommitBomb: the commit's tree holds width^(levels+1) files of data
// under top, in width directories a level.
func TestCommitBomb(t *testing.T) {
	_, r := Init(t)
	c, err := r.CommitObject(CommitBomb(t, r, "top", 2, 3, "data\n"))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = tree.Files().ForEach(func(f *object.File) error {
		files++
		if !strings.HasPrefix(f.Name, "top/d") {
			t.Errorf("file %s is not under top/", f.Name)
		}
		if got, err := f.Contents(); err != nil || got != "data\n" {
			t.Errorf("%s holds %q, %v", f.Name, got, err)
		}
		return nil
	})
	if err != nil || files != 27 {
		t.Errorf("%d files, %v; want 27", files, err)
	}
}
