package gitfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"keyhole.dev/keyhole/internal/testrepo"
)

// headTree opens the repository at dir and returns its HEAD commit's tree.
func headTree(t testing.TB, dir string) *Tree { return treeAt(t, dir, "HEAD") }

// treeAt opens the repository at dir and returns the tree of the commit
// rev names.
func treeAt(t testing.TB, dir, rev string) *Tree {
	t.Helper()
	repo, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := repo.Tree(rev)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestTreeRevisions resolves each form of revision a user types to the
// commit it names.
func TestTreeRevisions(t *testing.T) {
	dir, r := testrepo.Init(t)
	testrepo.WriteFiles(t, dir, map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n"})
	first := testrepo.CommitAll(t, r, "first")
	testrepo.WriteFiles(t, dir, map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\n"})
	second := testrepo.CommitAll(t, r, "second")
	if _, err := r.CreateTag("v1", first, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateTag("v1-annotated", first, &git.CreateTagOptions{Tagger: testrepo.Signature(), Message: "v1"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Storer.SetReference(plumbing.NewHashReference("refs/remotes/origin/main", first)); err != nil {
		t.Fatal(err)
	}
	if err := r.Storer.SetReference(plumbing.NewHashReference("refs/heads/feature", second)); err != nil {
		t.Fatal(err)
	}
	repo, err := OpenRepo(filepath.Join(dir, "a.yaml", "..")) // any path inside finds it
	if err != nil {
		t.Fatal(err)
	}
	if repo.root != dir {
		t.Errorf("Root() = %s, want %s", repo.root, dir)
	}
	for name, c := range map[string]struct {
		rev  string
		want plumbing.Hash
	}{
		"HEAD":                {rev: "HEAD", want: second},
		"HEAD~1":              {rev: "HEAD~1", want: first},
		"HEAD^":               {rev: "HEAD^", want: first},
		"branch":              {rev: "feature", want: second},
		"lightweight tag":     {rev: "v1", want: first},
		"annotated tag":       {rev: "v1-annotated", want: first},
		"remote branch":       {rev: "origin/main", want: first},
		"full hash":           {rev: first.String(), want: first},
		"short hash":          {rev: first.String()[:7], want: first},
		"fully qualified ref": {rev: "refs/heads/feature", want: second},
	} {
		t.Run(name, func(t *testing.T) {
			tree, err := repo.Tree(c.rev)
			if err != nil {
				t.Fatal(err)
			}
			if tree.Commit() != c.want.String() {
				t.Errorf("Tree(%q).Commit() = %s, want %s", c.rev, tree.Commit(), c.want)
			}
		})
	}
}

// TestTreeErrors: what cannot be read is a clear error of the right class.
func TestTreeErrors(t *testing.T) {
	dir, r := testrepo.Init(t)
	testrepo.WriteFiles(t, dir, map[string]string{"a.yaml": "kind: x\n"})
	testrepo.CommitAll(t, r, "first")
	repo, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, rev := range map[string]string{
		"unknown branch": "no-such-branch",
		"empty":          "",
		"flag-like":      "--upload-pack=x",
		"past the root":  "HEAD~5",
		"bad syntax":     "HEAD~~^{",
	} {
		t.Run("revision "+name, func(t *testing.T) {
			_, err := repo.Tree(rev)
			if !errors.Is(err, ErrRevision) {
				t.Fatalf("Tree(%q) error = %v, want ErrRevision", rev, err)
			}
			if !strings.Contains(err.Error(), "unknown revision") || strings.HasSuffix(err.Error(), "EOF") {
				t.Errorf("error %q does not say what is wrong", err)
			}
		})
	}
	t.Run("not a repository", func(t *testing.T) {
		_, err := OpenRepo(t.TempDir())
		if !errors.Is(err, ErrNotRepository) {
			t.Fatalf("OpenRepo error = %v, want ErrNotRepository", err)
		}
	})
	t.Run("path outside the repository", func(t *testing.T) {
		tree, err := repo.Tree("HEAD")
		if err != nil {
			t.Fatal(err)
		}
		_, err = tree.Stat(filepath.Join(filepath.Dir(dir), "elsewhere.yaml"))
		if !errors.Is(err, errOutsideTree) {
			t.Fatalf("Stat outside = %v, want errOutsideTree", err)
		}
	})
}

// TestTreeObjectsUnreadable: a branch whose commit the object store does
// not hold (.git/objects lost, or unreadable) is said to be that, not a
// reference that does not exist.
func TestTreeObjectsUnreadable(t *testing.T) {
	dir, r := testrepo.Init(t)
	testrepo.WriteFiles(t, dir, map[string]string{"a.yaml": "kind: x\n"})
	h := testrepo.CommitAll(t, r, "first")
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	objects := filepath.Join(dir, ".git", "objects")
	if err := os.Rename(objects, objects+"-lost"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(objects, 0o755); err != nil {
		t.Fatal(err)
	}
	repo, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	branch := head.Name().Short()
	_, err = repo.Tree(branch)
	if !errors.Is(err, ErrRevision) {
		t.Fatalf("Tree(%q) error = %v, want ErrRevision", branch, err)
	}
	want := fmt.Sprintf("refs/heads/%s names commit %s, which the repository's objects (.git/objects) do not hold or cannot be read", branch, h)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q\ndoes not say %q", err, want)
	}
	if _, err := repo.Tree("no-such-branch"); err == nil || strings.Contains(err.Error(), ".git/objects") {
		t.Errorf("a branch that does not exist: %v", err)
	}
}

// TestTreeSymlinkLoop: a committed link cycle ends in an error.
func TestTreeSymlinkLoop(t *testing.T) {
	dir, r := testrepo.Init(t)
	for name, target := range map[string]string{"a.yaml": "b.yaml", "b.yaml": "a.yaml"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	testrepo.CommitAll(t, r, "loop")
	tree := headTree(t, dir)
	if _, err := tree.Stat(filepath.Join(dir, "a.yaml")); err == nil || !strings.Contains(err.Error(), "symbolic links") {
		t.Fatalf("Stat of a link cycle = %v", err)
	}
	fi, err := tree.Lstat(filepath.Join(dir, "a.yaml"))
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("Lstat = %v, %v; want the link itself", fi, err)
	}
}

// TestTreeKeepsBlobs reads each file of a commit several times, as the
// loader does: the store is read once per blob while the kept bytes fit,
// every read gives the commit's bytes, and bytes a caller changes are its
// own.
func TestTreeKeepsBlobs(t *testing.T) {
	dir, r := testrepo.Init(t)
	files := map[string]string{"a.yaml": "kind: A\n", "b.yaml": "kind: Bee\n", "same.yaml": "kind: A\n", "big.yaml": strings.Repeat("x", 100) + "\n"}
	testrepo.WriteFiles(t, dir, files)
	testrepo.CommitAll(t, r, "files")
	for name, tc := range map[string]struct {
		keep      int
		wantReads int
	}{
		// a.yaml and same.yaml are one blob.
		"all kept": {keep: KeptBlobBytes, wantReads: 3},
		// Each of the 4 files is read on each of the 3 passes.
		"none kept": {keep: 0, wantReads: 4 * 3},
		// big.yaml does not fit, and is read on each pass.
		"small kept": {keep: 20, wantReads: 2 + 3},
		// The first blob fills what may be kept.
		"exactly one": {keep: len("kind: A\n"), wantReads: 1 + 2*3},
	} {
		t.Run(name, func(t *testing.T) {
			tree := headTree(t, dir)
			defer tree.Close()
			tree.keep = tc.keep
			for range 3 {
				for _, f := range []string{"a.yaml", "b.yaml", "same.yaml", "big.yaml"} {
					abs := filepath.Join(dir, f)
					fi, err := tree.Stat(abs)
					if err != nil {
						t.Fatal(err)
					}
					if fi.Size() != int64(len(files[f])) {
						t.Errorf("%s: size %d, want %d", f, fi.Size(), len(files[f]))
					}
					b, err := tree.ReadFile(abs)
					if err != nil {
						t.Fatal(err)
					}
					if string(b) != files[f] {
						t.Fatalf("%s: read %q, want %q", f, b, files[f])
					}
					b[0] = '!' // the caller's own bytes
				}
			}
			if got := tree.BlobsRead(); got != tc.wantReads {
				t.Errorf("the store was read %d times, want %d", got, tc.wantReads)
			}
		})
	}
}

// TestTreeConcurrent reads one commit from several goroutines at once, as
// builds on every core do: run with -race, it holds the Tree's lock to
// what it guards, and every goroutine reads the commit's bytes.
func TestTreeConcurrent(t *testing.T) {
	dir, r := testrepo.Init(t)
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("d%d/f%d.yaml", i%4, i)] = fmt.Sprintf("kind: K%d\n", i)
	}
	testrepo.WriteFiles(t, dir, files)
	testrepo.CommitAll(t, r, "files")
	tree := headTree(t, dir)
	defer tree.Close()
	kfs, err := tree.KustomizeFS()
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			errs <- func() error {
				for name, want := range files {
					abs := filepath.Join(dir, name)
					var got []byte
					var err error
					if g%2 == 0 {
						got, err = tree.ReadFile(abs)
					} else {
						got, err = kfs.ReadFile(abs)
					}
					if err != nil || string(got) != want {
						return fmt.Errorf("%s: %q, %v; want %q", name, got, err, want)
					}
					if _, err := tree.ReadDir(filepath.Dir(abs)); err != nil {
						return err
					}
					if _, _, err := kfs.CleanedAbs(abs); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestTreeAnswersAsDisk asks a commit's tree and its checkout the same
// questions: the answers, errors included, read word for word the same,
// since the loader quotes them and a diff compares a commit with the disk.
func TestTreeAnswersAsDisk(t *testing.T) {
	dir, r := testrepo.Init(t)
	testrepo.WriteFiles(t, dir, map[string]string{"app/a.yaml": "a: 1\n"})
	if err := os.Symlink("app/a.yaml", filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("app", filepath.Join(dir, "dirlink")); err != nil {
		t.Fatal(err)
	}
	testrepo.CommitAll(t, r, "app")
	tree := headTree(t, dir)
	kfs, err := tree.KustomizeFS()
	if err != nil {
		t.Fatal(err)
	}
	text := func(err error) string {
		if err == nil {
			return "<nil>"
		}
		return err.Error()
	}
	for _, name := range []string{"app", "app/", "missing.yaml", "app/a.yaml/under", "missing/a.yaml", "link.yaml", "dirlink", "dirlink/a.yaml"} {
		p := filepath.Join(dir, name)
		_, treeErr := tree.ReadFile(p)
		_, diskErr := os.ReadFile(p)
		if text(treeErr) != text(diskErr) {
			t.Errorf("ReadFile(%s): tree %q, disk %q", name, text(treeErr), text(diskErr))
		}
		if errors.Is(treeErr, fs.ErrNotExist) != errors.Is(diskErr, fs.ErrNotExist) {
			t.Errorf("ReadFile(%s): tree's error not-exist %v, disk's %v", name, errors.Is(treeErr, fs.ErrNotExist), errors.Is(diskErr, fs.ErrNotExist))
		}
		_, kErr := kfs.ReadFile(p)
		if text(kErr) != text(diskErr) {
			t.Errorf("kustomize ReadFile(%s): tree %q, disk %q", name, text(kErr), text(diskErr))
		}
		for op, stat := range map[string][2]func(string) (fs.FileInfo, error){"Stat": {tree.Stat, os.Stat}, "Lstat": {tree.Lstat, os.Lstat}} {
			treeFi, treeErr := stat[0](p)
			diskFi, diskErr := stat[1](p)
			if text(treeErr) != text(diskErr) {
				t.Errorf("%s(%s): tree %q, disk %q", op, name, text(treeErr), text(diskErr))
			}
			if treeErr == nil && diskErr == nil && (treeFi.Name() != diskFi.Name() || treeFi.Mode().Type() != diskFi.Mode().Type() ||
				!treeFi.IsDir() && treeFi.Size() != diskFi.Size()) {
				t.Errorf("%s(%s): tree %s %v %d, disk %s %v %d", op, name, treeFi.Name(), treeFi.Mode().Type(), treeFi.Size(), diskFi.Name(), diskFi.Mode().Type(), diskFi.Size())
			}
		}
	}
}
