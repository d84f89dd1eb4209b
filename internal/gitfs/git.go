// Package gitfs reads the files of a git commit in place, with go-git and
// without the git binary: a repository's packs and loose objects
// (objectStore), a commit's tree as the loader's file system (Tree) and as
// kustomize's (KustomizeFS), and what a sparse checkout leaves out.
package gitfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Errors of reading git refs. Both are the user's to fix (another
// directory, another ref), so the CLI maps them to exit code 2.
var (
	// ErrNotRepository: no git repository encloses the directory.
	ErrNotRepository = errors.New("not a git repository")
	// ErrRevision: the revision does not name a commit of the repository.
	ErrRevision = errors.New("unknown revision")
)

// errOutsideTree is why a path outside the repository's working tree is
// missing from a commit: it cannot be in one.
var errOutsideTree = errors.New("outside the git repository, so in no commit")

// MaxListedEntries bounds the entries of the directories one Tree lists,
// each directory counted once however often it is listed. A commit's
// tree may name one directory many times over (ten entries naming the
// same subtree, nine levels deep, are a billion files in a few kilobytes
// of objects, a "git bomb"), which no checkout could hold but a reader
// of objects would list forever; a repository of configuration holds
// far fewer.
const MaxListedEntries = 1 << 16

// ErrTreeTooLarge is ReadDir's error once a Tree has listed
// MaxListedEntries entries; every later ReadDir of the Tree fails too.
var ErrTreeTooLarge = fmt.Errorf("the commit's directories hold more than %d entries in all, more than keyhole reads of one commit (a tree naming the same directories over and over lists billions)", MaxListedEntries)

// ErrEntryName is ReadDir's error for a directory whose tree names an
// entry that is not one file name ("", ".", "..", or a name holding a
// separator). Git checks none of them out, but a tree object may hold
// them; listed as they are, "." and ".." make a walk that joins names
// visit the same directory for ever.
var ErrEntryName = errors.New("the commit's tree names an entry that is no file name, which git does not check out")

// MaxSymlinkHops bounds symbolic links followed in one lookup, as the
// kernel's ELOOP does, so a link cycle committed to the repository ends.
// Whoever resolves links as a Tree does (on disk, say) bounds them alike.
const MaxSymlinkHops = 40

// Repo is the git repository enclosing a directory, opened in-process
// with go-git: keyhole never runs the git binary. Its objects are read
// in place (objectStore), so reading a commit costs what the commit's
// files hold, not the length of the history.
type Repo struct {
	repo  *git.Repository
	root  string       // absolute path of the working tree
	store *objectStore // nil when go-git's own storage reads the objects
}

// OpenRepo opens the repository whose working tree encloses dir (an
// absolute path, or relative to the process's working directory), as git
// finds it: dir or its nearest ancestor holding .git. A bare repository
// has no working tree to stand the commits in and is refused.
func OpenRepo(dir string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("source: %s: %w", dir, err)
	}
	r, err := git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	var store *objectStore
	if extensionRefused(err) {
		r, store, err = openWithExtensions(abs)
	}
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("%w (or any parent up to /): %s", ErrNotRepository, abs)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotRepository, abs, err)
	}
	wt, err := r.Worktree()
	if err != nil {
		if store != nil {
			err = errors.Join(err, store.Close())
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrNotRepository, abs, err)
	}
	repo := &Repo{repo: r, root: filepath.Clean(wt.Filesystem.Root()), store: store}
	// go-git found the repository (a linked worktree's common directory
	// too); the same storage, with the objects read in place, opens it
	// again.
	if fsStore, ok := r.Storer.(*filesystem.Storage); ok {
		st := newObjectStore(fsStore)
		if repo.repo, err = git.Open(st, wt.Filesystem); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrNotRepository, abs, err)
		}
		repo.store = st
	}
	return repo, nil
}

// Close closes the files the repository's reads opened; the Trees it
// gave cannot be read after.
func (r *Repo) Close() error {
	if r.store == nil {
		return nil
	}
	return r.store.Close()
}

