package cli

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/diff"
	"keyhole.dev/keyhole/pipeline"
	"keyhole.dev/keyhole/render"
)

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
every verdict but unchanged. A change to the gate itself (the root
keyhole.yaml's ceiling, exclude, include, ignore or other settings, or an
object's keyhole.dev/ignore annotation) is reported apart, and trips widened
when it loosens the gate, narrowed when it tightens it, any either way.

Exit status: 0 no change, 1 changed, 2 error: a usage error, a ref that
does not resolve, no git repository, unreadable input, or a side whose check
finds errors (nothing is compared then; fix the side the message names);
3 the change trips --fail-on (the report is printed all the same).
`

func runDiff(e *env, args []string) int {
	fs := newFlags(e, "diff", "--base REF [--head REF] [flags] [PATH...]")
	helpAfterUsage(fs, e.stderr, diffHelp)
	base := fs.String("base", "", "the `REF` to compare from, e.g. main or origin/main (required)")
	head := fs.String("head", "", "the `REF` to compare to; the working tree on disk when omitted")
	format := fs.String("format", "text", "output `format`: "+strings.Join(diffFormats(), ", "))
	var f checkFlags
	f.registerInputs(fs)
	f.registerImage(fs)
	var opts render.Options
	registerRenderOptions(fs, &opts)
	unit := registerUnit(fs)
	target := fs.String("target", render.TargetKubernetes, "what to render: `kubernetes`, omnia or agent-sandbox, as for render")
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
		fmt.Fprintf(e.stderr, "keyhole diff: %s\n", errText(err))
		return exitUsage
	}
	gates, err := parseGates(*failOn, *target)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole diff: %s\n", errText(err))
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
	f.objects = *target == render.TargetOmnia || *target == render.TargetAgentSandbox
	f.noImages = *target == render.TargetOmnia
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole diff: --target: %s\n", errText(err))
		return exitUsage
	}
	if err := omniaTakesNoProxyFlags(fs, *target); err != nil {
		fmt.Fprintf(e.stderr, "keyhole diff: %s\n", errText(err))
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
	ps, err := pipeline.OpenSides(wd, *base, *head, paths)
	if err != nil {
		return fail(e, "diff", err)
	}
	defer pipeline.CloseSides(ps)
	sides := diffSides(ps)
	renderSide := func(s *diffSide, r *pipeline.Reuse) {
		if len(s.Paths) == 0 {
			s.ok = true // the PATHs are all on the other side only
			return
		}
		// The buffer holds lines made safe for a CI log and, in the
		// github format, the annotations (see env.rawErr).
		buf := diag.NewLogWriter(&s.stderr)
		se := &env{stdout: buf, stderr: buf, rawStderr: &s.stderr}
		s.code, s.ok = s.render(se, wd, &f, diagFormat, opts, renderer, r)
		buf.Flush()
	}
	// The two sides load, check and render at once, each printing into
	// its own buffer, and the buffers are printed in order, base first,
	// so the output does not depend on which finishes first. A pull
	// request leaves most files as they were: the sides share what the
	// same inputs give (see pipeline.Reuse), whichever side comes to an
	// input first computing it and the other taking it, so each is
	// computed once. Each step spreads its work over every core.
	var r *pipeline.Reuse
	if !e.diffAfresh {
		r = cmp.Or(e.diffReuse, pipeline.NewReuse())
	}
	var wg sync.WaitGroup
	for _, s := range sides {
		wg.Go(func() { renderSide(s, r) })
	}
	wg.Wait()
	for _, s := range sides {
		if _, err := e.rawErr().Write(s.stderr.Bytes()); err != nil {
			return exitUsage
		}
		if !s.ok {
			return s.code
		}
	}
	names := pipeline.SideUnits(ps, *unit)
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
		bs, hs := sides[0].DiffSide(opts, name, len(names) > 1), sides[1].DiffSide(opts, name, len(names) > 1)
		if *target == render.TargetOmnia {
			// The per-sandbox summary compares the plans' proxy configs,
			// which are what the kubernetes and agent-sandbox targets
			// deploy. The omnia operator derives its own from the objects
			// rendered (it drops what it cannot express), so for that
			// target only the rendered resources are compared.
			bs.Sandboxes, hs.Sandboxes = nil, nil
		}
		results = append(results, diff.Compare(bs, hs))
	}
	res := diff.Merge(results...)
	if len(results) == 0 {
		res = diff.Compare(diff.Side{Ref: sides[0].Ref}, diff.Side{Ref: sides[1].Ref})
	}
	// The governing Config and the ignore annotations are the gate
	// itself: a change to them is reported, and one that loosens it
	// trips --fail-on widened, whatever the sandboxes' verdicts say.
	res.Gate = diff.CompareGate(sides[0].Checked.Result.Gate, sides[1].Checked.Result.Gate)
	if err := diff.Write(e.stdout, reportFormat, res); err != nil {
		return fail(e, "diff", err)
	}
	tripped, gateTripped := res.Tripped(gates), res.GateTripped(gates)
	if len(gateTripped) > 0 {
		fmt.Fprintf(e.stderr, "keyhole diff: --fail-on %s: the gate itself changed: %s\n", *failOn, gateNames(gateTripped))
	}
	if len(tripped) > 0 {
		fmt.Fprintf(e.stderr, "keyhole diff: --fail-on %s: %s\n", *failOn, trippedNames(tripped))
	}
	if len(tripped)+len(gateTripped) > 0 {
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
	if target == render.TargetOmnia {
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

// gateNames names the changes to the gate that tripped it, the first
// few of them.
func gateNames(cs []diff.GateChange) string {
	const shown = 3
	var parts []string
	for _, c := range cs[:min(len(cs), shown)] {
		parts = append(parts, fmt.Sprintf("%s %s %s", c.Change, c.What, c.Value))
	}
	out := strings.Join(parts, ", ")
	if len(cs) > shown {
		out += fmt.Sprintf(" and %d more", len(cs)-shown)
	}
	return out
}

// diffSide is one side of a diff as the command loads it, with what
// loading it printed and returned.
type diffSide struct {
	*pipeline.Side
	stderr bytes.Buffer
	code   int
	ok     bool
}

// diffSides are the command's sides of the pipeline's.
func diffSides(ps []*pipeline.Side) []*diffSide {
	sides := make([]*diffSide, len(ps))
	for i, p := range ps {
		sides[i] = &diffSide{Side: p}
	}
	return sides
}

// render loads, checks and renders the side as 'keyhole render' does,
// printing its diagnostics to stderr; ok is false, with the exit code,
// when it cannot be compared. A render with no sandboxes is an empty
// side, not an error: a PR may add the first sandbox or remove the last.
func (s *diffSide) render(e *env, wd string, f *checkFlags, diagFormat string, opts render.Options, renderer render.Renderer, r *pipeline.Reuse) (int, bool) {
	if err := s.Check(wd, f.options(e, s.Paths), r); err != nil {
		return fail(e, "diff", err), false
	}
	err := s.Render(opts, renderer, r)
	c := s.Checked
	// A sandbox above the ceiling is an error of check's, but what diff
	// reports is the access itself, weighed against the ceiling: it
	// compares such a side.
	hasErrors := pipeline.BlockingErrors(c.Result.Diagnostics, false)
	if shown(c.Result.Diagnostics, diagFormat, f.print.verbose) && (s.Which == "head" || hasErrors) {
		if err := report(&env{stdout: e.stderr, stderr: e.stderr, rawStdout: e.rawErr()}, c, diagFormat, f.print); err != nil {
			return fail(e, "diff", err), false
		}
		if !hasErrors {
			if pipeline.BlockingErrors(c.Result.Diagnostics, true) {
				// Only the ceiling's errors: check and render would
				// refuse this side, but diff compares it and says
				// where it stands against the ceiling.
				fmt.Fprintf(e.stderr, "keyhole diff: the diagnostics above are %s's, %s: its access is above keyhole.yaml's ceiling, which check refuses; it is compared all the same, and the comparison says which requests break the ceiling\n", s.Which, s.Ref)
			} else {
				fmt.Fprintf(e.stderr, "keyhole diff: the diagnostics above are %s's, %s\n", s.Which, s.Ref)
			}
		}
	}
	if hasErrors {
		fmt.Fprintf(e.stderr, "keyhole diff: %s %s: the check found errors; nothing compared\n", s.Which, s.Ref)
		return exitUsage, false
	}
	if err != nil {
		return fail(e, "diff", err), false
	}
	return exitOK, true
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
