// Package testrepo makes the repositories tests load: files written under
// a directory, and a git repository committed from them, the same author
// and time in every commit so that the hashes are the same on every run.
// It is for tests only, of the loader's packages and of internal/gitfs.
package testrepo

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Signature is the author and committer of every commit CommitAll makes.
func Signature() *object.Signature {
	return &object.Signature{Name: "keyhole test", Email: "test@keyhole.dev", When: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// WriteFiles creates files (slash-separated names relative to dir →
// contents) under dir, with the directories they need.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Init makes a git repository in a new directory and returns its path.
func Init(t testing.TB) (string, *git.Repository) {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return dir, r
}

// CommitAll stages everything in r's working tree (deletions too) and
// commits it.
func CommitAll(t testing.TB, r *git.Repository, msg string) plumbing.Hash {
	t.Helper()
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	sig := Signature()
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: true})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// CommitBomb stores, in r, a commit whose tree holds top/: width entries
// d0, d1, ... naming one subtree, levels deep, over width files
// f0.yaml, f1.yaml, ... of data, so width^(levels+1) files in a few
// kilobytes of objects, as a pull request can push. It returns the
// commit's hash; no branch points at it.
func CommitBomb(t testing.TB, r *git.Repository, top string, levels, width int, data string) plumbing.Hash {
	t.Helper()
	store := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) plumbing.Hash {
		obj := r.Storer.NewEncodedObject()
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
	w, err := blob.Writer()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
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
		h = store(&tr)
		mode, name = filemode.Dir, "d%d"
	}
	root := object.Tree{Entries: []object.TreeEntry{{Name: top, Mode: filemode.Dir, Hash: h}}}
	sig := Signature()
	c := object.Commit{Author: *sig, Committer: *sig, Message: "bomb", TreeHash: store(&root)}
	return store(&c)
}
