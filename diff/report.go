package diff

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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
	return f(w, r)
}

// JSONVersion is the version of the JSON report's schema (docs/diff.md);
// a change that breaks a reader gets a new one.
const JSONVersion = "keyhole.dev/diff/v1"

// jsonReport is the JSON report: its own type, so the schema is written
// down once and Result can change without changing it unnoticed.
type jsonReport struct {
	Version   string          `json:"version"`
	Base      Ref             `json:"base"`
	Head      Ref             `json:"head"`
	Changed   bool            `json:"changed"`
	Summary   jsonSummary     `json:"summary"`
	Sandboxes []SandboxChange `json:"sandboxes"`
	Resources []Resource      `json:"resources"`
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
		Sandboxes: nonNil(r.Sandboxes), Resources: nonNil(r.Resources),
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

// headline is the one-line summary both text and markdown start with.
func headline(r Result) string {
	if !r.Changed() {
		return fmt.Sprintf("no changes between %s and %s", r.Base, r.Head)
	}
	return fmt.Sprintf("%s → %s: %s", r.Base, r.Head, counts(r))
}

// counts summarises the resources and sandboxes that changed.
func counts(r Result) string {
	noun := "resources"
	if r.Count(Changed) == 1 {
		noun = "resource"
	}
	s := fmt.Sprintf("%d %s changed, %d added, %d removed", r.Count(Changed), noun, r.Count(Added), r.Count(Removed))
	switch len(r.Sandboxes) {
	case 0:
		return s
	case 1:
		return s + "; what 1 sandbox may reach changed"
	}
	return fmt.Sprintf("%s; what %d sandboxes may reach changed", s, len(r.Sandboxes))
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

func writeText(w io.Writer, r Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "keyhole diff: %s\n", headline(r))
	if !r.Changed() {
		_, err := io.WriteString(w, b.String())
		return err
	}
	if len(r.Sandboxes) > 0 {
		b.WriteString("\nWhat sandboxes may reach:\n")
		for _, s := range r.Sandboxes {
			fmt.Fprintf(&b, "  sandbox %s: %s\n", s.ID(), s.Change)
			for _, l := range policyLines(s) {
				fmt.Fprintf(&b, "    %s\n", l)
			}
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
		fmt.Fprintf(&b, "  %-*s  %5d  %7d  %7d\n", width, k.Kind, k.Added, k.Removed, k.Changed)
	}
	for _, res := range r.Resources {
		fmt.Fprintf(&b, "\n%s %s", res.Change, res.ID())
		if res.Name != "" {
			fmt.Fprintf(&b, " (%s)", pathNote(res))
		} else if res.BasePath != "" && res.HeadPath != "" && res.BasePath != res.HeadPath {
			fmt.Fprintf(&b, " (%s)", pathNote(res))
		}
		fmt.Fprintf(&b, " +%d -%d\n", res.LinesAdded, res.LinesRemoved)
		b.WriteString(res.Diff)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// pathNote is the resource's path, or both when it moved.
func pathNote(res Resource) string {
	if res.BasePath != "" && res.HeadPath != "" && res.BasePath != res.HeadPath {
		return res.BasePath + " → " + res.HeadPath
	}
	return res.Path()
}

func writeMarkdown(w io.Writer, r Result) error {
	var b strings.Builder
	b.WriteString("### keyhole diff\n\n")
	if !r.Changed() {
		fmt.Fprintf(&b, "No changes between %s and %s.\n", mdCode(r.Base.String()), mdCode(r.Head.String()))
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "%s → %s: **%s**.\n", mdCode(r.Base.String()), mdCode(r.Head.String()), counts(r))
	if len(r.Sandboxes) > 0 {
		b.WriteString("\n#### What sandboxes may reach\n\n")
		for _, s := range r.Sandboxes {
			fmt.Fprintf(&b, "- sandbox %s: %s\n", mdCode(s.ID()), s.Change)
			for _, l := range policyLines(s) {
				fmt.Fprintf(&b, "  - %s %s\n", mdMarker(l[:1]), mdCode(l[2:]))
			}
		}
	}
	if len(r.Resources) == 0 {
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("\n#### Resources\n\n| kind | added | removed | changed |\n| --- | ---: | ---: | ---: |\n")
	for _, k := range r.Kinds {
		fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", mdCell(k.Kind), k.Added, k.Removed, k.Changed)
	}
	for i, res := range r.Resources {
		what := "<code>" + htmlEscape(pathNote(res)) + "</code>"
		if res.Name != "" {
			what = htmlEscape(res.ID()) + " " + what
		}
		head := fmt.Sprintf("\n<details><summary>%s %s (+%d −%d)</summary>\n\n", res.Change, what, res.LinesAdded, res.LinesRemoved)
		fence := strings.Repeat("`", max(3, longestRun(res.Diff, '`')+1))
		block := fmt.Sprintf("%s%sdiff\n%s%s\n\n</details>\n", head, fence, res.Diff, fence)
		switch {
		case b.Len()+len(block) <= MarkdownDiffBudget:
			b.WriteString(block)
		case b.Len()+len(head)+len(omitted) <= MarkdownLimit-len(andMore)-20:
			b.WriteString(head + omitted + "\n</details>\n")
		default:
			fmt.Fprintf(&b, andMore, len(r.Resources)-i)
			_, err := io.WriteString(w, b.String())
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// The markdown report is a pull request comment, which GitHub limits to
// 65536 characters. Diffs are shown whole while the report stays under
// MarkdownDiffBudget bytes; past it each further resource gets its summary
// line alone, and past MarkdownLimit a count of the rest. The summary and
// the per-sandbox changes, which reviewers need most, always come first
// and whole.
const (
	MarkdownDiffBudget = 50000
	MarkdownLimit      = 60000
)

const (
	omitted = "Diff omitted to keep this comment under GitHub's size limit: run `keyhole diff` (text or json) for it.\n"
	andMore = "\n…and %d more resources: run `keyhole diff` (text or json) for them.\n"
)

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
// backticks in s.
func mdCode(s string) string {
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

func mdCell(s string) string { return strings.ReplaceAll(htmlEscape(s), "|", `\|`) }

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
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
