package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/diff"
	"keyhole.dev/keyhole/internal/gitfs"
	"keyhole.dev/keyhole/pipeline"
	"keyhole.dev/keyhole/render"
	"keyhole.dev/keyhole/source"
)

// workingTree names the head side when --head is not given.
const workingTree = "working tree"

// diffFormats are --format's values for diff: the report's format on
// stdout, and the diagnostics' on stderr (see diffFormat). There is no
// sarif: a diff is not a list of findings, and code scanning takes the
// head's from `keyhole check --format sarif`.
func diffFormats() []string { return []string{"text", "markdown", "json", "github"} }

// diffFormat maps --format to the report's format and the diagnostics'.
// github prints the report as markdown (for a PR comment or the job
// summary) and diagnostics as annotations.
func diffFormat(f string) (report, diags string) {
	switch f {
	case "markdown":
		return diff.FormatMarkdown, "text"
	case "json":
		return diff.FormatJSON, "json"
	case "github":
		return diff.FormatMarkdown, "github"
	}
	return diff.FormatText, "text"
}

const diffHelp = `Renders the inputs at two git refs in-process, as 'keyhole render' would,
and prints what changed per resource and, per sandbox, what it may reach.

--base REF and --head REF take what git's rev-parse takes for a commit: a
branch, a tag, origin/main, a full or short hash, HEAD~1. Without --head the
head side is the working tree as it is on disk, uncommitted changes
included. The repository is the one enclosing the working directory; PATHs
(default .) are relative to the working directory on both sides; a PATH on
one side only (a directory the change adds or deletes) is empty on the other.

--format text|markdown|json|github: the report on stdout is text, markdown
(a PR comment), or JSON; github gives markdown with diagnostics as GitHub
annotations. Diagnostics go to stderr, in every format alike: the head's
when it has errors or warnings, the base's when it has errors. For code scanning, run 'keyhole check --format
sarif' on the head.

Per sandbox the report leads with an access verdict, decided with the
proxy's own decision function on both sides: widened (some request is
allowed now that was refused, or carries a credential it did not),
narrowed, changed (both), unchanged, or undecided where the comparison
exceeds its bounds; with witnesses, the smallest requests that prove it.

--fail-on widened|narrowed|any (comma-separated for several) makes a CI
gate: exit 3 when a sandbox's verdict trips it. widened trips on widened,
changed and undecided; narrowed on narrowed, changed and undecided; any on
every verdict but unchanged.

Exit status: 0 no change, 1 changed, 2 error: a usage error, a ref that
does not resolve, no git repository, unreadable input, or a side whose check
finds errors (nothing is compared then; fix the side the message names);
3 the change trips --fail-on (the report is printed all the same).
`

