package gitfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
	"keyhole.dev/keyhole/internal/testrepo"
)

// history is a repository's history made in memory: a tree of dirs ×
// files YAML files written once, and commits that each change one file
// of churn/ (files of them), so that the versions of a file and of its
// directory make delta chains in a pack; a last commit removes churn/,
// so that HEAD holds the same objects however long the history.
type history struct {
	mem     *memory.Storage
	head    plumbing.Hash
	commits []plumbing.Hash
}

func makeHistory(tb testing.TB, commits, dirs, files int) *history {
	tb.Helper()
	h := &history{mem: memory.NewStorage()}
	content := func(dir string, f, version int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-f%03d\n  namespace: default\ndata:\n", dir, f)
		for k := range 24 {
			fmt.Fprintf(&b, "  key-%02d: value %d of a file that changes a little each time\n", k, k)
		}
		fmt.Fprintf(&b, "  version: \"%d\"\n", version)
		return b.String()
	}
	dir := func(name string, version int) []object.TreeEntry {
		var entries []object.TreeEntry
		for f := range files {
			entries = append(entries, object.TreeEntry{Name: fmt.Sprintf("f%03d.yaml", f), Mode: filemode.Regular, Hash: testrepo.StoreBlob(tb, h.mem, content(name, f, version))})
		}
		return entries
	}
	var static []object.TreeEntry
	for d := range dirs {
		name := fmt.Sprintf("d%02d", d)
		static = append(static, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: testrepo.Store(tb, h.mem, &object.Tree{Entries: dir(name, 0)})})
	}
	commit := func(msg string, root []object.TreeEntry) {
		c := &object.Commit{Author: *testrepo.Signature(), Committer: *testrepo.Signature(), Message: msg, TreeHash: testrepo.Store(tb, h.mem, &object.Tree{Entries: root})}
		if !h.head.IsZero() {
			c.ParentHashes = []plumbing.Hash{h.head}
		}
		h.head = testrepo.Store(tb, h.mem, c)
		h.commits = append(h.commits, h.head)
	}
	churn := dir("churn", 0)
	for i := range commits {
		churn[i%files].Hash = testrepo.StoreBlob(tb, h.mem, content("churn", i%files, i+1))
		// "churn" sorts before "d00", as a tree's entries must.
		commit(fmt.Sprintf("change %d\n", i), append([]object.TreeEntry{{Name: "churn", Mode: filemode.Dir, Hash: testrepo.Store(tb, h.mem, &object.Tree{Entries: churn})}}, static...))
	}
	commit("drop churn\n", static)
	return h
}

