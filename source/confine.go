package source

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/gitfs"
	"keyhole.dev/keyhole/internal/kustbuild"
)

// Symbolic links never lead outside the repository (docs/inputs.md): a
// link whose target lies outside its root is an InputInvalid error at the
// link, and nothing is read through it, on disk as in a commit (whose
// tree holds nothing outside it). The root is the enclosing git working
// tree's; outside one, the directory walked, or, for what a build reads,
// buildRoot's. A target in a .git directory is outside too. Targets are
// resolved as the commit reader resolves them, a path element at a time
// and lexically, so the disk and a commit give the same answer, whether
// or not the target exists.

// confinement returns the root links under dir (absolute) must stay in:
// the nearest ancestor holding .git, and true; else dir itself, and
// false.
func confinement(fsys fileSystem, dir string) (root string, git bool) {
	for d := dir; ; {
		if _, err := fsys.Lstat(filepath.Join(d, ".git")); err == nil {
			return d, true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir, false
		}
		d = parent
	}
}

// buildRoot is the root no read of a build of dir (absolute) may leave,
// whatever kustomize's load restrictions (kustbuild.Options.Root): the
// repository's, a commit's tree or the git working tree enclosing dir;
// outside any, Options.Root or the working directory when dir is in it,
// else the outermost PATH named that holds dir (a repository named by
// its absolute path from elsewhere), else dir itself.
func (l *loader) buildRoot(dir string) string {
	if t := l.opts.Tree; t != nil {
		return t.Root()
	}
	if root, git := confinement(l.fsys, dir); git {
		return root
	}
	if l.opts.Root != "" && within(l.osPath(l.opts.Root), dir) {
		return l.osPath(l.opts.Root)
	}
	if within(l.dir, dir) {
		return l.dir
	}
	root := dir
	for _, p := range l.named {
		if within(p, dir) && len(p) < len(root) {
			root = p
		}
	}
	return root
}

// ErrOutsideRepo is the error of a read outsideRepo (Host.OutsideRepo)
// refuses.
var ErrOutsideRepo = errors.New("outside the repository (in a .git directory, or through a symbolic link leading out), which keyhole never reads")

// outsideRepo reports whether reading abs (a file an engine's object
// names: a Helm value file, an Argo CD file parameter) would leave the
// repository that holds dir (buildRoot): a path outside it or in a .git
// directory, or a symbolic link on the way whose target is.
func (l *loader) outsideRepo(dir, abs string) bool {
	root := l.buildRoot(dir)
	return !inRepo(root, abs) || linkOutside(l.fsys, root, abs) != ""
}

// inRepo reports whether abs lies in root and not in a .git directory
// under it, lexically (kustbuild.Inside).
func inRepo(root, abs string) bool {
	return kustbuild.Inside(filepath.Clean(root), filepath.Clean(abs))
}

// linkOutside returns the first symbolic link met in resolving abs whose
// target lies outside root, or in a .git directory under it, as its path
// (its directory resolved), or "" when there is none. A path outside root
// is not its business (""): inRepo and the build's confined file system
// refuse it. What
// cannot be resolved (a missing element, a link loop) is "" too: reading
// the path reports it.
func linkOutside(fsys fileSystem, root, abs string) string {
	link, _ := resolveLinks(fsys, root, abs)
	return link
}

// resolveLinks resolves the symbolic links on the way to abs, inside
// root: link is linkOutside's answer, and real, when link is "", the path
// abs lands at with every link resolved, or "" when it cannot be resolved
// or lies outside root.
func resolveLinks(fsys fileSystem, root, abs string) (link, real string) {
	root, abs = filepath.Clean(root), filepath.Clean(abs)
	if !within(root, abs) {
		return "", ""
	}
	rest := components(root, abs)
	cur := root
	for hops := 0; len(rest) > 0; {
		next := filepath.Join(cur, rest[0])
		rest = rest[1:]
		fi, err := fsys.Lstat(next)
		if err != nil {
			return "", ""
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > gitfs.MaxSymlinkHops {
			return "", ""
		}
		target, err := fsys.readlink(next)
		if err != nil {
			return "", ""
		}
		var to string
		if path.IsAbs(target) || filepath.IsAbs(target) {
			to = filepath.Clean(filepath.FromSlash(target))
		} else {
			to = filepath.Join(cur, filepath.FromSlash(target))
		}
		if !inRepo(root, to) {
			return next, ""
		}
		rest = append(components(root, to), rest...)
		cur = root
	}
	return "", cur
}

// listingGuard keeps a listing of the tree from entering a directory it
// is already listing, by where the directory's links land: a link back
// up the tree (a -> .) names the same directory under ever longer paths,
// and two such links 2^40 of them.
type listingGuard struct {
	l       *loader
	confine string
	listing map[string]bool
}

// guardListing is a listingGuard for a listing of root (absolute).
func (l *loader) guardListing(root string) *listingGuard {
	confine, _ := confinement(l.fsys, root)
	return &listingGuard{l: l, confine: confine, listing: map[string]bool{}}
}

// enter reports whether dir may be listed: false when it, or where its
// links land, is being listed. Otherwise the caller lists it, then calls
// leave with key.
func (g *listingGuard) enter(dir string) (key string, ok bool) {
	_, real := g.l.scopeMemo.resolve(g.l.fsys, g.confine, dir)
	key = cmp.Or(real, dir)
	if g.listing[key] {
		return "", false
	}
	g.listing[key] = true
	return key, true
}

// leave ends the listing enter let begin.
func (g *listingGuard) leave(key string) { delete(g.listing, key) }

// readlink is os.Readlink.
func (*osFS) readlink(name string) (string, error) { return os.Readlink(name) }

// linkOutsideMessage is what is said of a link that leads outside the
// root; it never names the target, which is not the repository's.
func linkOutsideMessage(git bool) string {
	where := "the git working tree it is in"
	if !git {
		where = "the directory checked (there is no enclosing git working tree)"
	}
	return "symbolic link whose target is outside " + where + " (or in a .git directory): keyhole does not follow it, so nothing is read through it; commit the file itself, or point the link inside the repository"
}

// linkOutsideDiag is the error at a link that leads outside the root,
// reported as name.
func linkOutsideDiag(name string, git bool) diag.Diagnostic {
	return diag.Diagnostic{
		Code:     CodeInputInvalid,
		Severity: diag.Error,
		Pos:      diag.Pos{File: name, Line: 1, Column: 1},
		Message:  linkOutsideMessage(git),
	}
}

// namedOutside reports, for a path named explicitly (p, at abs) inside a
// git working tree, a symbolic link on its way that leads outside that
// tree: an error at the link, and true. A path named outside any git
// working tree is the user's to name, and followed.
func (l *loader) namedOutside(p, abs string) bool {
	root, git := confinement(l.fsys, filepath.Dir(abs))
	if !git {
		return false
	}
	link := linkOutside(l.fsys, root, abs)
	if link == "" {
		return false
	}
	name := l.display(p, abs)
	if link != abs {
		name = l.display(link, link)
	}
	l.diags = append(l.diags, linkOutsideDiag(name, true))
	return true
}

// Outside checks, for a kustomize build, that the path it reads leads
// nowhere outside the build's root: it returns the link that does, and
// the error at it.
func (r buildRules) Outside(p string) (string, diag.Diagnostic) {
	if r.confine == "" {
		return "", diag.Diagnostic{}
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(r.confine, abs)
	}
	if link := linkOutside(r.fsys, r.confine, abs); link != "" {
		return link, linkOutsideDiag("", r.confineGit)
	}
	return "", diag.Diagnostic{}
}
