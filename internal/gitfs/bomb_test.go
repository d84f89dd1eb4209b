package gitfs

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

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
	small, err := repo.Tree(testrepo.CommitBomb(t, r, "bomb", 2, 10, "kind: ConfigMap\n").String())
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if _, err := small.ReadDir(filepath.Join(dir, "bomb", "d3", "d4")); err != nil || small.TooLarge() {
		t.Errorf("a small tree: %v, TooLarge %v", err, small.TooLarge())
	}
}
