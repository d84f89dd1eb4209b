package diag

import (
	"io"
	"path"
	"strings"
)

// Options tune a printer beyond its format. The zero value prints every
// diagnostic with its file as given, which is what the text and json
// formats want; the CLI fills the rest for sarif and github.
type Options struct {
	// Verbose lists, in the text format, the info diagnostics (what was
	// skipped, what could not be checked) and the suppressed ones, which
	// it otherwise only counts.
	Verbose bool
	// MinSeverity leaves out diagnostics below it (the zero value, Info,
	// keeps all). The summary line still counts them.
	MinSeverity Severity
	// WorkDir is the absolute directory that relative Pos.File are
	// relative to, and Root the repository root that SARIF URIs are made
	// relative to (its %SRCROOT%); both slash-separated. With either
	// empty, SARIF URIs are the files as given.
	WorkDir, Root string
	// Source returns the content of a file by its Pos.File, for the end of
	// a SARIF region (the end of the line the diagnostic starts on). Nil,
	// or an error, gives a one-character region.
	Source func(file string) ([]byte, error)
	// Version and SemanticVersion name the keyhole that wrote a SARIF log
	// (tool.driver.version and semanticVersion; empty: left out).
	Version, SemanticVersion string
	// HelpURI returns where a code is documented, for SARIF's
	// rules[].helpUri; nil or "" leaves it out.
	HelpURI func(code string) string
	// Category is the SARIF run's category (runAutomationDetails.id is
	// Category + "/"), which keeps code scanning from closing one
	// upload's alerts with another's; empty: "keyhole".
	Category string
	// Color writes the text format with terminal colours: the severity
	// in its colour, the code bold, the position dim. The bytes without
	// it are the same as ever; the CLI sets it only for a terminal.
	Color bool
	// Grouped writes the text format for a person at a terminal (see
	// groupedPrinter): diagnostics under their file's name, each with its
	// source line and where its code is documented.
	Grouped bool
	// Excerpt returns the source line a diagnostic is positioned on, for
	// the grouped layout, and false where no line may be shown (the CLI
	// decides which lines may hold a secret value). Nil shows none.
	Excerpt func(d Diagnostic) (string, bool)
	// Reference returns where a code is documented, for the grouped
	// layout's line under each diagnostic; nil or "" leaves it out.
	Reference func(code string) string
}

// DefaultMinSeverity is the least severe diagnostic a format shows by
// default: warnings and errors for sarif, github, gitlab and junit, whose
// every result becomes an alert, an annotation, a merge request's issue
// or a test's output; everything for the others.
func DefaultMinSeverity(format string) Severity {
	switch format {
	case "sarif", "github", "gitlab", "junit":
		return Warning
	}
	return Info
}

// atLeast returns the diagnostics of ds with severity min or more, and
// how many it left out (suppressed ones are not counted: they are hidden
// anyway).
func atLeast(ds List, min Severity) (List, int) {
	out := make(List, 0, len(ds))
	below := 0
	for _, d := range ds {
		if d.Severity < min {
			if d.Suppressed == "" {
				below++
			}
			continue
		}
		out = append(out, d)
	}
	return out, below
}

// filtered leaves diagnostics below a severity out of a printer that does
// not know about severities itself.
type filtered struct {
	p   Printer
	min Severity
}

func (f filtered) Print(w io.Writer, ds List, sum Summary, rules map[string]Rule) error {
	ds, _ = atLeast(ds, f.min)
	return f.p.Print(w, ds, sum, rules)
}

// repoPath returns file (as a Pos.File) relative to the repository root,
// the form GitHub wants for annotations and SARIF: unchanged without
// WorkDir and Root, or for standard input ("-"); absolute (and so outside
// the repository) when it is not under Root.
func (o Options) repoPath(file string) string {
	if o.WorkDir == "" || o.Root == "" || file == "" || file == "-" {
		return file
	}
	abs := file
	if !path.IsAbs(abs) {
		abs = path.Join(o.WorkDir, file)
	}
	root := path.Clean(o.Root)
	if abs == root {
		return "."
	}
	if rel, ok := strings.CutPrefix(abs, strings.TrimSuffix(root, "/")+"/"); ok {
		return rel
	}
	return abs
}