// hashes is every object of the history, sorted.
func (h *history) hashes(tb testing.TB) []plumbing.Hash {
	tb.Helper()
	iter, err := h.mem.IterEncodedObjects(plumbing.AnyObject)
	if err != nil {
		tb.Fatal(err)
	}
	var out []plumbing.Hash
	if err := iter.ForEach(func(o plumbing.EncodedObject) error {
		out = append(out, o.Hash())
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	slices.SortFunc(out, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// store writes the history into a new repository at dir: the objects
// of each group in a pack of their own (with reference deltas when
// refDeltas, else offset deltas, as git writes), the loose ones each in
// its file, and main (HEAD) at the last commit.
func (h *history) store(tb testing.TB, dir string, refDeltas bool, packs [][]plumbing.Hash, loose []plumbing.Hash) {
	tb.Helper()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		tb.Fatal(err)
	}
	fsys := r.Storer.(*filesystem.Storage)
	for _, group := range packs {
		w, err := fsys.PackfileWriter()
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := packfile.NewEncoder(w, h.mem, refDeltas).Encode(group, 10); err != nil {
			tb.Fatal(err)
		}
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	for _, hash := range loose {
		o, err := h.mem.EncodedObject(plumbing.AnyObject, hash)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := fsys.SetEncodedObject(o); err != nil {
			tb.Fatal(err)
		}
	}
	if err := r.Storer.SetReference(plumbing.NewHashReference(plumbing.Master, h.head)); err != nil {
		tb.Fatal(err)
	}
}

// goGitStorage opens the repository at dir with go-git's own storage,
// what keyhole read objects through before objectStore.
func goGitStorage(tb testing.TB, dir string) *filesystem.Storage {
	tb.Helper()
	r, err := git.PlainOpen(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return r.Storer.(*filesystem.Storage)
}

// TestObjectStoreAsGoGit: every object of a repository reads through
// objectStore as through go-git's own storage (type, size, bytes), in
// every layout git leaves objects in; a name the repository lacks is
// plumbing.ErrObjectNotFound; a short hash expands to the same names.
func TestObjectStoreAsGoGit(t *testing.T) {
	h := makeHistory(t, 120, 4, 6)
	all := h.hashes(t)
	half := len(all) / 2
	// Every third object loose, the rest in one pack.
	var loose, packed []plumbing.Hash
	for i, hash := range all {
		if i%3 == 0 {
			loose = append(loose, hash)
		} else {
			packed = append(packed, hash)
		}
	}
	tests := map[string]struct {
		refDeltas bool
		packs     [][]plumbing.Hash
		loose     []plumbing.Hash
	}{
		"one pack, offset deltas":    {packs: [][]plumbing.Hash{all}},
		"one pack, reference deltas": {refDeltas: true, packs: [][]plumbing.Hash{all}},
		"two packs":                  {packs: [][]plumbing.Hash{all[:half], all[half:]}},
		"loose and packed":           {packs: [][]plumbing.Hash{packed}, loose: loose},
		"all loose":                  {loose: all},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			h.store(t, dir, tc.refDeltas, tc.packs, tc.loose)
			want := goGitStorage(t, dir)
			defer want.Close()
			got := newObjectStore(goGitStorage(t, dir))
			defer got.Close()
			for _, hash := range all {
				wo, err := want.EncodedObject(plumbing.AnyObject, hash)
				if err != nil {
					t.Fatalf("go-git: %s: %v", hash, err)
				}
				wantData := readAll(t, wo)
				for _, typ := range []plumbing.ObjectType{plumbing.AnyObject, wo.Type()} {
					o, err := got.EncodedObject(typ, hash)
					if err != nil {
						t.Fatalf("EncodedObject(%s, %s): %v", typ, hash, err)
					}
					if o.Hash() != hash || o.Type() != wo.Type() || o.Size() != wo.Size() || !bytes.Equal(readAll(t, o), wantData) {
						t.Fatalf("EncodedObject(%s, %s) = %s %s of %d bytes, want %s of %d", typ, hash, o.Hash(), o.Type(), o.Size(), wo.Type(), wo.Size())
					}
				}
				other := plumbing.BlobObject
				if wo.Type() == plumbing.BlobObject {
					other = plumbing.TreeObject
				}
				if _, err := got.EncodedObject(other, hash); !errors.Is(err, plumbing.ErrObjectNotFound) {
					t.Errorf("EncodedObject(%s, %s of type %s) error = %v, want ErrObjectNotFound", other, hash, wo.Type(), err)
				}
				size, err := got.EncodedObjectSize(hash)
				if err != nil || size != wo.Size() {
					t.Errorf("EncodedObjectSize(%s) = %d, %v; want %d", hash, size, err, wo.Size())
				}
				// Read right after its size, as the loader reads a file
				// after its stat: a small loose object was read whole then.
				if o, err := got.EncodedObject(wo.Type(), hash); err != nil || !bytes.Equal(readAll(t, o), wantData) {
					t.Errorf("EncodedObject(%s) after its size: %v, or other bytes", hash, err)
				}
				if _, err := got.EncodedObjectSize(hash); err != nil {
					t.Fatal(err)
				}
				if _, err := got.EncodedObject(other, hash); !errors.Is(err, plumbing.ErrObjectNotFound) {
					t.Errorf("EncodedObject(%s, %s of type %s) after its size: error = %v, want ErrObjectNotFound", other, hash, wo.Type(), err)
				}
				if err := got.HasEncodedObject(hash); err != nil {
					t.Errorf("HasEncodedObject(%s) = %v", hash, err)
				}
			}
			missing := plumbing.ComputeHash(plumbing.BlobObject, []byte("in no commit"))
			if _, err := got.EncodedObject(plumbing.AnyObject, missing); !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Errorf("EncodedObject(missing) error = %v, want ErrObjectNotFound", err)
			}
			if _, err := got.EncodedObjectSize(missing); !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Errorf("EncodedObjectSize(missing) error = %v, want ErrObjectNotFound", err)
			}
			if err := got.HasEncodedObject(missing); !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Errorf("HasEncodedObject(missing) error = %v, want ErrObjectNotFound", err)
			}
			for _, hash := range []plumbing.Hash{all[0], all[len(all)/3], all[len(all)-1], missing} {
				for _, n := range []int{1, 2, 3} {
					w, err := want.HashesWithPrefix(hash[:n])
					if err != nil {
						t.Fatal(err)
					}
					g, err := got.HashesWithPrefix(hash[:n])
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(sortedHashes(g), sortedHashes(w)) {
						t.Errorf("HashesWithPrefix(%x) = %d names, want %d", hash[:n], len(g), len(w))
					}
				}
			}
		})
	}
}

