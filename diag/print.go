package diag

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Summary is what was checked, for the closing line of the text-like
// formats and the summary of the json format.
type Summary struct {
	Documents, Objects int
	// Skipped counts what the check left alone as not keyhole's business.
	Skipped Skipped
	// Units names the deploy units checked, sorted; "" is the files read
	// outside any kustomization.
	Units []string
	// Built says, for each unit checked, in the order of Units, what
	// declared it and how many documents it holds: the coverage a reader
	// of a green run needs to trust it.
	Built []BuiltUnit
}

// BuiltUnit is one deploy unit checked.
type BuiltUnit struct {
	Name string `json:"name"`
	// Source is what declared it: flux, kustomization or loose.
	Source    string `json:"source"`
	Documents int    `json:"documents"`
}

// unitsLine says how many deploy units were checked and from what, and
// how many were not read: "3 deploy units checked: 2 Flux
// Kustomizations, 1 kustomization root; 1 not read, each said in a
// warning"; empty when the only unit is the loose files (nothing was
// built) and every unit was read.
func unitsLine(sum Summary) string {
	line := builtLine(sum)
	if n := sum.Skipped.Units; n > 0 {
		switch {
		case line != "":
		case len(sum.Built) > 0:
			line = plural(len(sum.Built), "deploy unit") + " checked: the loose files"
		default:
			line = "0 deploy units checked"
		}
		line += fmt.Sprintf("; %d not read, each said in a warning", n)
	}
	return line
}

// builtLine is unitsLine's count of the units checked.
func builtLine(sum Summary) string {
	bySource := map[string]int{}
	for _, u := range sum.Built {
		bySource[u.Source]++
	}
	if len(sum.Built) == 0 || len(bySource) == 1 && bySource["loose"] > 0 {
		return ""
	}
	var parts []string
	for _, s := range []struct{ source, one, many string }{
		{"flux", "Flux Kustomization", "Flux Kustomizations"},
		{"argocd", "Argo CD Application source", "Argo CD Application sources"},
		{"kustomization", "kustomization root", "kustomization roots"},
		{"helmrelease", "Flux HelmRelease", "Flux HelmReleases"},
		{"helm", "Helm chart", "Helm charts"},
	} {
		if n := bySource[s.source]; n == 1 {
			parts = append(parts, "1 "+s.one)
		} else if n > 1 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s.many))
		}
	}
	if bySource["loose"] > 0 {
		parts = append(parts, "the loose files")
	}
	return plural(len(sum.Built), "deploy unit") + " checked: " + strings.Join(parts, ", ")
}

// Skipped counts the inputs a check skipped, from its diagnostics.
type Skipped struct {
	// Objects of kinds keyhole does not check, and how many kinds.
	Objects int `json:"objects"`
	Kinds   int `json:"kinds"`
	// Files (and Helm charts, and kustomizations) not read as objects.
	Files int `json:"files"`
	// Notes is how many info diagnostics say what was skipped: the text
	// format shows them only with -v, and counts them here instead.
	Notes int `json:"-"`
	// Units counts the deploy units an engine applies that keyhole does
	// not read (a Flux Kustomization building from a source keyhole.yaml
	// does not map), each said by a warning.
	Units int `json:"units,omitempty"`
}

// Printer writes a list of diagnostics in one output format. Printers sort
// a copy of the list, so the same diagnostics give the same bytes in
// whatever order they were found.
type Printer interface {
	// Print writes ds to w. rules describes the codes by name, for formats
	// that carry rule metadata (SARIF); codes missing from it are still
	// printed.
	Print(w io.Writer, ds List, sum Summary, rules map[string]Rule) error
}

// printers is the name → constructor table behind NewPrinter and Formats;
// a function rather than a package variable so that nothing can change it.
func printers() map[string]func(Options) Printer {
	return map[string]func(Options) Printer{
		"text":   func(o Options) Printer { return filtered{textPrinter{verbose: o.Verbose, o: o}, o.MinSeverity} },
		"json":   func(o Options) Printer { return filtered{jsonPrinter{}, o.MinSeverity} },
		"github": func(o Options) Printer { return githubPrinter{o} },
		"sarif":  func(o Options) Printer { return sarifPrinter{o} },
		"junit":  func(o Options) Printer { return junitPrinter{o} },
		"gitlab": func(o Options) Printer { return gitlabPrinter{o} },
	}
}

// Formats lists the valid --format names, sorted.
func Formats() []string {
	var names []string
	for n := range printers() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// NewPrinter returns the printer for a --format name with the zero
// Options; an unknown name is an error that lists the valid ones.
func NewPrinter(format string) (Printer, error) {
	return NewPrinterWith(format, Options{})
}

// NewPrinterWith is NewPrinter with Options.
func NewPrinterWith(format string, o Options) (Printer, error) {
	if p, ok := printers()[format]; ok {
		return p(o), nil
	}
	return nil, fmt.Errorf("unknown format %q (valid formats: %s)", format, strings.Join(Formats(), ", "))
}

// CountsSuppressed reports whether format, with o, prints of the
// suppressed diagnostics only how many there are (text without Verbose,
// github), so that a caller can drop their messages before printing;
// false for the formats that list them, and for an unknown one.
func CountsSuppressed(format string, o Options) bool {
	switch format {
	case "text":
		return !o.Verbose
	case "github", "junit", "gitlab":
		// The CI reports leave suppressed findings out altogether.
		return true
	}
	return false
}

// sorted returns a sorted copy of ds, leaving the caller's list alone.
func sorted(ds List) List {
	c := slices.Clone(ds)
	c.Sort()
	return c
}

// SummaryLine is the closing line of the text and github formats, e.g.
// "3 documents, 2 objects checked: 1 error, 0 warnings, 1 info".
// Suppressed diagnostics are not counted, only mentioned.
func SummaryLine(ds List, sum Summary) string {
	suppressed := 0
	for _, d := range ds {
		if d.Suppressed != "" {
			suppressed++
		}
	}
	s := fmt.Sprintf("%s, %s checked: %s, %s, %d info",
		plural(sum.Documents, "document"), plural(sum.Objects, "object"),
		plural(ds.Count(Error), "error"), plural(ds.Count(Warning), "warning"), ds.Count(Info))
	if suppressed > 0 {
		s += fmt.Sprintf(" (%d suppressed)", suppressed)
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// safely runs print with a writer that makes every line it writes safe
// for a CI log (see LogWriter), then writes the last line out.
func safely(w io.Writer, print func(io.Writer) error) error {
	lw := NewLogWriter(w)
	err := print(lw)
	if ferr := lw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// errWriter remembers the first write error so that a printer can write
// line after line and check once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
