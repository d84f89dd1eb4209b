package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"keyhole.dev/keyhole/diff"
	"keyhole.dev/keyhole/internal/gitfs"
	"keyhole.dev/keyhole/render"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/engines"
)

// WorkingTree names the head side when no head ref is given.
const WorkingTree = "working tree"

// Side is one side of a diff: the inputs at a git ref, or in the working
// tree, loaded, checked and rendered.
type Side struct {
	Which string // "base" or "head"
	Rev   string // as given; "" for the working tree
	Ref   diff.Ref
	Tree  *gitfs.Tree // nil for the working tree
	Paths []string    // the PATHs on this side
	// Checked is the side's inputs checked (Check), with the target's
	// diagnostics (Render).
	Checked Checked
	// Units is what Render rendered: none when the side has nothing to
	// render.
	Units []Rendered
}

// OpenSides resolves the base and head refs (head "" is the working tree)
// in the repository enclosing wd, and gives each side the PATHs it has.
// CloseSides closes what it opened.
func OpenSides(wd, base, head string, paths []string) ([]*Side, error) {
	sides := []*Side{{Which: "base", Rev: base}, {Which: "head", Rev: head}}
	for _, s := range sides {
		s.Ref = diff.Ref{Name: s.Rev}
		if s.Rev == "" {
			s.Ref.Name = WorkingTree
			continue
		}
		// Each side reads through its own handle: the sides are rendered
		// concurrently, and go-git's object storage is not documented as
		// safe for concurrent use.
		repo, err := gitfs.OpenRepo(wd)
		if err != nil {
			CloseSides(sides)
			return nil, err
		}
		if s.Tree, err = repo.Tree(s.Rev); err != nil {
			_ = repo.Close()
			CloseSides(sides)
			return nil, fmt.Errorf("--%s: %w", s.Which, err)
		}
		s.Ref.Commit = s.Tree.Commit()
	}
	if head == "" {
		if err := sparseOmitted(wd, paths); err != nil {
			CloseSides(sides)
			return nil, err
		}
	}
	for i, s := range sides {
		other := sides[1-i]
		// A PATH the PR adds (or removes) is empty on the side without
		// it, not unreadable: everything in it is added (or removed).
		// Missing on both sides, it is the user's mistake, and Load
		// says so.
		for _, p := range paths {
			if s.exists(wd, p) || !other.exists(wd, p) {
				s.Paths = append(s.Paths, p)
			}
		}
	}
	return sides, nil
}

// sparseOmitted refuses a working-tree side whose PATHs reach files a
// sparse checkout leaves out: read from disk they would be deleted, and
// their sandboxes' access reported narrowed, where git sees no change.
func sparseOmitted(wd string, paths []string) error {
	repo, err := gitfs.OpenRepo(wd)
	if err != nil {
		return err
	}
	defer func() { _ = repo.Close() }()
	omitted, err := repo.SparseOmitted(wd, paths)
	if errors.Is(err, gitfs.ErrSparseIndex) {
		return fmt.Errorf("%w; without one (git sparse-checkout set --no-sparse-index) keyhole tells what it leaves out, or compare commits with --head", err)
	}
	if err != nil || len(omitted) == 0 {
		return err
	}
	files := fmt.Sprintf("%d files", len(omitted))
	if len(omitted) == 1 {
		files = "a file"
	}
	return fmt.Errorf("the working tree is a sparse checkout that leaves out %s under %s, such as %s: they would read as deleted; name PATHs inside the checkout, or compare commits with --head",
		files, strings.Join(paths, ", "), filepath.ToSlash(omitted[0]))
}

// CloseSides closes the repository handles the sides read their commits
// through. Nothing is read after, so an error closing a file read only is
// no error of the caller's.
func CloseSides(sides []*Side) {
	for _, s := range sides {
		if s.Tree != nil {
			_ = s.Tree.Close()
		}
	}
}

// exists reports whether path p (relative to wd) is on the side; a path
// that cannot be checked for another reason counts as there, for Load to
// report.
func (s *Side) exists(wd, p string) bool {
	if !filepath.IsAbs(p) {
		p = filepath.Join(wd, p)
	}
	var err error
	if s.Tree != nil {
		_, err = s.Tree.Stat(p)
	} else {
		_, err = os.Stat(p)
	}
	return !errors.Is(err, fs.ErrNotExist)
}

