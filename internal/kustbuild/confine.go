package kustbuild

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	securefs "github.com/fluxcd/pkg/kustomize/filesys"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// A build reads only the repository. kustomize's load restrictor keeps a
// kustomization's own files under its directory, but bases may climb
// above it, and with restrictions off (as Flux builds) any file may be
// named: `files: [t=../../../proc/self/environ]` in a configMapGenerator,
// copied by a replacement into a field keyhole prints, would print the CI
// job's environment. So every build reads through confinedFS, rooted at
// the repository's root whatever the restrictor says, as
// kustomize-controller builds on fluxcd/pkg/kustomize's secure file
// system: a path outside the root, or under a .git directory (where the
// checkout keeps the job's token), is not there for kustomize, and a
// build that asked for one fails naming it.

// Outside is the error a build's read fails with when the path lies
// outside the repository's root or in a .git directory. It says no more
// than that: kustomize's message around it names the entry as the
// kustomization wrote it.
type Outside struct {
	Path string // as kustomize asked for it
}

func (e *Outside) Error() string {
	return "outside the repository: keyhole reads nothing outside the repository's tree, nor in a .git directory"
}

// IsGitElement reports whether a path element names a git directory: git
// tracks nothing under one, in any letter case, so nothing there is the
// repository's.
func IsGitElement(e string) bool { return strings.EqualFold(e, ".git") }

// Inside reports whether abs (absolute, cleaned) lies in root (absolute,
// cleaned) and not under a .git directory of it.
func Inside(root, abs string) bool {
	rel, err := filepath.Rel(root, abs)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return false
	}
	for _, e := range strings.Split(rel, string(filepath.Separator)) {
		if IsGitElement(e) {
			return false
		}
	}
	return true
}

// OnDisk is kustomize's file system for a build of the disk confined to
// root: fluxcd/pkg/kustomize's secure file system, which resolves every
// symbolic link and refuses a path that lands outside root. With remote
// bases allowed, the directories kustomize clones them into are allowed
// too (MakeFsOnDiskSecureBuild).
func OnDisk(root string, allowRemote bool) (filesys.FileSystem, error) {
	if allowRemote {
		return securefs.MakeFsOnDiskSecureBuild(root)
	}
	return securefs.MakeFsOnDiskSecure(root)
}

// confinedFS is the file system every build reads through: fs, with
// every path checked against root (see Inside) before it is asked
// about. What lies outside does not exist for kustomize and cannot be
// read, listed, walked or written; the first path refused is kept, so
// that a build that went on without it still fails.
type confinedFS struct {
	filesys.FileSystem
	// root is the repository's root, and real the same with its
	// symbolic links resolved, as CleanedAbs answers.
	root, real string
	// remote is where kustomize clones remote bases, which a build
	// allowed to fetch them reads; "" otherwise.
	remote  string
	refused *Outside
}

// at is p as the file system beneath is asked about it: absolute and
// cleaned, so that what is checked is what is read (the OS would resolve
// a "link/.." physically, past the link), and whether it is inside.
func (f confinedFS) at(p string) (string, bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p, false
	}
	if f.remote != "" && strings.HasPrefix(abs, f.remote) {
		return abs, true
	}
	return abs, Inside(f.root, abs) || f.real != f.root && Inside(f.real, abs)
}

// inside reports whether kustomize may ask about p.
func (f confinedFS) inside(p string) bool {
	_, ok := f.at(p)
	return ok
}

// refuse keeps the first refusal and returns it.
func (f confinedFS) refuse(p string) error {
	if f.refused.Path == "" {
		f.refused.Path = p
	}
	return &Outside{Path: p}
}

func (f confinedFS) Create(p string) (filesys.File, error) {
	abs, ok := f.at(p)
	if !ok {
		return nil, f.refuse(p)
	}
	return f.FileSystem.Create(abs)
}

func (f confinedFS) Mkdir(p string) error {
	abs, ok := f.at(p)
	if !ok {
		return f.refuse(p)
	}
	return f.FileSystem.Mkdir(abs)
}

func (f confinedFS) MkdirAll(p string) error {
	abs, ok := f.at(p)
	if !ok {
		return f.refuse(p)
	}
	return f.FileSystem.MkdirAll(abs)
}

func (f confinedFS) RemoveAll(p string) error {
	abs, ok := f.at(p)
	if !ok {
		return f.refuse(p)
	}
	return f.FileSystem.RemoveAll(abs)
}

func (f confinedFS) Open(p string) (filesys.File, error) {
	abs, ok := f.at(p)
	if !ok {
		return nil, f.refuse(p)
	}
	return f.FileSystem.Open(abs)
}

// IsDir and Exists say no of a path outside, as of a missing one.
func (f confinedFS) IsDir(p string) bool {
	abs, ok := f.at(p)
	return ok && f.FileSystem.IsDir(abs)
}

// Exists: see IsDir.
func (f confinedFS) Exists(p string) bool {
	abs, ok := f.at(p)
	return ok && f.FileSystem.Exists(abs)
}

func (f confinedFS) ReadDir(p string) ([]string, error) {
	abs, ok := f.at(p)
	if !ok {
		return nil, f.refuse(p)
	}
	return f.FileSystem.ReadDir(abs)
}

// CleanedAbs refuses a path outside, and a path whose links resolve
// outside.
func (f confinedFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	abs, ok := f.at(p)
	if !ok {
		return "", "", f.refuse(p)
	}
	d, name, err := f.FileSystem.CleanedAbs(abs)
	if err != nil {
		return d, name, err
	}
	if !f.inside(filepath.Join(string(d), name)) {
		return "", "", f.refuse(p)
	}
	return d, name, nil
}

// Glob keeps the matches inside.
func (f confinedFS) Glob(pattern string) ([]string, error) {
	if !f.inside(pattern) {
		return nil, f.refuse(pattern)
	}
	found, err := f.FileSystem.Glob(pattern)
	out := found[:0]
	for _, p := range found {
		if f.inside(p) {
			out = append(out, p)
		}
	}
	return out, err
}

func (f confinedFS) ReadFile(p string) ([]byte, error) {
	abs, ok := f.at(p)
	if !ok {
		return nil, f.refuse(p)
	}
	return f.FileSystem.ReadFile(abs)
}

func (f confinedFS) WriteFile(p string, data []byte) error {
	abs, ok := f.at(p)
	if !ok {
		return f.refuse(p)
	}
	return f.FileSystem.WriteFile(abs, data)
}

// Walk walks only what is inside: a directory outside is skipped.
func (f confinedFS) Walk(p string, walkFn filepath.WalkFunc) error {
	if !f.inside(p) {
		return f.refuse(p)
	}
	return f.FileSystem.Walk(p, func(path string, info os.FileInfo, err error) error {
		if !f.inside(path) {
			if info != nil && info.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return walkFn(path, info, err)
	})
}

// refusedRead returns the build's first refused path as its error, when
// there was one: kustomize's own error when it says so, else the
// refusal, so that a build that went on without the file (or failed for
// another reason) still says what it tried to read.
func refusedRead(f confinedFS, err error) error {
	if f.refused.Path == "" {
		return err
	}
	var o *Outside
	if err != nil && (errors.As(err, &o) || strings.Contains(err.Error(), (&Outside{}).Error())) {
		return err
	}
	return &Outside{Path: f.refused.Path}
}
