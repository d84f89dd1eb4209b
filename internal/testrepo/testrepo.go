// Package testrepo makes the repositories tests load: files written under
// a directory, and a git repository committed from them, the same author
// and time in every commit so that the hashes are the same on every run.
// It is for tests only, of the loader's packages and of internal/gitfs.
package testrepo

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
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

// Store encodes o (a tree, a commit) into s and returns its hash.
func Store(tb testing.TB, s storer.EncodedObjectStorer, o interface {
	Encode(plumbing.EncodedObject) error
}) plumbing.Hash {
	tb.Helper()
	obj := s.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		tb.Fatal(err)
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// StoreBlob stores data in s as a blob and returns its hash.
func StoreBlob(tb testing.TB, s storer.EncodedObjectStorer, data string) plumbing.Hash {
	tb.Helper()
	obj := s.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.WriteString(w, data); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		tb.Fatal(err)
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
	h := StoreBlob(t, r.Storer, data)
	mode, name := filemode.Regular, "f%d.yaml"
	for range levels + 1 {
		var tr object.Tree
		for i := range width {
			tr.Entries = append(tr.Entries, object.TreeEntry{Name: fmt.Sprintf(name, i), Mode: mode, Hash: h})
		}
		h = Store(t, r.Storer, &tr)
		mode, name = filemode.Dir, "d%d"
	}
	root := object.Tree{Entries: []object.TreeEntry{{Name: top, Mode: filemode.Dir, Hash: h}}}
	sig := Signature()
	return Store(t, r.Storer, &object.Commit{Author: *sig, Committer: *sig, Message: "bomb", TreeHash: Store(t, r.Storer, &root)})
}