// Tree returns the files of the commit rev names, for source.Options.Tree.
// rev is anything go-git's ResolveRevision takes: a branch, a tag
// (annotated ones are peeled), a remote-tracking branch such as origin/main, a full or
// short hash, HEAD~1, main^2.
func (r *Repo) Tree(rev string) (*Tree, error) {
	if rev == "" || strings.HasPrefix(rev, "-") {
		return nil, fmt.Errorf("%w %q", ErrRevision, rev)
	}
	h, err := r.repo.ResolveRevision(plumbing.Revision(rev))
	if errors.Is(err, io.EOF) {
		// go-git's way of saying the walk back ran out of history
		// (HEAD~5 of a three-commit branch).
		err = errors.New("the history holds no such commit")
	}
	if err != nil {
		if why := r.unreadableRef(rev); why != "" {
			return nil, fmt.Errorf("%w %q: %s", ErrRevision, rev, why)
		}
		return nil, fmt.Errorf("%w %q: %w%s", ErrRevision, rev, err, r.shallowHint())
	}
	c, err := r.repo.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrRevision, rev, err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("source: reading the tree of %s: %w", h, err)
	}
	return &Tree{repo: r.repo, owner: r, root: r.root, commit: *h, top: t, trees: map[plumbing.Hash]*object.Tree{},
		sizes: map[plumbing.Hash]int64{}, kept: map[plumbing.Hash][]byte{}, keep: KeptBlobBytes, found: map[lookupKey]lookupResult{}, maxListed: MaxListedEntries, listedDirs: map[string]bool{}}, nil
}

// unreadableRef says why a revision that names a reference of the
// repository did not resolve, when the reference is there but the commit
// it names cannot be read (the object store is missing, unreadable or
// damaged): "" otherwise. go-git reports that case as a reference not
// found, which sends the reader looking for the wrong thing.
func (r *Repo) unreadableRef(rev string) string {
	for _, name := range []string{rev, "refs/" + rev, "refs/heads/" + rev, "refs/tags/" + rev, "refs/remotes/" + rev} {
		ref, err := r.repo.Reference(plumbing.ReferenceName(name), true)
		if err != nil || ref.Hash().IsZero() {
			continue
		}
		if _, err := r.repo.Storer.EncodedObject(plumbing.AnyObject, ref.Hash()); err != nil {
			return fmt.Sprintf("%s names commit %s, which the repository's objects (.git/objects) do not hold or cannot be read: %v", name, ref.Hash(), err)
		}
		return ""
	}
	return ""
}

// shallowHint explains, for a shallow clone (CI checks out one commit by
// default), why a ref may be missing.
func (r *Repo) shallowHint() string {
	if s, err := r.repo.Storer.Shallow(); err != nil || len(s) == 0 {
		return ""
	}
	return "; the clone is shallow: fetch the history that holds it (git fetch --unshallow, or actions/checkout with fetch-depth: 0)"
}

// Tree is one commit's files as the loader reads them (source.Options.Tree),
// standing at the repository's working tree: path <root>/a/b names the
// commit's a/b. Symbolic links committed to the repository are followed
// inside it; a submodule is an empty directory. A Tree is safe for
// concurrent use: one lock guards what it reads and remembers, so builds
// on several cores read one commit.
type Tree struct {
	mu     sync.Mutex // guards the fields below root and the object store's reads
	repo   *git.Repository
	owner  *Repo
	root   string
	commit plumbing.Hash
	top    *object.Tree
	trees  map[plumbing.Hash]*object.Tree
	// sizes and kept remember blobs by their hash, which names their
	// bytes: the loader stats and reads each file several times (to
	// scope the inputs, to find Flux and Argo CD objects, to parse it,
	// to place a finding), and a loose object is inflated for its size
	// as for its bytes. kept holds blobs read whole, up to KeptBlobBytes
	// in all (keep is what is left of it); past that a blob is read
	// again when asked for.
	sizes map[plumbing.Hash]int64
	kept  map[plumbing.Hash][]byte
	keep  int
	// found remembers each path looked up, and what was found there.
	found map[lookupKey]lookupResult
	// blobsRead counts the blobs read from the object store, for tests
	// of what a build costs.
	blobsRead int
	// listed counts the entries of the directories ReadDir listed
	// (listedDirs), up to maxListed (MaxListedEntries).
	listed, maxListed int
	listedDirs        map[string]bool
}

// TooLarge reports whether a ReadDir of the Tree failed with
// ErrTreeTooLarge: what was read of the commit is not all of it.
func (t *Tree) TooLarge() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.listed > t.maxListed
}