// DiffSide is the deploy unit named name of the side, as diff.Compare
// takes it, empty when the side lacks it; with several units compared,
// its files are under the unit's directory and its sandboxes name the
// unit.
func (s *Side) DiffSide(opts render.Options, name string, several bool) diff.Side {
	out := diff.Side{Ref: s.Ref, DefaultNamespace: opts.DefaultNamespace}
	for _, u := range s.Units {
		if u.Name != name {
			continue
		}
		out.Files, out.Sandboxes, out.Ceiling = u.Files, u.Plan.Sandboxes, u.Plan.Ceiling
		if several {
			out.Files = Placed(u)
			out.Unit = UnitName(name)
		}
	}
	return out
}

// SideUnits lists the deploy units with something rendered on either
// side, sorted, or only the one only names.
func SideUnits(sides []*Side, only string) []string {
	var names []string
	for _, s := range sides {
		for _, u := range s.Units {
			if only != "" && u.Name != only && UnitName(u.Name) != only {
				continue
			}
			if !slices.Contains(names, u.Name) {
				names = append(names, u.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// Check loads the side's PATHs, relative to wd, from its commit or the
// working tree, and checks them as Check does, into s.Checked; r, when
// not nil, gives it what an earlier side's identical files parsed to. An
// error means the inputs could not be read at all.
func (s *Side) Check(wd string, opts Options, r *Reuse) error {
	v, err := Validator(opts)
	if err != nil {
		return err
	}
	docs, loadDiags, err := source.Load(s.Paths, source.Options{Engines: engines.All(), Dir: wd, Tree: s.Tree, AllowRemoteBases: opts.AllowRemoteBases, Exclude: opts.Exclude, Parallelism: opts.Parallelism, Digest: opts.Digest(v), Memo: r.Source()})
	if err != nil {
		return fmt.Errorf("%s %s: %w", s.Which, s.Ref, err)
	}
	c, err := Compile(docs, loadDiags, opts, v)
	if err != nil {
		return err
	}
	s.Checked = c
	return nil
}

// Render renders the checked side as Render does, into s.Units, adding
// the target's diagnostics to s.Checked; r, when not nil, gives it what an
// earlier side's equal sandboxes rendered to. A render with no sandboxes
// is an empty side, not an error: a PR may add the first sandbox or remove
// the last. A side whose check found errors renders nothing.
func (s *Side) Render(opts render.Options, renderer render.Renderer, r *Reuse) error {
	opts.Reuse = r.Render()
	var err error
	s.Units, err = renderUnits(&s.Checked, opts, renderer, "", false, nil)
	if errors.Is(err, render.ErrEmpty) {
		s.Units = nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", s.Which, s.Ref, err)
	}
	return nil
}

// Reuse is what a diff's two sides share, by content, whichever side
// comes to an input first computing it while the other waits for it:
// a file of the same name and bytes parses to the same documents, with
// what compiler.Digest found in them (their schema findings, the decoded
// objects); a kustomize build whose filesystem answers every question it
// asked the same gives the same objects; and an equal sandbox renders to
// the same files. So a pull request that changes one object of thousands
// costs little more than one render. Each step still runs on its whole
// side (the checks resolve references across every document, and a
// render lists every file), so nothing that changed can be missed: only
// the results of identical inputs are shared. A nil *Reuse shares
// nothing.
type Reuse struct {
	parsed   *source.Memo
	rendered *render.Reuse
}

// NewReuse returns an empty Reuse, for the sides of one diff.
func NewReuse() *Reuse {
	return &Reuse{parsed: source.NewMemo(), rendered: render.NewReuse()}
}

// Source is the loader's memo of parsed files; nil for a nil r.
func (r *Reuse) Source() *source.Memo {
	if r == nil {
		return nil
	}
	return r.parsed
}

// Render is the renderer's reuse of rendered sandboxes; nil for a nil r.
func (r *Reuse) Render() *render.Reuse {
	if r == nil {
		return nil
	}
	return r.rendered
}
