package diag

import (
	"io"
	"strings"
)

// textPrinter writes file:line:col: severity CODE: message, one per line,
// then a summary line. Suppressed diagnostics are left out.
type textPrinter struct{}

func (textPrinter) Print(w io.Writer, ds List, sum Summary, _ map[string]Rule) error {
	ew := &errWriter{w: w}
	for _, d := range sorted(ds) {
		if d.Suppressed != "" {
			continue
		}
		ew.printf("%s\n", textLine(d))
	}
	ew.printf("%s\n", SummaryLine(ds, sum))
	return ew.err
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
