package gitfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// errReadOnly is what a write to a commit's tree fails with: a build
// reads, and a commit cannot change.
var errReadOnly = errors.New("a commit's files are read-only")

// treeFS is a commit's tree as kustomize's filesystem: it reads only what
// a build opens, blob by blob, at the same absolute paths as the loader
// (Tree), so any file name git allows works and a build of one overlay
// costs what that overlay reads, not the size of the commit. Symbolic
// links committed to the repository are followed inside it. It is
// read-only; paths outside the working tree do not exist in it.
type treeFS struct{ t *Tree }

var _ filesys.FileSystem = treeFS{}

func (f treeFS) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Join(f.t.root, p)
}

// Create, Mkdir, MkdirAll, RemoveAll and WriteFile refuse: see errReadOnly.
func (f treeFS) Create(p string) (filesys.File, error) { return nil, pathErr("create", p, errReadOnly) }
func (f treeFS) Mkdir(p string) error                  { return pathErr("mkdir", p, errReadOnly) }
func (f treeFS) MkdirAll(p string) error               { return pathErr("mkdir", p, errReadOnly) }
func (f treeFS) RemoveAll(p string) error              { return pathErr("remove", p, errReadOnly) }
func (f treeFS) WriteFile(p string, _ []byte) error    { return pathErr("write", p, errReadOnly) }

// Open opens a file of the commit for reading.
func (f treeFS) Open(p string) (filesys.File, error) {
	file, err := f.t.Open(f.abs(p))
	if err != nil {
		return nil, err
	}
	return readOnlyFile{file.(*treeFile)}, nil
}

// IsDir reports whether p is a directory of the commit, following links.
func (f treeFS) IsDir(p string) bool {
	fi, err := f.t.Stat(f.abs(p))
	return err == nil && fi.IsDir()
}

// Exists reports whether p is in the commit.
func (f treeFS) Exists(p string) bool {
	_, err := f.t.Stat(f.abs(p))
	return err == nil
}

// ReadDir lists the names in directory p, sorted.
func (f treeFS) ReadDir(p string) ([]string, error) {
	entries, err := f.t.ReadDir(f.abs(p))
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// ReadFile reads the whole file at p.
func (f treeFS) ReadFile(p string) ([]byte, error) { return f.t.ReadFile(f.abs(p)) }

// CleanedAbs resolves p as kustomize's on-disk filesystem does: to the
// absolute path with every symbolic link followed, split into the
// directory and, when p is a file, its name. Its errors read as the
// on-disk filesystem's, which kustomize's messages quote.
func (f treeFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	abs := f.abs(p)
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	rel, err := f.t.rel(abs)
	if err != nil {
		return "", "", fmt.Errorf("evalsymlink failure on '%s' : %w", p, pathErr("lstat", p, fs.ErrNotExist))
	}
	n, err := f.t.lookup(rel, true)
	if err != nil {
		return "", "", fmt.Errorf("evalsymlink failure on '%s' : %w", p, pathErr("lstat", p, err))
	}
	real := filepath.Join(f.t.root, filepath.FromSlash(n.rel))
	fi, err := f.t.info(n)
	if err != nil {
		return "", "", fmt.Errorf("evalsymlink failure on '%s' : %w", p, err)
	}
	if fi.IsDir() {
		return filesys.ConfirmedDir(real), "", nil
	}
	return filesys.ConfirmedDir(filepath.Dir(real)), filepath.Base(real), nil
}

// Glob returns the paths matching pattern, as filepath.Glob does.
func (f treeFS) Glob(pattern string) ([]string, error) {
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, err
	}
	pattern = f.abs(pattern)
	if !hasMeta(pattern) {
		if f.Exists(pattern) {
			return []string{pattern}, nil
		}
		return nil, nil
	}
	dir, file := filepath.Split(pattern)
	dir = filepath.Clean(dir)
	dirs := []string{dir}
	if hasMeta(dir) {
		var err error
		if dirs, err = f.Glob(dir); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, d := range dirs {
		if !f.IsDir(d) {
			continue
		}
		names, err := f.ReadDir(d)
		if err != nil {
			continue
		}
		for _, n := range names {
			if ok, _ := filepath.Match(file, n); ok {
				out = append(out, filepath.Join(d, n))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// Walk walks the tree at p in lexical order, as filepath.Walk does: links
// are reported, not followed.
func (f treeFS) Walk(p string, walkFn filepath.WalkFunc) error {
	root := f.abs(p)
	fi, err := f.t.Lstat(root)
	if err != nil {
		return walkFn(p, nil, err)
	}
	err = f.walk(root, fi, walkFn)
	if errors.Is(err, filepath.SkipDir) || errors.Is(err, filepath.SkipAll) {
		return nil
	}
	return err
}

func (f treeFS) walk(p string, fi fs.FileInfo, walkFn filepath.WalkFunc) error {
	if !fi.IsDir() {
		return walkFn(p, fi, nil)
	}
	if err := walkFn(p, fi, nil); err != nil {
		return err
	}
	entries, err := f.t.ReadDir(p)
	if err != nil {
		return walkFn(p, fi, err)
	}
	for _, e := range entries {
		child := filepath.Join(p, e.Name())
		info, err := e.Info()
		if err != nil {
			if err := walkFn(child, nil, err); err != nil && !errors.Is(err, filepath.SkipDir) {
				return err
			}
			continue
		}
		if err := f.walk(child, info, walkFn); err != nil {
			if errors.Is(err, filepath.SkipDir) && info.IsDir() {
				continue
			}
			return err
		}
	}
	return nil
}

// readOnlyFile is a treeFile as kustomize's File, which must also write.
type readOnlyFile struct{ *treeFile }

func (readOnlyFile) Write([]byte) (int, error) { return 0, errReadOnly }

// Stat describes the file as os.File's Stat does.
func (r readOnlyFile) Stat() (os.FileInfo, error) { return r.fi, nil }
