// Package diag owns keyhole's diagnostics: the values every check produces
// and the printers that turn a list of them into text, JSON, GitHub workflow
// commands or SARIF. Creating a diagnostic and printing it are separate:
// library packages return diagnostics, and only the CLI prints them, once.
package diag

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Severity orders how much a diagnostic matters. Only Error fails a check.
type Severity int

// The severities, least to most severe.
const (
	Info Severity = iota
	Warning
	Error
)

var severityNames = [...]string{Info: "info", Warning: "warning", Error: "error"}

// String returns the lower-case name used in every output format.
func (s Severity) String() string {
	if s < Info || s > Error {
		return fmt.Sprintf("severity(%d)", int(s))
	}
	return severityNames[s]
}

// ParseSeverity is the inverse of String.
func ParseSeverity(s string) (Severity, error) {
	for i, n := range severityNames {
		if n == s {
			return Severity(i), nil
		}
	}
	return 0, fmt.Errorf("unknown severity %q (want info, warning or error)", s)
}

// Pos is a position in an input file. Line and Column are 1-based; zero
// means unknown. File is slash-separated and relative to the working
// directory where the input was named that way; "-" is standard input.
type Pos struct {
	File   string
	Line   int
	Column int
}

// String renders the position as file:line:col, dropping unknown parts.
//
// The file name is written with its control characters escaped (see
// EscapeControl): a name holding a line break must not start a line of
// its own in a log, where a CI runner reads "::error ..." as a command.
func (p Pos) String() string {
	file := EscapeControl(p.File)
	switch {
	case p.Line == 0:
		return file
	case p.Column == 0:
		return fmt.Sprintf("%s:%d", file, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", file, p.Line, p.Column)
}

// EscapeControl writes s with its control characters, line and paragraph
// separators and bidirectional overrides escaped as Go writes them in a
// quoted string (\n, \x1b, \u202e), so that text printed from it stays on
// its line and reads as it is. Other text is unchanged.
func EscapeControl(s string) string { return escapeRunes(s, unsafeRune) }

// escapeRunes escapes, as EscapeControl does, the runes of s that unsafe
// reports.
func escapeRunes(s string, unsafe func(rune) bool) string {
	if strings.IndexFunc(s, unsafe) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !unsafe(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r)
		if q == "'"+string(r)+"'" { // QuoteRune kept it: write it as a code point
			q = fmt.Sprintf("'\\u%04x'", r)
		}
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// unsafeRune reports whether r changes how the text around it reads on a
// terminal or in a log: a control character, a line or paragraph
// separator, or a bidirectional embedding, override or isolate.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || r == 0x2028 || r == 0x2029 || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// Compare orders positions by file, line, then column.
func (p Pos) Compare(q Pos) int {
	return cmp.Or(strings.Compare(p.File, q.File), cmp.Compare(p.Line, q.Line), cmp.Compare(p.Column, q.Column))
}

// Object identifies the Kubernetes object (or agent.yaml) a diagnostic is about.
type Object struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
}

// String renders the object as Kind/namespace/name.
func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// Diagnostic is one finding. Code is stable across releases and is what
// users suppress and search for; Message says what is wrong, where and how
// to fix it, and never holds a secret value.
type Diagnostic struct {
	Code     string
	Severity Severity
	Pos      Pos
	Object   Object
	// Path is the field path inside the object, e.g.
	// spec.placement.inject[0].value.
	Path    string
	Message string
	// Suppressed names what silenced the diagnostic ("annotation" or
	// "config"); suppressed diagnostics are reported only in JSON and
	// never count towards the exit code.
	Suppressed string
	// Units names the deploy units the finding was made in, sorted: the
	// kustomization roots whose builds hold it ("apps/production"), or ""
	// for the files read outside any kustomization. Empty when unknown.
	Units []string
}

// String renders the diagnostic in the text format:
// file:line:col: severity CODE: message.
func (d Diagnostic) String() string {
	return fmt.Sprintf("%s: %s %s: %s", d.Pos, d.Severity, d.Code, d.Message)
}

// List is a list of diagnostics. A non-empty List is an error.
type List []Diagnostic

// Error joins the diagnostics one per line.
func (l List) Error() string {
	var b strings.Builder
	for i, d := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// Sort orders the list by position, then code, then message, so that
// output is the same on every run and every machine.
func (l List) Sort() {
	slices.SortStableFunc(l, func(a, b Diagnostic) int {
		return cmp.Or(a.Pos.Compare(b.Pos), strings.Compare(a.Code, b.Code), strings.Compare(a.Message, b.Message))
	})
}

// Count returns how many unsuppressed diagnostics have severity s.
func (l List) Count(s Severity) int {
	n := 0
	for _, d := range l {
		if d.Severity == s && d.Suppressed == "" {
			n++
		}
	}
	return n
}

// HasErrors reports whether any unsuppressed diagnostic is an error.
func (l List) HasErrors() bool { return l.Count(Error) > 0 }

// SeverityOf is the severity rules give code; Error for a code they do
// not describe.
func SeverityOf(rules []Rule, code string) Severity {
	for _, r := range rules {
		if r.Code == code {
			return r.Severity
		}
	}
	return Error
}

// Rule describes a diagnostic code for SARIF and the generated docs.
type Rule struct {
	Code     string
	Severity Severity
	// Purpose is one sentence: what the check catches.
	Purpose string
	// Help says how to fix it.
	Help string
}
