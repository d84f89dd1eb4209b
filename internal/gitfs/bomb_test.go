package gitfs

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"keyhole.dev/keyhole/internal/testrepo"
)

// TestTreeListingBounded: a commit whose tree names one directory over
// and over (a billion files in a few kilobytes) is listed up to
// MaxListedEntries entries, then every ReadDir fails with
// ErrTreeTooLarge and TooLarge says so; a walk of it ends in seconds
// rather than never.
func TestTreeListingBounded(t *testing.T) {
	dir, r := testrepo.Init(t)
	c := testrepo.CommitBomb(t, r, "bomb", 8, 10, "kind: ConfigMap\n")
	tree := treeAt(t, dir, c.String())
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
	small := treeAt(t, dir, testrepo.CommitBomb(t, r, "bomb", 2, 10, "kind: ConfigMap\n").String())
	defer small.Close()
	if _, err := small.ReadDir(filepath.Join(dir, "bomb", "d3", "d4")); err != nil || small.TooLarge() {
		t.Errorf("a small tree: %v, TooLarge %v", err, small.TooLarge())
	}
}

// TestTreeEntryNames: a tree object may name an entry "." or "..", or a
// path with a separator, which git refuses to check out but a pull
// request can push. Listed as they were, "." and ".." sent a walk that
// joins names back into the directory it was listing, for ever (Flux's
// layout of a commit's path ended in a stack overflow). ReadDir refuses
// such a directory, and the files beside it stay readable by path.
func TestTreeEntryNames(t *testing.T) {
	for name, entry := range map[string]string{
		"dot":           ".",
		"dot dot":       "..",
		"a path":        "x/../..",
		"trailing dots": "../../../tmp",
	} {
		t.Run(name, func(t *testing.T) {
			dir, r := testrepo.Init(t)
			conn := testrepo.StoreBlob(t, r.Storer, "kind: ConfigMap\n")
			sub := testrepo.Store(t, r.Storer, &object.Tree{Entries: []object.TreeEntry{{Name: "conn.yaml", Mode: filemode.Regular, Hash: conn}}})
			entries := []object.TreeEntry{{Name: entry, Mode: filemode.Dir, Hash: sub}, {Name: "conn.yaml", Mode: filemode.Regular, Hash: conn}}
			if entry+"/" > "conn.yaml" { // git's order, a directory's name read with a "/"
				entries[0], entries[1] = entries[1], entries[0]
			}
			apps := testrepo.Store(t, r.Storer, &object.Tree{Entries: entries})
			root := testrepo.Store(t, r.Storer, &object.Tree{Entries: []object.TreeEntry{{Name: "apps", Mode: filemode.Dir, Hash: apps}}})
			sig := testrepo.Signature()
			c := testrepo.Store(t, r.Storer, &object.Commit{Author: *sig, Committer: *sig, Message: "names", TreeHash: root})
			tree := treeAt(t, dir, c.String())
			defer tree.Close()
			if _, err := tree.ReadDir(filepath.Join(dir, "apps")); !errors.Is(err, ErrEntryName) {
				t.Errorf("ReadDir of apps: %v, want ErrEntryName", err)
			}
			if _, err := tree.ReadDir(dir); err != nil {
				t.Errorf("ReadDir of the root: %v", err)
			}
			if b, err := tree.ReadFile(filepath.Join(dir, "apps", "conn.yaml")); err != nil || string(b) != "kind: ConfigMap\n" {
				t.Errorf("ReadFile of apps/conn.yaml: %q, %v", b, err)
			}
		})
	}
}