// KeptBlobBytes bounds the bytes of blobs a Tree keeps once read, so that
// the loader's later reads of a file take them from memory.
const KeptBlobBytes = 32 << 20

// Close closes the repository the Tree reads (Repo.Close).
func (t *Tree) Close() error { return t.owner.Close() }

// Commit is the full hash of the commit.
func (t *Tree) Commit() string { return t.commit.String() }

// Root is the absolute path of the working tree the commit's files stand
// in.
func (t *Tree) Root() string { return t.root }

// BlobsRead is how many blobs the Tree has read, for tests of what a
// build costs.
func (t *Tree) BlobsRead() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blobsRead
}

// node is one entry of the commit, found by path.
type node struct {
	name string // base name
	mode filemode.FileMode
	hash plumbing.Hash
	rel  string // slash-separated path from the root, "." for the root
}

// rel maps an absolute OS path to its slash-separated path in the tree.
func (t *Tree) rel(name string) (string, error) {
	r, err := filepath.Rel(t.root, filepath.Clean(name))
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", errOutsideTree
	}
	return filepath.ToSlash(r), nil
}

func (t *Tree) tree(h plumbing.Hash) (*object.Tree, error) {
	if tr, ok := t.trees[h]; ok {
		return tr, nil
	}
	tr, err := object.GetTree(t.repo.Storer, h)
	if err != nil {
		return nil, err
	}
	t.trees[h] = tr
	return tr, nil
}

// lookup finds the entry at rel, following symbolic links on the way and,
// when follow is set, at the end.
func (t *Tree) lookup(rel string, follow bool) (node, error) {
	k := lookupKey{rel, follow}
	if r, ok := t.found[k]; ok {
		return r.n, r.err
	}
	n, err := t.lookupWalk(rel, follow)
	t.found[k] = lookupResult{n, err}
	return n, err
}

// lookupKey and lookupResult remember lookups: the loader asks for the
// same paths many times (a stat, then a read), and a commit's tree does
// not change.
type lookupKey struct {
	rel    string
	follow bool
}

type lookupResult struct {
	n   node
	err error
}

func (t *Tree) lookupWalk(rel string, follow bool) (node, error) {
	for hops := 0; ; hops++ {
		n, link, err := t.walkTo(rel, follow)
		if err != nil || link == "" {
			return n, err
		}
		if hops >= MaxSymlinkHops {
			return node{}, syscall.ELOOP
		}
		rel = link
	}
}

// walkTo walks rel from the root. When it meets a symbolic link it must
// follow, it returns the path that replaces rel (link) instead. Its errors
// are the OS's own (ENOENT, ENOTDIR), so that what the loader reports for
// a commit reads as it does for a checkout.
func (t *Tree) walkTo(rel string, follow bool) (n node, link string, err error) {
	root := node{name: path.Base(t.root), mode: filemode.Dir, hash: t.top.Hash, rel: "."}
	if rel == "." {
		return root, "", nil
	}
	parts := strings.Split(rel, "/")
	cur := root
	for i, name := range parts {
		if cur.mode == filemode.Submodule {
			return node{}, "", syscall.ENOENT
		}
		if cur.mode != filemode.Dir {
			return node{}, "", syscall.ENOTDIR
		}
		tr, err := t.tree(cur.hash)
		if err != nil {
			return node{}, "", err
		}
		// FindEntry indexes the tree's entries by name on first use.
		e, err := tr.FindEntry(name)
		if err != nil {
			return node{}, "", syscall.ENOENT
		}
		last := i == len(parts)-1
		next := node{name: e.Name, mode: e.Mode, hash: e.Hash, rel: path.Join(cur.rel, e.Name)}
		if e.Mode == filemode.Symlink && (!last || follow) {
			target, err := t.blobBytes(e.Hash)
			if err != nil {
				return node{}, "", err
			}
			to := string(target)
			if path.IsAbs(to) || filepath.IsAbs(to) {
				r, err := t.rel(to)
				if err != nil {
					return node{}, "", syscall.ENOENT
				}
				to = r
			} else {
				to = path.Join(cur.rel, to)
			}
			if to == ".." || strings.HasPrefix(to, "../") {
				return node{}, "", syscall.ENOENT // leads out of the commit
			}
			return node{}, path.Join(append([]string{to}, parts[i+1:]...)...), nil
		}
		cur = next
	}
	return cur, "", nil
}