func readAll(t *testing.T, o plumbing.EncodedObject) []byte {
	t.Helper()
	r, err := o.Reader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sortedHashes(hs []plumbing.Hash) []plumbing.Hash {
	out := slices.Clone(hs)
	slices.SortFunc(out, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// TestTreeOfPackedHistory: a commit deep in a packed history loads as
// the same commit does from loose objects, through OpenRepo and the
// TestObjectStoreRepackedMeanwhile: a git gc that runs while keyhole
// reads (git commit starts one in the background) moves the loose
// objects into a new pack and deletes them; every object still reads,
// as git reads it, through the pack that appeared. A pack whose index
// git has not written yet is passed over until it has one.
func TestObjectStoreRepackedMeanwhile(t *testing.T) {
	h := makeHistory(t, 30, 2, 4)
	all := h.hashes(t)
	tests := map[string]struct {
		read func(s *objectStore, hash plumbing.Hash) error
	}{
		"EncodedObject": {read: func(s *objectStore, hash plumbing.Hash) error {
			_, err := s.EncodedObject(plumbing.AnyObject, hash)
			return err
		}},
		"EncodedObjectSize": {read: func(s *objectStore, hash plumbing.Hash) error {
			_, err := s.EncodedObjectSize(hash)
			return err
		}},
		"HasEncodedObject": {read: func(s *objectStore, hash plumbing.Hash) error { return s.HasEncodedObject(hash) }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			h.store(t, dir, false, nil, all)
			got := newObjectStore(goGitStorage(t, dir))
			defer got.Close()
			if err := tc.read(got, all[0]); err != nil {
				t.Fatalf("before the gc: %v", err)
			}
			// The gc: one pack of every object, then the loose ones deleted.
			gc := goGitStorage(t, dir)
			w, err := gc.PackfileWriter()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := packfile.NewEncoder(w, h.mem, false).Encode(all, 10); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			for _, hash := range all {
				s := hash.String()
				if err := os.Remove(filepath.Join(dir, ".git", "objects", s[:2], s[2:])); err != nil {
					t.Fatal(err)
				}
			}
			// Another pack still being written: no index yet.
			unfinished := filepath.Join(dir, ".git", "objects", "pack", "pack-"+strings.Repeat("ab", 20)+".pack")
			if err := os.WriteFile(unfinished, []byte("PACK"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, hash := range all {
				if err := tc.read(got, hash); err != nil {
					t.Fatalf("after the gc: %s: %v", hash, err)
				}
			}
			missing := plumbing.ComputeHash(plumbing.BlobObject, []byte("in no commit"))
			if err := tc.read(got, missing); !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Errorf("a name in no pack: %v, want ErrObjectNotFound", err)
			}
		})
	}
}

// TestTreeOfPackedHistory: a commit read from a pack holds the same files
// as the commit read from loose objects, for each of the forms of
// revisions a user types.
func TestTreeOfPackedHistory(t *testing.T) {
	h := makeHistory(t, 60, 3, 4)
	all := h.hashes(t)
	packed, loose := t.TempDir(), t.TempDir()
	h.store(t, packed, false, [][]plumbing.Hash{all}, nil)
	h.store(t, loose, false, nil, all)
	load := func(dir, rev string) []string {
		t.Helper()
		repo, err := OpenRepo(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer repo.Close()
		tree, err := repo.Tree(rev)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		var walk func(d string)
		walk = func(d string) {
			entries, err := tree.ReadDir(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				p := filepath.Join(d, e.Name())
				if e.IsDir() {
					walk(p)
					continue
				}
				b, err := tree.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				rel, _ := filepath.Rel(dir, p)
				out = append(out, filepath.ToSlash(rel)+"\n"+string(b))
			}
		}
		walk(dir)
		return out
	}
	for name, rev := range map[string]string{
		"HEAD":       "HEAD",
		"HEAD~17":    "HEAD~17",
		"short hash": h.commits[5].String()[:9],
		"first":      h.commits[0].String(),
	} {
		t.Run(name, func(t *testing.T) {
			got, want := load(packed, rev), load(loose, rev)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("packed: %d files, loose: %d (want the same)", len(got), len(want))
			}
		})
	}
}

// TestObjectStoreCorrupt: a pack or index that is not what git writes is
// a clear error when opened or read, never a panic or a wrong object.
func TestObjectStoreCorrupt(t *testing.T) {
	h := makeHistory(t, 30, 2, 3)
	all := h.hashes(t)
	tests := map[string]struct {
		ext     string // the file changed: idx or pack
		change  func(b []byte) []byte
		errText string
	}{
		"index of another version":       {ext: "idx", change: func(b []byte) []byte { b[7] = 3; return b }, errText: "not a version 2 pack index"},
		"index truncated":                {ext: "idx", change: func(b []byte) []byte { return b[:len(b)-7] }, errText: "bytes for"},
		"index too short for its header": {ext: "idx", change: func(b []byte) []byte { return b[:100] }, errText: "reading its header"},
		"fan-out decreasing": {ext: "idx", change: func(b []byte) []byte {
			copy(b[idxHeader+4*10:], []byte{0xff, 0xff, 0xff, 0xff})
			return b
		}, errText: "fan-out"},
		"index of another pack": {ext: "idx", change: func(b []byte) []byte { b[len(b)-idxTrailer] ^= 1; return b }, errText: "it indexes pack"},
		"offsets out of the pack": {ext: "idx", change: func(b []byte) []byte {
			n := len(all)
			for i := range n {
				copy(b[idxNames+n*24+i*4:], []byte{0x7f, 0xff, 0xff, 0x00})
			}
			return b
		}, errText: "an offset out of the pack"},
		"large offsets out of their table": {ext: "idx", change: func(b []byte) []byte {
			n := len(all)
			for i := range n {
				copy(b[idxNames+n*24+i*4:], []byte{0x80, 0, 0, 9})
			}
			return b
		}, errText: "a large offset out of its table"},
		"not a pack": {ext: "pack", change: func(b []byte) []byte { copy(b, "KCAP"); return b }, errText: "not a pack file"},
		"pack bytes scrambled": {ext: "pack", change: func(b []byte) []byte {
			for i := 12; i < len(b)-20; i += 7 {
				b[i] ^= 0x5a
			}
			return b
		}, errText: "corrupt git object storage"},
		"pack truncated": {ext: "pack", change: func(b []byte) []byte { return b[:len(b)/2] }, errText: "corrupt git object storage"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			h.store(t, dir, false, [][]plumbing.Hash{all}, nil)
			files, err := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*."+tc.ext))
			if err != nil || len(files) != 1 {
				t.Fatalf("pack files: %v %v", files, err)
			}
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(files[0], tc.change(b), 0o644); err != nil {
				t.Fatal(err)
			}
			s := newObjectStore(goGitStorage(t, dir))
			defer s.Close()
			var errs []error
			for _, hash := range all {
				_, err := s.EncodedObject(plumbing.AnyObject, hash)
				errs = append(errs, err)
			}
			if err := errors.Join(errs...); err == nil || !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), tc.errText) {
				t.Fatalf("reading every object: %v; want errCorrupt saying %q", err, tc.errText)
			}
		})
	}
}

