package gitfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// ErrSparseIndex: the working tree is a sparse checkout whose index
// go-git cannot read, so what it leaves out is not known.
var ErrSparseIndex = errors.New("the working tree is a sparse checkout whose index keyhole cannot read (a sparse index?)")

// readOnlyExtensions are the repository extensions git lets a format-0
// repository set (gitrepository-layout(5), "extensions"), which change
// nothing of how a commit, tree, blob or reference is read: worktreeConfig
// (per-worktree configuration, which git sparse-checkout turns on),
// partialClone (objects a promisor remote may still hold: a missing one
// is reported as such, loadTree), preciousObjects (never prune) and noop.
// keyhole never writes to a repository, so it reads past them; go-git v5
// refuses every one. Any other extension (objectFormat, refStorage) is
// left for go-git to refuse.
var readOnlyExtensions = []string{"worktreeConfig", "partialClone", "preciousObjects", "noop"}

// extensionRefused reports whether go-git refused to open a repository
// for an extension it does not know.
func extensionRefused(err error) bool {
	return errors.Is(err, git.ErrUnsupportedExtensionRepositoryFormatVersion) || errors.Is(err, git.ErrUnknownExtension)
}

// Config is the repository's configuration without readOnlyExtensions,
// so that go-git opens a repository that sets them.
func (s *objectStore) Config() (*config.Config, error) {
	cfg, err := s.Storage.Config()
	if err != nil || cfg.Raw == nil || !cfg.Raw.HasSection("extensions") {
		return cfg, err
	}
	sec := cfg.Raw.Section("extensions")
	for _, name := range readOnlyExtensions {
		sec.RemoveOption(name)
	}
	return cfg, nil
}

// openWithExtensions opens the repository enclosing abs as
// git.PlainOpenWithOptions does (the nearest .git at or above it, a
// directory or a linked worktree's "gitdir:" file, and its commondir),
// on the objectStore, whose Config drops readOnlyExtensions: what OpenRepo
// falls back to when go-git refused one of them.
func openWithExtensions(abs string) (*git.Repository, *objectStore, error) {
	dot, wt, err := findDotGit(abs)
	if err != nil {
		return nil, nil, err
	}
	repoFS := billy.Filesystem(dot)
	if b, err := os.ReadFile(filepath.Join(dot.Root(), "commondir")); err == nil {
		common := strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(dot.Root(), common)
		}
		repoFS = dotgit.NewRepositoryFilesystem(dot, osfs.New(common))
	} else if !os.IsNotExist(err) {
		return nil, nil, err
	}
	st := newObjectStore(filesystem.NewStorage(repoFS, cache.NewObjectLRUDefault()))
	r, err := git.Open(st, wt)
	if err != nil {
		return nil, nil, errors.Join(err, st.Close())
	}
	return r, st, nil
}

// findDotGit returns the git directory of the nearest directory at or
// above abs that holds .git, and that directory, the working tree.
func findDotGit(abs string) (dot, wt billy.Filesystem, err error) {
	for dir := abs; ; dir = filepath.Dir(dir) {
		p := filepath.Join(dir, git.GitDirName)
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			return osfs.New(p), osfs.New(dir), nil
		case err == nil:
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, nil, err
			}
			line, _, _ := strings.Cut(string(b), "\n")
			gitdir, ok := strings.CutPrefix(line, "gitdir: ")
			if !ok {
				return nil, nil, fmt.Errorf("%s has no gitdir: line", p)
			}
			gitdir = strings.TrimSpace(gitdir)
			if !filepath.IsAbs(gitdir) {
				gitdir = filepath.Join(dir, gitdir)
			}
			return osfs.New(gitdir), osfs.New(dir), nil
		case !os.IsNotExist(err):
			return nil, nil, err
		}
		if filepath.Dir(dir) == dir {
			return nil, nil, git.ErrRepositoryNotExists
		}
	}
}

// SparseOmitted returns the files under paths (relative to wd, as the
// working tree's side of a diff reads them) that the index holds but a
// sparse checkout leaves out of the working tree: marked skip-worktree
// and absent on disk. git counts them unchanged; read from disk they
// would be deleted. Each is relative to wd, in the index's order. An
// index go-git cannot read gives none, unless the working tree is a
// sparse checkout (its git directory has info/sparse-checkout), whose
// index is then likely a sparse one: ErrSparseIndex.
func (r *Repo) SparseOmitted(wd string, paths []string) ([]string, error) {
	idx, err := r.repo.Storer.Index()
	if err != nil {
		dot, _, ferr := findDotGit(r.root)
		if ferr != nil {
			return nil, nil
		}
		if _, serr := os.Stat(filepath.Join(dot.Root(), "info", "sparse-checkout")); serr != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %w", ErrSparseIndex, err)
	}
	var under []string // the paths, relative to the root, slash-separated
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(wd, p)
		}
		rel, err := filepath.Rel(r.root, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		under = append(under, filepath.ToSlash(rel))
	}
	var out []string
	for _, e := range idx.Entries {
		if !e.SkipWorktree || !slices.ContainsFunc(under, func(u string) bool {
			return u == "." || e.Name == u || strings.HasPrefix(e.Name, u+"/")
		}) {
			continue
		}
		abs := filepath.Join(r.root, filepath.FromSlash(e.Name))
		if _, err := os.Lstat(abs); !os.IsNotExist(err) {
			continue
		}
		if rel, err := filepath.Rel(wd, abs); err == nil {
			out = append(out, rel)
		}
	}
	return out, nil
}

// Tracked returns the git working tree enclosing dir (absolute) and the
// paths its index tracks, relative to it and slash-separated, with every
// directory above a tracked file: what git holds whatever a .gitignore
// says. No working tree, or an index that cannot be read (none yet in a
// new repository), gives root "" and no paths.
func Tracked(dir string) (root string, paths map[string]bool) {
	dot, wt, err := findDotGit(dir)
	if err != nil {
		return "", nil
	}
	f, err := os.Open(filepath.Join(dot.Root(), "index"))
	if err != nil {
		return "", nil
	}
	defer f.Close()
	var idx index.Index
	if err := index.NewDecoder(f).Decode(&idx); err != nil {
		return "", nil
	}
	paths = make(map[string]bool, len(idx.Entries))
	for _, e := range idx.Entries {
		for p := e.Name; p != "." && p != "" && !paths[p]; p = path.Dir(p) {
			paths[p] = true
		}
	}
	return wt.Root(), paths
}