// blobBytes returns the bytes of blob h, which the caller must not
// modify: they may be the ones the Tree keeps.
func (t *Tree) blobBytes(h plumbing.Hash) ([]byte, error) {
	if b, ok := t.kept[h]; ok {
		return b, nil
	}
	t.blobsRead++
	b, err := object.GetBlob(t.repo.Storer, h)
	if err != nil {
		return nil, objectErr(err)
	}
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := readSized(r, b.Size)
	if err != nil {
		return nil, err
	}
	t.sizes[h] = int64(len(data))
	if len(data) <= t.keep {
		t.kept[h] = data
		t.keep -= len(data)
	}
	return data, nil
}

// readSized reads r to its end into one buffer of the size the object
// store gave (io.ReadAll would grow one, copying, to many times that).
func readSized(r io.Reader, size int64) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(min(max(size, 0), 64<<20)) + bytes.MinRead)
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// modeOf is the fs.FileMode of a tree entry's git mode.
func modeOf(m filemode.FileMode) fs.FileMode {
	switch m {
	case filemode.Dir, filemode.Submodule:
		return fs.ModeDir | 0o755
	case filemode.Symlink:
		return fs.ModeSymlink | 0o777
	case filemode.Executable:
		return 0o755
	default:
		return 0o644
	}
}

// info describes n as fs.Stat does.
func (t *Tree) info(n node) (fs.FileInfo, error) {
	fi := treeInfo{name: n.name, mode: modeOf(n.mode)}
	if fi.mode.IsRegular() || fi.mode&fs.ModeSymlink != 0 {
		s, ok := t.sizes[n.hash]
		if !ok {
			var err error
			if s, err = t.repo.Storer.EncodedObjectSize(n.hash); err != nil {
				return nil, objectErr(err)
			}
			t.sizes[n.hash] = s
		}
		fi.size = s
	}
	return fi, nil
}

// objectErr explains an object the repository does not hold: a partial
// clone (git clone --filter=blob:none) holds only the blobs git checked
// out, and go-git cannot fetch the others.
func objectErr(err error) error {
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return fmt.Errorf("%w (the commit's file is not in the local repository, as in a partial clone: fetch the commit's files, or clone without --filter)", err)
	}
	return err
}

// treeEntry is a directory entry of a Tree. Its type comes from the tree
// itself and its size (Info) from the object store only when asked, so
// listing a directory reads no blob: a blob the repository lacks (an image
// a partial clone never fetched) fails only a read that needs it.
type treeEntry struct {
	t *Tree
	n node
}