// FuzzObjectStore: whatever bytes a pack holds, reading its objects
// ends in an object or an error, never a panic or a hang.
func FuzzObjectStore(f *testing.F) {
	h := makeHistory(f, 12, 2, 2)
	all := h.hashes(f)
	seedDir := f.TempDir()
	h.store(f, seedDir, false, [][]plumbing.Hash{all}, nil)
	packs, err := filepath.Glob(filepath.Join(seedDir, ".git", "objects", "pack", "*.pack"))
	if err != nil || len(packs) != 1 {
		f.Fatalf("pack files: %v %v", packs, err)
	}
	seed, err := os.ReadFile(packs[0])
	if err != nil {
		f.Fatal(err)
	}
	idx, err := os.ReadFile(strings.TrimSuffix(packs[0], ".pack") + ".idx")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, uint16(0))
	f.Add(seed[:len(seed)/3], uint16(len(seed)/3))
	f.Fuzz(func(t *testing.T, pack []byte, at uint16) {
		// The index is kept, so the lookups reach the bytes fuzzed.
		root := t.TempDir()
		if _, err := git.PlainInit(root, false); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, ".git", "objects", "pack")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		base := filepath.Join(dir, filepath.Base(strings.TrimSuffix(packs[0], ".pack")))
		if err := os.WriteFile(base+".idx", idx, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(base+".pack", pack, 0o644); err != nil {
			t.Fatal(err)
		}
		s := newObjectStore(goGitStorage(t, root))
		defer s.Close()
		for _, hash := range all {
			o, err := s.EncodedObject(plumbing.AnyObject, hash)
			if err == nil && o.Hash() != hash {
				t.Fatalf("object %s read as %s", hash, o.Hash())
			}
			_, _ = s.EncodedObjectSize(hash)
		}
		_, _ = s.HashesWithPrefix([]byte{byte(at)})
	})
}

