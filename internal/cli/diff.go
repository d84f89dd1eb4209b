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
annotations. Diagnostics go to stderr: the head's whenever it has any, the
base's when it has errors. For code scanning, run 'keyhole check --format
sarif' on the head.

Exit status: 0 no change, 1 changed, 2 error: a usage error, a ref that
does not resolve, no git repository, unreadable input, or a side whose check
finds errors (nothing is compared then; fix the side the message names).
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
	var opts render.Options
	registerRenderOptions(fs, &opts)
	target := fs.String("target", render.TargetKubernetes, "what to render: `kubernetes` or omnia, as for render")
	paths, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *format == "sarif" {
		fmt.Fprintln(e.stderr, "keyhole diff: --format sarif: a diff is not a list of findings; for code scanning run keyhole check --format sarif on the head")
		return exitUsage
	}
	if err := oneOf("format", *format, diffFormats()...); err != nil {
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
	// The two sides are independent: render them at once, each printing
	// into its own buffer, and print the buffers in order, base first,
	// so the output does not depend on which finishes first.
	var wg sync.WaitGroup
	for _, s := range sides {
		wg.Go(func() {
			if len(s.paths) == 0 {
				s.ok = true // the PATHs are all on the other side only
				return
			}
			se := &env{stdout: &s.stderr, stderr: &s.stderr}
			s.code, s.ok = s.render(se, wd, &f, diagFormat, opts, renderer)
		})
	}
	wg.Wait()
	for _, s := range sides {
		if _, err := e.stderr.Write(s.stderr.Bytes()); err != nil {
			return exitUsage
		}
		if !s.ok {
			return s.code
		}
	}
	bs, hs := sides[0].side(opts), sides[1].side(opts)
	if *target != render.TargetKubernetes {
		// The per-sandbox summary compares the plans' proxy configs,
		// which are what the kubernetes target deploys. Another target's
		// runtime derives its own from the objects rendered (the omnia
		// operator drops what it cannot express), so for it only the
		// rendered resources are compared.
		bs.Sandboxes, hs.Sandboxes = nil, nil
	}
	res := diff.Compare(bs, hs)
	if err := diff.Write(e.stdout, reportFormat, res); err != nil {
		return fail(e, "diff", err)
	}
	if res.Changed() {
		return exitFailed
	}
	return exitOK
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
		repo, err := source.OpenRepo(wd)
		if err != nil {
			return nil, err
		}
		if s.tree, err = repo.Tree(s.rev); err != nil {
			return nil, fmt.Errorf("--%s: %w", s.which, err)
		}
		s.ref.Commit = s.tree.Commit()
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

// diffSide is one side of a diff as the command loads it.
type diffSide struct {
	which string // "base" or "head"
	rev   string // as given; "" for the working tree
	ref   diff.Ref
	tree  *source.Tree // nil for the working tree
	paths []string     // the PATHs on this side
	c     checked
	files []render.File
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

func (s *diffSide) side(opts render.Options) diff.Side {
	return diff.Side{Ref: s.ref, Files: s.files, Sandboxes: s.c.result.Plan.Sandboxes, DefaultNamespace: opts.DefaultNamespace}
}

// render loads, checks and renders the side as 'keyhole render' does,
// printing its diagnostics to stderr; ok is false, with the exit code,
// when it cannot be compared. A render with no sandboxes is an empty
// side, not an error: a PR may add the first sandbox or remove the last.
func (s *diffSide) render(e *env, wd string, f *checkFlags, diagFormat string, opts render.Options, renderer render.Renderer) (int, bool) {
	docs, loadDiags, err := source.Load(s.paths, source.Options{Dir: wd, Tree: s.tree, AllowRemoteBases: f.allowRemoteBases})
	if err != nil {
		return fail(e, "diff", fmt.Errorf("%s %s: %w", s.which, s.ref, err)), false
	}
	c, err := compileDocs(docs, loadDiags, f)
	if err != nil {
		return fail(e, "diff", err), false
	}
	var rerr error
	if !c.result.Diagnostics.HasErrors() {
		var ds diag.List
		s.files, ds, rerr = renderer(c.result.Plan, opts)
		c.result.Diagnostics = append(c.result.Diagnostics, ds...)
		c.result.Diagnostics.Sort()
		c.rules = render.OmniaRules()
	}
	s.c = c
	hasErrors := c.result.Diagnostics.HasErrors()
	if len(c.result.Diagnostics) > 0 && (s.which == "head" || hasErrors) {
		if err := report(&env{stdout: e.stderr, stderr: e.stderr}, c, diagFormat, printFlags{}); err != nil {
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
	if errors.Is(rerr, render.ErrEmpty) {
		s.files = nil
		return exitOK, true
	}
	if rerr != nil {
		return fail(e, "diff", fmt.Errorf("%s %s: %w", s.which, s.ref, rerr)), false
	}
	return exitOK, true
}