func runDiff(e *env, args []string) int {
	fs := newFlags(e, "diff", "--base REF [--head REF] [flags] [PATH...]")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintf(e.stderr, "\n%s", diffHelp)
	}
	base := fs.String("base", "", "the `REF` to compare from, e.g. main or origin/main (required)")
	head := fs.String("head", "", "the `REF` to compare to; the working tree on disk when omitted")
	format := fs.String("format", "text", "output `format`: "+strings.Join(diffFormats(), ", "))
	var f checkFlags
	f.registerInputs(fs)
	f.registerImage(fs)
	var opts render.Options
	registerRenderOptions(fs, &opts)
	unit := registerUnit(fs)
	target := fs.String("target", render.TargetKubernetes, "what to render: `kubernetes` or omnia, as for render")
	failOn := fs.String("fail-on", "", "exit 3 when a sandbox's access `verdict` trips it: "+strings.Join(diff.Gates(), ", ")+" (comma-separated for several)")
	paths, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	opts.DefaultNamespace, opts.DefaultSandboxImage = f.namespace, f.sandboxImage
	if *format == "sarif" {
		fmt.Fprintln(e.stderr, "keyhole diff: --format sarif: a diff is not a list of findings; for code scanning run keyhole check --format sarif on the head")
		return exitUsage
	}
	if err := oneOf("format", *format, diffFormats()...); err != nil {
		fmt.Fprintf(e.stderr, "keyhole diff: %v\n", err)
		return exitUsage
	}
	gates, err := parseGates(*failOn, *target)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole diff: %v\n", err)
		return exitUsage
	}
	if *base == "" {
		fmt.Fprintln(e.stderr, "keyhole diff: --base REF is required: the ref to compare from, e.g. --base origin/main")
		return exitUsage
	}
	if slices.Contains(paths, "-") {
		fmt.Fprintln(e.stderr, "keyhole diff: reads its inputs from git refs and the working tree, not from standard input (-)")
		return exitUsage
	}
	renderer, err := render.ForTarget(*target)
	f.objects = *target == render.TargetOmnia
	f.noImages = *target == render.TargetOmnia
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole diff: --target: %v\n", err)
		return exitUsage
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	f.format = *format
	reportFormat, diagFormat := diffFormat(*format)

	wd, err := os.Getwd()
	if err != nil {
		return fail(e, "diff", err)
	}
	sides, err := openSides(wd, *base, *head, paths)
	if err != nil {
		return fail(e, "diff", err)
	}
	defer closeSides(sides)
	renderSide := func(s *diffSide, r *reuse) {
		if len(s.paths) == 0 {
			s.ok = true // the PATHs are all on the other side only
			return
		}
		se := &env{stdout: &s.stderr, stderr: &s.stderr}
		s.code, s.ok = s.render(se, wd, &f, diagFormat, opts, renderer, r)
	}
	if e.diffAfresh {
		// The two sides are independent: render them at once, each
		// printing into its own buffer, and print the buffers in order,
		// base first, so the output does not depend on which finishes
		// first.
		var wg sync.WaitGroup
		for _, s := range sides {
			wg.Go(func() { renderSide(s, nil) })
		}
		wg.Wait()
	} else {
		// A pull request leaves most files as they were: the head takes
		// from the base what the same inputs gave (see reuse), so it
		// comes second. Each step spreads its work over every core.
		r := e.diffReuse
		if r == nil {
			r = newReuse()
		}
		for _, s := range sides {
			renderSide(s, r)
		}
	}
	for _, s := range sides {
		if _, err := e.stderr.Write(s.stderr.Bytes()); err != nil {
			return exitUsage
		}
		if !s.ok {
			return s.code
		}
	}
	names := sideUnits(sides, *unit)
	if *unit != "" && len(names) == 0 {
		fmt.Fprintf(e.stderr, "keyhole diff: --unit %q: neither side has such a deploy unit with something to render\n", *unit)
		return exitUsage
	}
	// Each deploy unit is compared on its own, as the cluster applies it:
	// the same object in two units is two resources, not one. Several
	// units' files are compared where render -o writes them, each under
	// its unit's directory.
	var results []diff.Result
	for _, name := range names {
		bs, hs := sides[0].side(opts, name, len(names) > 1), sides[1].side(opts, name, len(names) > 1)
		if *target != render.TargetKubernetes {
			// The per-sandbox summary compares the plans' proxy configs,
			// which are what the kubernetes target deploys. Another
			// target's runtime derives its own from the objects rendered
			// (the omnia operator drops what it cannot express), so for
			// it only the rendered resources are compared.
			bs.Sandboxes, hs.Sandboxes = nil, nil
		}
		results = append(results, diff.Compare(bs, hs))
	}
	res := diff.Merge(results...)
	if len(results) == 0 {
		res = diff.Compare(diff.Side{Ref: sides[0].ref}, diff.Side{Ref: sides[1].ref})
	}
	if err := diff.Write(e.stdout, reportFormat, res); err != nil {
		return fail(e, "diff", err)
	}
	if tripped := res.Tripped(gates); len(tripped) > 0 {
		fmt.Fprintf(e.stderr, "keyhole diff: --fail-on %s: %s\n", *failOn, trippedNames(tripped))
		return exitGate
	}
	if res.Changed() {
		return exitFailed
	}
	return exitOK
}