func (e treeEntry) Name() string      { return e.n.name }
func (e treeEntry) IsDir() bool       { return e.Type().IsDir() }
func (e treeEntry) Type() fs.FileMode { return modeOf(e.n.mode).Type() }
func (e treeEntry) Info() (fs.FileInfo, error) {
	e.t.mu.Lock()
	defer e.t.mu.Unlock()
	return e.t.info(e.n)
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// Stat describes the file at name (an absolute OS path), following
// symbolic links.
func (t *Tree) Stat(name string) (fs.FileInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stat("stat", name, true)
}

// Lstat is Stat without following a final symbolic link. The working
// tree's .git is reported as a directory, as on disk, so that a walk
// finds the working tree's .gitignore files as it does for a checkout.
func (t *Tree) Lstat(name string) (fs.FileInfo, error) {
	if r, err := t.rel(name); err == nil && r == ".git" {
		return treeInfo{name: ".git", mode: fs.ModeDir | 0o755}, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stat("lstat", name, false)
}

func (t *Tree) stat(op, name string, follow bool) (fs.FileInfo, error) {
	r, err := t.rel(name)
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	n, err := t.lookup(r, follow)
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	fi, err := t.info(n)
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	if ti, ok := fi.(treeInfo); ok {
		// os.Stat names what it found by the path asked, not by a link's
		// target.
		ti.name = filepath.Base(name)
		return ti, nil
	}
	return fi, nil
}

// ReadDir lists the directory at name, sorted by name as os.ReadDir does.
func (t *Tree) ReadDir(name string) ([]fs.DirEntry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, err := t.rel(name)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	n, err := t.lookup(r, true)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	switch n.mode {
	case filemode.Submodule:
		return nil, nil
	case filemode.Dir:
	default:
		return nil, pathErr("readdir", name, syscall.ENOTDIR)
	}
	if t.listed > t.maxListed {
		return nil, pathErr("readdir", name, ErrTreeTooLarge)
	}
	tr, err := t.tree(n.hash)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	if !t.listedDirs[n.rel] {
		t.listedDirs[n.rel] = true
		t.listed += len(tr.Entries)
	}
	if t.listed > t.maxListed {
		return nil, pathErr("readdir", name, ErrTreeTooLarge)
	}
	out := make([]fs.DirEntry, 0, len(tr.Entries))
	for _, e := range tr.Entries {
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.Contains(e.Name, "/") || filepath.Base(e.Name) != e.Name {
			return nil, pathErr("readdir", name, fmt.Errorf("%w: %q", ErrEntryName, e.Name))
		}
		out = append(out, treeEntry{t: t, n: node{name: e.Name, mode: e.Mode, hash: e.Hash, rel: path.Join(n.rel, e.Name)}})
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// Open opens the file at name for reading; its bytes are read from the
// object store only when read, so a file refused by its size never is.
func (t *Tree) Open(name string) (fs.File, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := t.open(name)
	if err != nil {
		return nil, err // not a nil *treeFile in a non-nil fs.File
	}
	return f, nil
}

func (t *Tree) open(name string) (*treeFile, error) {
	r, err := t.rel(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	n, err := t.lookup(r, true)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	fi, err := t.info(n)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if fi.IsDir() {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	return &treeFile{t: t, fi: fi, hash: n.hash, name: name}, nil
}

// ReadFile reads the whole file at name, into bytes of the caller's own.
func (t *Tree) ReadFile(name string) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := t.open(name)
	if errors.Is(err, syscall.EISDIR) {
		// os.ReadFile opens a directory and fails reading it: the same
		// words, so that a message or a build reused across a diff's
		// sides reads the same on disk and in a commit.
		return nil, pathErr("read", name, syscall.EISDIR)
	}
	if err != nil {
		return nil, err
	}
	b, err := t.blobBytes(f.hash)
	if err != nil {
		return nil, pathErr("read", name, err)
	}
	return bytes.Clone(b), nil
}

// KustomizeFS returns the commit's files as kustomize's filesystem (see
// treeFS): nothing is copied, and a build reads only the blobs it opens.
func (t *Tree) KustomizeFS() (filesys.FileSystem, error) { return treeFS{t}, nil }

// Readlink returns the target of the symbolic link at name, as committed.
func (t *Tree) Readlink(name string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, err := t.rel(name)
	if err != nil {
		return "", pathErr("readlink", name, err)
	}
	n, err := t.lookup(r, false)
	if err != nil {
		return "", pathErr("readlink", name, err)
	}
	if modeOf(n.mode)&fs.ModeSymlink == 0 {
		return "", pathErr("readlink", name, fs.ErrInvalid)
	}
	b, err := t.blobBytes(n.hash)
	if err != nil {
		return "", pathErr("readlink", name, err)
	}
	return string(b), nil
}

// treeInfo is the fs.FileInfo of a tree entry. Commits keep no times per
// file, so ModTime is the zero time.
type treeInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (i treeInfo) Name() string       { return i.name }
func (i treeInfo) Size() int64        { return i.size }
func (i treeInfo) Mode() fs.FileMode  { return i.mode }
func (i treeInfo) ModTime() time.Time { return time.Time{} }
func (i treeInfo) IsDir() bool        { return i.mode.IsDir() }
func (i treeInfo) Sys() any           { return nil }

// treeFile is an open file of a Tree, reading its blob on first Read.
type treeFile struct {
	t    *Tree
	fi   fs.FileInfo
	hash plumbing.Hash
	name string
	r    *bytes.Reader
}

func (f *treeFile) Stat() (fs.FileInfo, error) { return f.fi, nil }

func (f *treeFile) Read(p []byte) (int, error) {
	if f.r == nil {
		f.t.mu.Lock()
		b, err := f.t.blobBytes(f.hash)
		f.t.mu.Unlock()
		if err != nil {
			return 0, pathErr("read", f.name, err)
		}
		f.r = bytes.NewReader(b)
	}
	return f.r.Read(p)
}

func (f *treeFile) Close() error { return nil }
