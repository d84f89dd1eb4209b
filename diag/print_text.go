package diag

import (
	"fmt"
	"io"
	"strings"
)

// textPrinter writes file:line:col: severity CODE: message, one per line,
// then a summary line. By default it shows errors and warnings only, and
// one line that counts what it does not show: what was skipped as not
// keyhole's business, and the other info. Verbose shows every diagnostic,
// the suppressed ones marked so.
//
// Options.Color colours each line; Options.Grouped writes the layout of
// groupedPrinter instead.
type textPrinter struct {
	verbose bool
	o       Options
}

func (p textPrinter) Print(w io.Writer, ds List, sum Summary, rules map[string]Rule) error {
	if p.o.Grouped {
		return safely(w, func(w io.Writer) error { return p.printGrouped(w, ds, sum) })
	}
	return safely(w, func(w io.Writer) error { return p.print(w, ds, sum) })
}

// shown reports whether the text format lists d, and the note it adds
// after the message.
func (p textPrinter) shown(d Diagnostic) (bool, string) {
	switch {
	case p.verbose && d.Suppressed != "":
		return true, " (suppressed by " + d.Suppressed + ")"
	case d.Suppressed != "":
		return false, ""
	}
	return p.verbose || d.Severity > Info, ""
}

func (p textPrinter) print(w io.Writer, ds List, sum Summary) error {
	ew := &errWriter{w: w}
	for _, d := range sorted(ds) {
		if ok, note := p.shown(d); ok {
			ew.printf("%s%s\n", p.line(d), note)
		}
	}
	p.closing(ew, ds, sum)
	return ew.err
}

// line is textLine, coloured with Options.Color.
func (p textPrinter) line(d Diagnostic) string {
	if p.o.Color {
		return colorLine(d)
	}
	return textLine(d)
}

// closing writes the lines that end the text format: the deploy units
// checked, what was skipped, and the summary line.
func (p textPrinter) closing(ew *errWriter, ds List, sum Summary) {
	if line := unitsLine(sum); line != "" {
		ew.printf("%s\n", line)
		if p.verbose {
			for _, u := range sum.Built {
				name := u.Name
				if name == "" {
					name = "(loose files)"
				}
				ew.printf("  %s (%s): %s\n", EscapeControl(name), u.Source, plural(u.Documents, "document"))
			}
		}
	}
	if line := skippedLine(ds, sum, p.verbose); line != "" {
		ew.printf("%s\n", line)
	}
	ew.printf("%s\n", SummaryLine(ds, sum))
}

// skippedLine counts what was skipped, and says how to see what the
// default output leaves out: "412 objects of 37 other kinds and 3 files
// skipped, 2 info not shown (-v lists them)". It is empty when there is
// nothing to count.
func skippedLine(ds List, sum Summary, verbose bool) string {
	var parts []string
	sk := sum.Skipped
	if sk.Objects > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s", plural(sk.Objects, "object"), pluralOther(sk.Kinds)))
	}
	if sk.Files > 0 {
		parts = append(parts, plural(sk.Files, "file"))
	}
	line := ""
	if len(parts) > 0 {
		line = strings.Join(parts, " and ") + " skipped"
	}
	if verbose {
		return line
	}
	if more := ds.Count(Info) - sk.Notes; more > 0 {
		if line != "" {
			line += ", "
		}
		line += fmt.Sprintf("%d info not shown", more)
	}
	if line != "" {
		line += " (-v lists them)"
	}
	return line
}

func pluralOther(n int) string {
	if n == 1 {
		return "1 other kind"
	}
	return fmt.Sprintf("%d other kinds", n)
}

// textLine renders one diagnostic. A diagnostic without a file has no
// position prefix, and a message that spans lines has its continuation
// lines indented, so that every diagnostic still starts a line of its own
// in the form editors and grep recognise.
func textLine(d Diagnostic) string {
	msg := strings.ReplaceAll(d.Message, "\r\n", "\n")
	msg = strings.ReplaceAll(msg, "\r", "\n")
	d.Message = strings.ReplaceAll(msg, "\n", "\n\t")
	if d.Pos.File == "" {
		return d.Severity.String() + " " + d.Code + ": " + d.Message
	}
	return d.String()
}
