package diff

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/policy"
)

// ErrUnknownFormat is returned for a report format no writer has.
var ErrUnknownFormat = errors.New("unknown diff format")

// Format names.
const (
	FormatText     = "text"
	FormatMarkdown = "markdown"
	FormatJSON     = "json"
)

// writers is the table of report formats.
func writers() map[string]func(io.Writer, Result) error {
	return map[string]func(io.Writer, Result) error{
		FormatText:     writeText,
		FormatMarkdown: writeMarkdown,
		FormatJSON:     writeJSON,
	}
}

// Formats lists the report formats, sorted.
func Formats() []string {
	var out []string
	for name := range writers() {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Write prints r in format (see Formats). The output depends on r alone:
// the same result gives the same bytes.
func Write(w io.Writer, format string, r Result) error {
	f, ok := writers()[format]
	if !ok {
		return fmt.Errorf("%w %q: want one of %s", ErrUnknownFormat, format, strings.Join(Formats(), ", "))
	}
	// Names and values in the report are the repository's: no line of it
	// may read as a CI runner's command, whatever they are.
	lw := diag.NewLogWriter(w)
	if err := f(lw, r); err != nil {
		return err
	}
	return lw.Flush()
}

// JSONVersion is the version of the JSON report's schema (docs/diff.md);
// a change that breaks a reader gets a new one.
const JSONVersion = "keyhole.dev/diff/v1"

// jsonReport is the JSON report: its own type, so the schema is written
// down once and Result can change without changing it unnoticed.
type jsonReport struct {
	Version string      `json:"version"`
	Base    Ref         `json:"base"`
	Head    Ref         `json:"head"`
	Changed bool        `json:"changed"`
	Summary jsonSummary `json:"summary"`
	// Access counts the sandboxes of Sandboxes by verdict.
	Access    AccessCounts    `json:"access"`
	Sandboxes []SandboxChange `json:"sandboxes"`
	Resources []Resource      `json:"resources"`
	// Gate are the changes to the gate itself.
	Gate []GateChange `json:"gate"`
}

type jsonSummary struct {
	Added   int         `json:"added"`
	Removed int         `json:"removed"`
	Changed int         `json:"changed"`
	Kinds   []KindCount `json:"kinds"`
}

func writeJSON(w io.Writer, r Result) error {
	rep := jsonReport{
		Version: JSONVersion, Base: r.Base, Head: r.Head, Changed: r.Changed(),
		Summary:   jsonSummary{Added: r.Count(Added), Removed: r.Count(Removed), Changed: r.Count(Changed), Kinds: nonNil(r.Kinds)},
		Access:    accessCounts(r),
		Sandboxes: nonNil(r.Sandboxes), Resources: nonNil(r.Resources), Gate: nonNil(r.Gate),
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(rep)
}

// nonNil makes an empty list print as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// headline is the one-line summary both text and markdown start with:
// the access verdicts first, then the resources.
func headline(r Result) string {
	if !r.Changed() {
		return fmt.Sprintf("no changes between %s and %s", r.Base, r.Head)
	}
	return fmt.Sprintf("%s → %s: %s", r.Base, r.Head, counts(r))
}

// counts summarises the access verdicts and the resources that changed.
func counts(r Result) string {
	noun := "resources"
	if r.Count(Changed) == 1 {
		noun = "resource"
	}
	s := fmt.Sprintf("%d %s changed, %d added, %d removed", r.Count(Changed), noun, r.Count(Added), r.Count(Removed))
	if a := accessSummary(r); a != "" {
		s = a + "; " + s
	}
	if g := gateSummary(r); g != "" {
		s = g + "; " + s
	}
	return s
}

// accessSummary says how many sandboxes got each verdict, what most needs
// review first: "access widened for 2 sandboxes, narrowed for 1".
func accessSummary(r Result) string {
	var parts []string
	counts := r.Verdicts()
	for _, v := range Verdicts() {
		n := counts[v]
		if n == 0 {
			continue
		}
		p := fmt.Sprintf("%s for %d", v, n)
		if len(parts) == 0 {
			p = "access " + p + " " + plural(n, "sandbox", "sandboxes")
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// policyLines describes a sandbox's change as lines of text, each with a
// marker: + gained, - lost, ~ changed.
func policyLines(s SandboxChange) []string {
	var out []string
	for _, h := range s.Hosts {
		switch h.Change {
		case Added:
			out = append(out, fmt.Sprintf("+ host %s (%s)", h.Host, h.HeadInject))
		case Removed:
			out = append(out, fmt.Sprintf("- host %s (%s)", h.Host, h.BaseInject))
		default:
			if h.BaseInject != "" {
				out = append(out, fmt.Sprintf("~ host %s injection: %s → %s", h.Host, h.BaseInject, h.HeadInject))
			}
		}
		for _, rule := range h.RulesRemoved {
			if h.Change != Removed {
				out = append(out, fmt.Sprintf("- rule on %s: %s", h.Host, rule))
			}
		}
		for _, rule := range h.RulesAdded {
			out = append(out, fmt.Sprintf("+ rule on %s: %s", h.Host, rule))
		}
	}
	for _, p := range s.PassthroughRemoved {
		out = append(out, "- passthrough host "+p)
	}
	for _, p := range s.PassthroughAdded {
		out = append(out, "+ passthrough host "+p+" (tunnelled, no rules)")
	}
	for _, h := range s.InternalRemoved {
		out = append(out, "- internal addresses for host "+h)
	}
	for _, h := range s.InternalAdded {
		out = append(out, "+ internal addresses for host "+h+" (metadata, loopback and private ranges dialled)")
	}
	for _, e := range s.EnvRemoved {
		out = append(out, "- env "+e)
	}
	for _, e := range s.EnvAdded {
		out = append(out, "+ env "+e)
	}
	if s.BaseImage != s.HeadImage {
		out = append(out, fmt.Sprintf("~ image %s → %s", s.BaseImage, s.HeadImage))
	}
	return out
}

// witnessLine says what became of one request: "METHOD URL: before;
// now", naming the rule that allows it on the side that does.
func witnessLine(w Witness, widened bool) string {
	before, now := w.Base.String(), w.Head.String()
	if w.Rule != "" {
		if widened {
			now += ", by rule " + w.Rule
		} else {
			before += ", by rule " + w.Rule
		}
	}
	return fmt.Sprintf("%s: before %s; now %s", w.Request(), before, now)
}

// group is the sandboxes that share one change, said once.
type group struct {
	verdict   Verdict
	sandboxes []SandboxChange
}

func (g group) first() SandboxChange { return g.sandboxes[0] }

// groups gathers the sandboxes whose changes read the same (verdict,
// witnesses, what changed), most in need of review first: by verdict,
// then the largest group, then by name.
func groups(r Result) []group {
	index := map[string]int{}
	var out []group
	for _, s := range r.Sandboxes {
		var k strings.Builder
		fmt.Fprintf(&k, "%s\x00%s\x00%s\x00", s.Verdict, s.Change, s.Undecided)
		for _, w := range s.Widened {
			k.WriteString(witnessLine(w, true) + "\x00")
		}
		k.WriteString("\x01")
		for _, w := range s.Narrowed {
			k.WriteString(witnessLine(w, false) + "\x00")
		}
		k.WriteString("\x01")
		for _, l := range policyLines(s) {
			k.WriteString(l + "\x00")
		}
		k.WriteString("\x01" + s.Ceiling + "\x00")
		for _, c := range s.AboveCeiling {
			k.WriteString(c.line() + "\x00")
		}
		if i, ok := index[k.String()]; ok {
			out[i].sandboxes = append(out[i].sandboxes, s)
			continue
		}
		index[k.String()] = len(out)
		out = append(out, group{verdict: s.Verdict, sandboxes: []SandboxChange{s}})
	}
	slices.SortStableFunc(out, func(a, b group) int {
		return cmp.Or(cmp.Compare(a.verdict.rank(), b.verdict.rank()), cmp.Compare(len(b.sandboxes), len(a.sandboxes)))
	})
	return out
}

// groupTitle names a group's sandboxes and what became of them, for text.
func groupTitle(g group) string {
	names := make([]string, len(g.sandboxes))
	for i, s := range g.sandboxes {
		names[i] = s.ID()
	}
	title := strings.Join(names, ", ")
	if len(names) > 1 {
		title += fmt.Sprintf(" (%d sandboxes, the same change)", len(names))
	}
	if c := g.first().Change; c != Changed {
		title += fmt.Sprintf(" (%s)", c)
	}
	return title
}

func writeText(w io.Writer, r Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "keyhole diff: %s\n", diag.EscapeControl(headline(r)))
	if !r.Changed() {
		_, err := io.WriteString(w, b.String())
		return err
	}
	gateText(&b, r)
	if len(r.Sandboxes) > 0 {
		b.WriteString("\nAccess, as the proxy decides each request on both sides:\n")
		for _, g := range groups(r) {
			fmt.Fprintf(&b, "  %s: %s\n", g.verdict, diag.EscapeControl(groupTitle(g)))
			accessText(&b, g.first(), "    ")
		}
	}
	if len(r.Resources) == 0 {
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("\nResources:\n")
	width := len("kind")
	for _, k := range r.Kinds {
		width = max(width, len(k.Kind))
	}
	fmt.Fprintf(&b, "  %-*s  added  removed  changed\n", width, "kind")
	for _, k := range r.Kinds {
		fmt.Fprintf(&b, "  %-*s  %5d  %7d  %7d\n", width, diag.EscapeControl(k.Kind), k.Added, k.Removed, k.Changed)
	}
	for _, res := range r.Resources {
		fmt.Fprintf(&b, "\n%s %s", res.Change, diag.EscapeControl(res.ID()))
		if res.Name != "" {
			fmt.Fprintf(&b, " (%s)", diag.EscapeControl(pathNote(res)))
		} else if res.BasePath != "" && res.HeadPath != "" && res.BasePath != res.HeadPath {
			fmt.Fprintf(&b, " (%s)", diag.EscapeControl(pathNote(res)))
		}
		fmt.Fprintf(&b, " +%d -%d\n", res.LinesAdded, res.LinesRemoved)
		if res.SameAs != "" {
			fmt.Fprintf(&b, "  the same change as %s\n", diag.EscapeControl(res.SameAs))
			continue
		}
		b.WriteString(diffLines(res.Diff))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// accessText writes a sandbox's witnesses and what changed, each line
// indented.
func accessText(b *strings.Builder, s SandboxChange, indent string) {
	if s.Undecided != "" {
		fmt.Fprintf(b, "%scannot decide: %s\n", indent, diag.EscapeControl(s.Undecided))
	}
	if len(s.Widened) > 0 {
		fmt.Fprintf(b, "%snewly allowed:\n", indent)
		for _, wi := range s.Widened {
			fmt.Fprintf(b, "%s  %s\n", indent, diag.EscapeControl(witnessLine(wi, true)))
		}
	}
	if len(s.Narrowed) > 0 {
		fmt.Fprintf(b, "%snewly refused:\n", indent)
		for _, wi := range s.Narrowed {
			fmt.Fprintf(b, "%s  %s\n", indent, diag.EscapeControl(witnessLine(wi, false)))
		}
	}
	switch s.Ceiling {
	case CeilingUnder:
		fmt.Fprintf(b, "%sceiling: under: the head allows nothing keyhole.yaml's ceiling forbids\n", indent)
	case CeilingUnproven:
		fmt.Fprintf(b, "%sceiling: unproven: the head's rules exceed the comparison's bounds\n", indent)
	case CeilingAbove:
		fmt.Fprintf(b, "%sceiling: ABOVE: the head allows what keyhole.yaml's ceiling forbids:\n", indent)
		for _, c := range s.AboveCeiling {
			fmt.Fprintf(b, "%s  %s\n", indent, diag.EscapeControl(c.line()))
		}
	}
	if lines := policyLines(s); len(lines) > 0 {
		fmt.Fprintf(b, "%swhat changed:\n", indent)
		for _, l := range lines {
			fmt.Fprintf(b, "%s  %s\n", indent, diag.EscapeControl(l))
		}
	}
}

// WriteSandbox writes one sandbox's access verdict, its witnesses and
// what changed in its policy, as the text report gives them; for
// `keyhole explain --base`. s is the sandbox's entry in a Result's
// Sandboxes, or a zero SandboxChange with its name for a sandbox whose
// policy did not change.
func WriteSandbox(w io.Writer, base, head Ref, s SandboxChange) error {
	var b strings.Builder
	v := s.Verdict
	if v == "" {
		v = VerdictUnchanged
	}
	fmt.Fprintf(&b, "sandbox %s: access %s, %s → %s", diag.EscapeControl(s.ID()), v, diag.EscapeControl(base.String()), diag.EscapeControl(head.String()))
	if s.Change == Added || s.Change == Removed {
		fmt.Fprintf(&b, " (the sandbox is %s)", s.Change)
	}
	b.WriteString("\n")
	if s.Change == "" {
		b.WriteString("  its proxy config, placeholders and image are the same on both sides\n")
	}
	accessText(&b, s, "  ")
	_, err := io.WriteString(w, diag.SafeLines(b.String()))
	return err
}

// diffLines is a unified diff as a report shows it: line by line, each
// line's control characters but its tabs escaped (a rendered file's
// text is the repository's), so a line stays one line and a terminal
// shows it as it is.
func diffLines(d string) string {
	lines := strings.SplitAfter(d, "\n")
	for i, l := range lines {
		body, nl := strings.CutSuffix(l, "\n")
		parts := strings.Split(body, "\t")
		for j := range parts {
			parts[j] = diag.EscapeControl(parts[j])
		}
		body = strings.Join(parts, "\t")
		if nl {
			body += "\n"
		}
		lines[i] = body
	}
	return strings.Join(lines, "")
}

// pathNote is the resource's path, or both when it moved.
func pathNote(res Resource) string {
	if res.BasePath != "" && res.HeadPath != "" && res.BasePath != res.HeadPath {
		return res.BasePath + " → " + res.HeadPath
	}
	return res.Path()
}

// The markdown report is a pull request comment, which GitHub limits to
// 65536 characters; it never exceeds MarkdownLimit bytes, which leaves
// room for a marker the workflow puts before it. What reviewers need most
// comes first: the verdict counts, always; then the sandboxes, grouped,
// most in need of review first, each group in full while the report is
// under MarkdownAccessBudget and by its names alone after that; then the
// resources, each diff whole while the report is under MarkdownDiffBudget
// and its summary line alone after that. Whatever does not fit is
// counted in a last line.
const (
	MarkdownAccessBudget = 40000
	MarkdownDiffBudget   = 50000
	MarkdownLimit        = 60000
)

// Bounds on one group of sandboxes in the markdown report.
const (
	mdNames     = 5   // sandbox names given before "and N more"
	mdWitnesses = 6   // witnesses of each direction
	mdLines     = 12  // lines of what changed
	mdLineBytes = 400 // one line's text, cut past it
	mdReserve   = 800 // room kept for the lines that count what was left out
)

const (
	compactNote   = "\nThe sandboxes below are shown by their first witnesses, to keep this comment under GitHub's size limit: run `keyhole diff` (text or json), or `keyhole explain --base REF --sandbox NAME`, for all of them.\n\n"
	omitted       = "Diff omitted to keep this comment under GitHub's size limit: run `keyhole diff` (text or json) for it.\n"
	andMore       = "\n…and %d more resources: run `keyhole diff` (text or json) for them.\n"
	groupsOmitted = "\n…and %d more %s (%s) left out to keep this comment under GitHub's size limit: run `keyhole diff` (text or json) for them.\n"
)

// mdWriter builds the markdown report within MarkdownLimit.
type mdWriter struct{ b strings.Builder }

// add appends s when the report then keeps room for the closing counts
// under MarkdownLimit and stays within budget; it reports whether it did.
func (w *mdWriter) add(s string, budget int) bool {
	if w.b.Len()+len(s) > min(budget, MarkdownLimit-mdReserve) {
		return false
	}
	w.b.WriteString(s)
	return true
}

func writeMarkdown(w io.Writer, r Result) error {
	var m mdWriter
	m.b.WriteString("### keyhole diff\n\n")
	base, head := mdCode(clipText(r.Base.String(), 200)), mdCode(clipText(r.Head.String(), 200))
	if !r.Changed() {
		fmt.Fprintf(&m.b, "No changes between %s and %s.\n", base, head)
		_, err := io.WriteString(w, m.b.String())
		return err
	}
	fmt.Fprintf(&m.b, "%s → %s: **%s**.\n", base, head, counts(r))
	gateMarkdown(&m.b, r)
	if len(r.Sandboxes) > 0 {
		m.b.WriteString("\n| access | sandboxes |\n| --- | ---: |\n")
		for _, v := range Verdicts() {
			if n := r.Verdicts()[v]; n > 0 {
				fmt.Fprintf(&m.b, "| %s | %d |\n", mdVerdict(v), n)
			}
		}
		m.b.WriteString("\n#### Access\n\nEach request below was decided by the proxy's own decision function on both sides.\n\n")
		gs := groups(r)
		full := true
		for i, g := range gs {
			if full && m.add(mdGroup(g, true), MarkdownAccessBudget) {
				continue
			}
			if full {
				// From here on, every group on one line: none of a
				// later verdict gets more room than an earlier one.
				full = false
				m.add(compactNote, MarkdownLimit)
			}
			if m.add(mdGroup(g, false), MarkdownLimit) {
				continue
			}
			left := map[Verdict]int{}
			n := 0
			for _, g := range gs[i:] {
				left[g.verdict] += len(g.sandboxes)
				n += len(g.sandboxes)
			}
			var parts []string
			for _, v := range Verdicts() {
				if left[v] > 0 {
					parts = append(parts, fmt.Sprintf("%d %s", left[v], v))
				}
			}
			fmt.Fprintf(&m.b, groupsOmitted, n, plural(n, "sandbox", "sandboxes"), strings.Join(parts, ", "))
			_, err := io.WriteString(w, m.b.String())
			return err
		}
	}
	if len(r.Resources) == 0 {
		_, err := io.WriteString(w, m.b.String())
		return err
	}
	if !m.add("\n#### Resources\n\n| kind | added | removed | changed |\n| --- | ---: | ---: | ---: |\n", MarkdownLimit) {
		fmt.Fprintf(&m.b, andMore, len(r.Resources))
		_, err := io.WriteString(w, m.b.String())
		return err
	}
	for i, k := range r.Kinds {
		if !m.add(fmt.Sprintf("| %s | %d | %d | %d |\n", mdCell(clipText(k.Kind, 200)), k.Added, k.Removed, k.Changed), MarkdownLimit) {
			fmt.Fprintf(&m.b, "\n…and %d more kinds.\n", len(r.Kinds)-i)
			break
		}
	}
	for i, res := range r.Resources {
		what := "<code>" + mdHTML(clipText(pathNote(res), 300)) + "</code>"
		if res.Name != "" {
			what = mdHTML(clipText(res.ID(), 300)) + " " + what
		}
		if res.SameAs != "" {
			if !m.add(fmt.Sprintf("\n%s %s (+%d −%d): the same change as %s.\n", res.Change, what, res.LinesAdded, res.LinesRemoved, mdHTML(clipText(res.SameAs, 300))), MarkdownLimit) {
				fmt.Fprintf(&m.b, andMore, len(r.Resources)-i)
				break
			}
			continue
		}
		head := fmt.Sprintf("\n<details><summary>%s %s (+%d −%d)</summary>\n\n", res.Change, what, res.LinesAdded, res.LinesRemoved)
		fence := strings.Repeat("`", max(3, longestRun(res.Diff, '`')+1))
		block := fmt.Sprintf("%s%sdiff\n%s%s\n\n</details>\n", head, fence, diffLines(res.Diff), fence)
		if m.add(block, MarkdownDiffBudget) || m.add(head+omitted+"\n</details>\n", MarkdownLimit) {
			continue
		}
		fmt.Fprintf(&m.b, andMore, len(r.Resources)-i)
		break
	}
	_, err := io.WriteString(w, m.b.String())
	return err
}

// mdVerdict is a verdict as a PR comment shows it: the ones that need a
// reviewer stand out.
func mdVerdict(v Verdict) string {
	switch v {
	case VerdictWidened, VerdictChanged:
		return ":warning: **" + string(v) + "**"
	case VerdictUndecided:
		return ":warning: **cannot decide**"
	}
	return string(v)
}

// mdGroup writes one group of sandboxes: in full, with bounded lists, or
// by its names alone.
func mdGroup(g group, full bool) string {
	var b strings.Builder
	names := make([]string, 0, mdNames)
	for _, s := range g.sandboxes[:min(len(g.sandboxes), mdNames)] {
		names = append(names, mdCode(clipText(s.ID(), 300)))
	}
	fmt.Fprintf(&b, "- %s: %s", mdVerdict(g.verdict), strings.Join(names, ", "))
	if n := len(g.sandboxes); n > mdNames {
		fmt.Fprintf(&b, " and %d more (%d sandboxes, the same change)", n-mdNames, n)
	} else if n > 1 {
		fmt.Fprintf(&b, " (%d sandboxes, the same change)", n)
	}
	s := g.first()
	if s.Change != Changed {
		fmt.Fprintf(&b, " (%s)", s.Change)
	}
	if !full {
		// One line: the smallest witness of each direction.
		for _, dir := range []struct {
			label string
			ws    []Witness
		}{{"newly allowed", s.Widened}, {"newly refused", s.Narrowed}} {
			if len(dir.ws) > 0 {
				fmt.Fprintf(&b, "; %s %s", dir.label, mdCode(clipText(dir.ws[0].Request(), mdLineBytes)))
				if len(dir.ws) > 1 {
					fmt.Fprintf(&b, " and %d more", len(dir.ws)-1)
				}
			}
		}
		if s.Ceiling != "" {
			fmt.Fprintf(&b, "; ceiling: %s", mdCeiling(s.Ceiling))
		}
		b.WriteString("\n")
		return b.String()
	}
	b.WriteString("\n")
	if s.Ceiling != "" {
		fmt.Fprintf(&b, "  - **ceiling**: %s\n", mdCeiling(s.Ceiling))
		for _, c := range s.AboveCeiling {
			fmt.Fprintf(&b, "    - %s\n", mdCode(clipText(c.line(), mdLineBytes)))
		}
	}
	if s.Undecided != "" {
		fmt.Fprintf(&b, "  - **cannot decide**: %s\n", mdCode(clipText(s.Undecided, mdLineBytes)))
	}
	for _, dir := range []struct {
		label   string
		ws      []Witness
		widened bool
	}{{"newly allowed", s.Widened, true}, {"newly refused", s.Narrowed, false}} {
		for i, wi := range dir.ws {
			if i == mdWitnesses {
				fmt.Fprintf(&b, "  - …and %d more %s\n", len(dir.ws)-i, dir.label)
				break
			}
			before, now := mdOutcome(wi.Base), mdOutcome(wi.Head)
			if wi.Rule != "" {
				rule := " by rule " + mdCode(clipText(wi.Rule, mdLineBytes))
				if dir.widened {
					now += rule
				} else {
					before += rule
				}
			}
			fmt.Fprintf(&b, "  - **%s** %s: before %s; now %s\n", dir.label, mdCode(clipText(wi.Request(), mdLineBytes)), before, now)
		}
	}
	lines := policyLines(s)
	if len(lines) > 0 {
		b.WriteString("  - what changed:\n")
	}
	for i, l := range lines {
		if i == mdLines {
			fmt.Fprintf(&b, "    - …and %d more changes\n", len(lines)-i)
			break
		}
		fmt.Fprintf(&b, "    - %s %s\n", mdMarker(l[:1]), mdCode(clipText(l[2:], mdLineBytes)))
	}
	return b.String()
}

// mdOutcome is Outcome.String with the credential as code.
func mdOutcome(o Outcome) string {
	if o.Action == policy.ActionInject {
		return "allowed with " + mdCode(clipText(o.Credential, mdLineBytes))
	}
	return o.String()
}

// clipText cuts s to at most n bytes, on a character boundary, marking
// the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// mdMarker turns a policy line's marker into a word a reader of a PR
// comment sees at a glance.
func mdMarker(m string) string {
	switch m {
	case "+":
		return "**added**"
	case "-":
		return "**removed**"
	}
	return "**changed**"
}

// mdCode is s as inline code, with a fence longer than any run of
// backticks in s, and its line breaks and other control characters
// escaped, so that it cannot end the span's paragraph or list item: in a
// code span nothing else of markdown (a mention, an image, HTML) is read.
func mdCode(s string) string {
	s = diag.EscapeControl(s)
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// mdCell is s as the text of a table cell (see mdHTML).
func mdCell(s string) string { return mdHTML(s) }

// mdHTML is s as text in markdown or in an HTML element of it (a table
// cell, a <summary>, <code>): on one line, its control characters
// escaped, and each character markdown or GitHub would read (HTML, a
// link or image, emphasis, a table's '|', a backtick, an @-mention or
// #-reference, an escape) written as a character reference, which every
// renderer shows as the character itself.
func mdHTML(s string) string {
	return strings.NewReplacer(
		"&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;",
		"@", "&#64;", "#", "&#35;", "[", "&#91;", "]", "&#93;", "!", "&#33;",
		"*", "&#42;", "_", "&#95;", "`", "&#96;", "|", "&#124;", `\`, "&#92;",
		"~", "&#126;", ":", "&#58;",
	).Replace(diag.EscapeControl(s))
}

func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

// line is the request above the ceiling and the limit it breaks.
func (c CeilingWitness) line() string {
	req := c.Method + " " + c.URL
	if c.Body != "" {
		req += " " + c.Body
	}
	return req + ", above: " + c.Limit
}

// mdCeiling says a ceiling verdict in markdown: above it in bold.
func mdCeiling(v string) string {
	switch v {
	case CeilingAbove:
		return "**above** keyhole.yaml's ceiling"
	case CeilingUnder:
		return "under keyhole.yaml's ceiling"
	}
	return "not proven under keyhole.yaml's ceiling"
}