// parseGates reads --fail-on: gate names, comma-separated. The gates
// judge the access verdicts, which only the kubernetes target's plans
// give.
func parseGates(v, target string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var gates []string
	for _, g := range strings.Split(v, ",") {
		g = strings.TrimSpace(g)
		if err := oneOf("fail-on", g, diff.Gates()...); err != nil {
			return nil, err
		}
		gates = append(gates, g)
	}
	if target != render.TargetKubernetes {
		return nil, fmt.Errorf("%w: --fail-on judges the access verdicts, which --target %s does not give: the operator derives that target's policy from the rendered objects", errUsage, target)
	}
	return gates, nil
}

// trippedNames names the sandboxes that tripped the gate with their
// verdicts, the first few of them.
func trippedNames(ss []diff.SandboxChange) string {
	const shown = 5
	var parts []string
	for _, s := range ss[:min(len(ss), shown)] {
		parts = append(parts, fmt.Sprintf("%s %s", s.ID(), s.Verdict))
	}
	out := strings.Join(parts, ", ")
	if len(ss) > shown {
		out += fmt.Sprintf(" and %d more", len(ss)-shown)
	}
	return out
}

// openSides resolves the base and head refs (head "" is the working tree)
// in the repository enclosing wd, and gives each side the PATHs it has.
func openSides(wd, base, head string, paths []string) ([]*diffSide, error) {
	sides := []*diffSide{{which: "base", rev: base}, {which: "head", rev: head}}
	for _, s := range sides {
		s.ref = diff.Ref{Name: s.rev}
		if s.rev == "" {
			s.ref.Name = workingTree
			continue
		}
		// Each side reads through its own handle: the sides are rendered
		// concurrently, and go-git's object storage is not documented as
		// safe for concurrent use.
		repo, err := gitfs.OpenRepo(wd)
		if err != nil {
			closeSides(sides)
			return nil, err
		}
		if s.tree, err = repo.Tree(s.rev); err != nil {
			_ = repo.Close()
			closeSides(sides)
			return nil, fmt.Errorf("--%s: %w", s.which, err)
		}
		s.ref.Commit = s.tree.Commit()
	}
	if head == "" {
		if err := sparseOmitted(wd, paths); err != nil {
			closeSides(sides)
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
				s.paths = append(s.paths, p)
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

// closeSides closes the repository handles the sides read their commits
// through. Nothing is read after, so an error closing a file read only is
// no error of the command's.
func closeSides(sides []*diffSide) {
	for _, s := range sides {
		if s.tree != nil {
			_ = s.tree.Close()
		}
	}
}

// diffSide is one side of a diff as the command loads it.
type diffSide struct {
	which string // "base" or "head"
	rev   string // as given; "" for the working tree
	ref   diff.Ref
	tree  *gitfs.Tree // nil for the working tree
	paths []string    // the PATHs on this side
	c     pipeline.Checked
	units []pipeline.Rendered
	// What rendering it printed and returned.
	stderr bytes.Buffer
	code   int
	ok     bool
}

// exists reports whether path p (relative to wd) is on the side; a path
// that cannot be checked for another reason counts as there, for Load to
// report.
func (s *diffSide) exists(wd, p string) bool {
	if !filepath.IsAbs(p) {
		p = filepath.Join(wd, p)
	}
	var err error
	if s.tree != nil {
		_, err = s.tree.Stat(p)
	} else {
		_, err = os.Stat(p)
	}
	return !errors.Is(err, fs.ErrNotExist)
}

// side is the deploy unit named name of the side, empty when the side
// lacks it; with several units compared, its files are under the unit's
// directory and its sandboxes name the unit.
func (s *diffSide) side(opts render.Options, name string, several bool) diff.Side {
	out := diff.Side{Ref: s.ref, DefaultNamespace: opts.DefaultNamespace}
	for _, u := range s.units {
		if u.Name != name {
			continue
		}
		out.Files, out.Sandboxes = u.Files, u.Plan.Sandboxes
		if several {
			out.Files = pipeline.Placed(u)
			out.Unit = pipeline.UnitName(name)
		}
	}
	return out
}

// sideUnits lists the deploy units with something rendered on either
// side, sorted, or only the one --unit names.
func sideUnits(sides []*diffSide, only string) []string {
	var names []string
	for _, s := range sides {
		for _, u := range s.units {
			if only != "" && u.Name != only && pipeline.UnitName(u.Name) != only {
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

// render loads, checks and renders the side as 'keyhole render' does,
// printing its diagnostics to stderr; ok is false, with the exit code,
// when it cannot be compared. A render with no sandboxes is an empty
// side, not an error: a PR may add the first sandbox or remove the last.
func (s *diffSide) render(e *env, wd string, f *checkFlags, diagFormat string, opts render.Options, renderer render.Renderer, r *reuse) (int, bool) {
	popts := f.options(e, s.paths)
	v, err := pipeline.Validator(popts)
	if err != nil {
		return fail(e, "diff", err), false
	}
	docs, loadDiags, err := source.Load(s.paths, source.Options{Dir: wd, Tree: s.tree, AllowRemoteBases: f.allowRemoteBases, Digest: popts.Digest(v), Memo: r.source()})
	if err != nil {
		return fail(e, "diff", fmt.Errorf("%s %s: %w", s.which, s.ref, err)), false
	}
	opts.Reuse = r.render()
	c, err := pipeline.Compile(docs, loadDiags, popts, v)
	if err != nil {
		return fail(e, "diff", err), false
	}
	s.units, err = pipeline.Render(&c, opts, renderer, "")
	s.c = c
	hasErrors := c.Result.Diagnostics.HasErrors()
	if shown(c.Result.Diagnostics, diagFormat, f.print.verbose) && (s.which == "head" || hasErrors) {
		if err := report(&env{stdout: e.stderr, stderr: e.stderr}, c, diagFormat, f.print); err != nil {
			return fail(e, "diff", err), false
		}
		if !hasErrors {
			fmt.Fprintf(e.stderr, "keyhole diff: the diagnostics above are %s's, %s\n", s.which, s.ref)
		}
	}
	if hasErrors {
		fmt.Fprintf(e.stderr, "keyhole diff: %s %s: the check found errors; nothing compared\n", s.which, s.ref)
		return exitUsage, false
	}
	if errors.Is(err, render.ErrEmpty) {
		s.units = nil
		return exitOK, true
	}
	if err != nil {
		return fail(e, "diff", fmt.Errorf("%s %s: %w", s.which, s.ref, err)), false
	}
	return exitOK, true
}

// reuse is what the diff's second side takes from its first, by content:
// a file of the same name and bytes parses to the same documents, with
// what compiler.Digest found in them (their schema findings, the decoded
// objects), and an equal sandbox renders to
// the same files, so that a pull request that changes one object of
// thousands costs little more than one render. Each step still runs on
// its whole side (the checks resolve references across every document,
// and a render lists every file), so nothing that changed can be missed:
// only the results of identical inputs are shared.
type reuse struct {
	parsed   *source.Memo
	rendered *render.Reuse
}

func newReuse() *reuse {
	return &reuse{parsed: source.NewMemo(), rendered: render.NewReuse()}
}

func (r *reuse) source() *source.Memo {
	if r == nil {
		return nil
	}
	return r.parsed
}

func (r *reuse) render() *render.Reuse {
	if r == nil {
		return nil
	}
	return r.rendered
}

// shown reports whether a side's diagnostics are printed: when it has
// errors or warnings, or with -v any at all.
func shown(ds diag.List, format string, verbose bool) bool {
	if verbose {
		return len(ds) > 0
	}
	// Every format alike: info alone (what was skipped) is no reason to
	// print a side's diagnostics, which -v asks for.
	return ds.Count(diag.Error)+ds.Count(diag.Warning) > 0
}
