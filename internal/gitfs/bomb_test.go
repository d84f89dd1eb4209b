package gitfs

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// commitBomb stores, in r, a commit whose tree holds bomb/: width
// entries naming one subtree, levels deep, over width files of data, so
// width^(levels+1) files in a few kilobytes of objects; it returns the
// commit's hash.
func commitBomb(t testing.TB, r *git.Repository, levels, width int, data string) plumbing.Hash {
	t.Helper()
	store := func(o interface {
		Encode(plumbing.EncodedObject) error
	}, typ plumbing.ObjectType) plumbing.Hash {
		obj := r.Storer.NewEncodedObject()
		obj.SetType(typ)
		if err := o.Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := r.Storer.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	blob := r.Storer.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, _ := blob.Writer()
	w.Write([]byte(data))
	w.Close()
	h, err := r.Storer.SetEncodedObject(blob)
	if err != nil {
		t.Fatal(err)
	}
	mode, name := filemode.Regular, "f%d.yaml"
	for range levels + 1 {
		var tr object.Tree
		for i := range width {
			tr.Entries = append(tr.Entries, object.TreeEntry{Name: fmt.Sprintf(name, i), Mode: mode, Hash: h})
		}
		h = store(&tr, plumbing.TreeObject)
		mode, name = filemode.Dir, "d%d"
	}
	top := object.Tree{Entries: []object.TreeEntry{{Name: "bomb", Mode: filemode.Dir, Hash: h}}}
	c := object.Commit{Author: *testSig, Committer: *testSig, Message: "bomb", TreeHash: store(&top, plumbing.TreeObject)}
	return store(&c, plumbing.CommitObject)
}

// TestTreeListingBounded: a commit whose tree names one directory over
// and over (a billion files in a few kilobytes) is listed up to
// MaxListedEntries entries, then every ReadDir fails with
// ErrTreeTooLarge and TooLarge says so; a walk of it ends in seconds
// rather than never.
func TestTreeListingBounded(t *testing.T) {
	dir, r := gitRepo(t)
	c := commitBomb(t, r, 8, 10, "kind: ConfigMap\n")
	repo, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := repo.Tree(c.String())
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	start := time.Now()
	var walkErr error
	var listed int
	var visit func(d string) bool
	visit = func(d string) bool {
		entries, err := tree.ReadDir(d)
		if err != nil {
			walkErr = err
			return false
		}
		for _, e := range entries {
			listed++
			if e.IsDir() && !visit(filepath.Join(d, e.Name())) {
				return false
			}
		}
		return true
	}
	visit(dir)
	if !errors.Is(walkErr, ErrTreeTooLarge) {
		t.Fatalf("walk ended with %v after %d entries, want ErrTreeTooLarge", walkErr, listed)
	}
	if listed > MaxListedEntries {
		t.Errorf("listed %d entries, more than %d", listed, MaxListedEntries)
	}
	if !tree.TooLarge() {
		t.Error("TooLarge is false")
	}
	if _, err := tree.ReadDir(dir); !errors.Is(err, ErrTreeTooLarge) {
		t.Errorf("a later ReadDir: %v, want ErrTreeTooLarge", err)
	}
	t.Logf("listed %d entries in %s", listed, time.Since(start))

	// A tree within the bound reads whole.
	small, err := repo.Tree(commitBomb(t, r, 2, 10, "kind: ConfigMap\n").String())
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if _, err := small.ReadDir(filepath.Join(dir, "bomb", "d3", "d4")); err != nil || small.TooLarge() {
		t.Errorf("a small tree: %v, TooLarge %v", err, small.TooLarge())
	}
}