// BenchmarkTreeHistory reads every file of the last commit of a history
// of 200 commits and of one of 20,000 (the same tree of 400 files at
// HEAD, 4 objects more per commit, in one pack with offset deltas as git
// makes it), through go-git's own storage and through objectStore: what
// reading the commit allocates, and its time, should not grow with the
// history.
func BenchmarkTreeHistory(b *testing.B) {
	for _, commits := range []int{200, 20_000} {
		h := makeHistory(b, commits, 20, 20)
		dir := b.TempDir()
		h.store(b, dir, false, [][]plumbing.Hash{h.hashes(b)}, nil)
		readers := map[string]func() storer.EncodedObjectStorer{
			"go-git":   func() storer.EncodedObjectStorer { return goGitStorage(b, dir) },
			"in-place": func() storer.EncodedObjectStorer { return newObjectStore(goGitStorage(b, dir)) },
		}
		for _, name := range []string{"go-git", "in-place"} {
			b.Run(fmt.Sprintf("commits=%d/%s", commits, name), func(b *testing.B) {
				files := 0
				for b.Loop() {
					s := readers[name]()
					c, err := object.GetCommit(s, h.head)
					if err != nil {
						b.Fatal(err)
					}
					tree, err := c.Tree()
					if err != nil {
						b.Fatal(err)
					}
					files = 0
					if err := tree.Files().ForEach(func(f *object.File) error {
						if _, err := f.Contents(); err != nil {
							return err
						}
						files++
						return nil
					}); err != nil {
						b.Fatal(err)
					}
					if err := s.(io.Closer).Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(files), "files")
			})
		}
	}
}

// FuzzApplyDelta: applyDelta undoes go-git's DiffDelta, and on any bytes
// agrees with go-git's PatchDelta: the same target, or an error (and
// never a panic) where it finds the delta corrupt.
func FuzzApplyDelta(f *testing.F) {
	base := []byte(strings.Repeat("apiVersion: v1\nkind: ConfigMap\n", 40))
	target := bytes.Replace(base, []byte("ConfigMap"), []byte("Secret"), 3)
	f.Add(base, target, packfile.DiffDelta(base, target))
	f.Add([]byte("abc"), []byte(""), []byte{3, 0})
	f.Add([]byte("abc"), []byte("x"), []byte{3, 5, 0x90, 0, 2, 'x', 'y'})
	f.Fuzz(func(t *testing.T, base, target, delta []byte) {
		if len(base) > 0 {
			d := packfile.DiffDelta(base, target)
			got, err := applyDelta(base, d)
			if err != nil || !bytes.Equal(got, target) {
				t.Fatalf("applyDelta(DiffDelta) = %q, %v; want %q", got, err, target)
			}
		}
		got, err := applyDelta(base, delta)
		want, wantErr := packfile.PatchDelta(base, delta)
		switch {
		case len(base) == 0:
			// go-git refuses any delta on an empty base; git does not.
		case (err == nil) != (wantErr == nil):
			t.Fatalf("applyDelta error %v, PatchDelta error %v", err, wantErr)
		case err == nil && !bytes.Equal(got, want):
			t.Fatalf("applyDelta = %q, PatchDelta = %q", got, want)
		}
	})
}
