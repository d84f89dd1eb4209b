package diag

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The text format's grouped layout (Options.Grouped), for a person at a
// terminal rather than for a log or a program: the diagnostics under the
// name of their file, in file order, each with the source line it is
// positioned on, a caret under its column and where its code is
// documented; then the lines that close the text format.
//
//	deploy/connections.yaml
//	  17:16: error ConnectionTemplateInvalid: template "Bearer {{ .tok" is not closed: add }}
//	     17 |         value: "Bearer {{ .tok"
//	        |                ^
//	        = see: keyhole help ConnectionTemplateInvalid
//
// Which diagnostics it lists is the plain layout's choice (see textPrinter).
// A source line comes from Options.Excerpt, which shows none where a
// secret value may be; the line is written with its control characters
// escaped and made safe for a CI log (SafeLines) before it is coloured.

// printGrouped writes ds in the grouped layout.
func (p textPrinter) printGrouped(w io.Writer, ds List, sum Summary) error {
	ew := &errWriter{w: w}
	color := p.o.Color
	file, first := "", true
	for _, d := range sorted(ds) {
		ok, note := p.shown(d)
		if !ok {
			continue
		}
		if d.Pos.File != file || first {
			if !first {
				ew.printf("\n")
			}
			file, first = d.Pos.File, false
			if file != "" {
				ew.printf("%s\n", paint(color, sgrBold, EscapeControl(file)))
			}
		}
		indent := ""
		if d.Pos.File != "" {
			indent = "  "
		}
		pos := ""
		switch {
		case d.Pos.Line > 0 && d.Pos.Column > 0:
			pos = fmt.Sprintf("%d:%d:", d.Pos.Line, d.Pos.Column)
		case d.Pos.Line > 0:
			pos = fmt.Sprintf("%d:", d.Pos.Line)
		}
		msg := strings.ReplaceAll(strings.ReplaceAll(d.Message, "\r\n", "\n"), "\r", "\n")
		msg = strings.ReplaceAll(msg, "\n", "\n"+indent+"  ")
		ew.printf("%s%s%s %s: %s%s\n", indent, paint(color, sgrDim, pos)+cond(pos != "", " "),
			paint(color, severityColor(d.Severity), d.Severity.String()), paint(color, sgrBold, d.Code), msg, note)
		gutter := indent + "  " + strings.Repeat(" ", len(strconv.Itoa(d.Pos.Line)))
		if d.Pos.Line > 0 && p.o.Excerpt != nil {
			if src, ok := p.o.Excerpt(d); ok {
				line, caret := excerptLines(src, d.Pos.Column)
				ew.printf("%s%s %s %s\n", indent+"  ", paint(color, sgrDim, strconv.Itoa(d.Pos.Line)), paint(color, sgrDim, "|"), line)
				if caret != "" {
					ew.printf("%s %s %s\n", gutter, paint(color, sgrDim, "|"), paint(color, severityColor(d.Severity), caret))
				}
			}
		}
		if p.o.Reference != nil {
			if ref := p.o.Reference(d.Code); ref != "" {
				ew.printf("%s %s see: %s\n", gutter, paint(color, sgrDim, "="), ref)
			}
		}
	}
	if !first {
		ew.printf("\n")
	}
	p.closing(ew, ds, sum)
	return ew.err
}

// excerptLines returns a source line as it is shown, and the caret line
// under it that points at column (1-based, in characters; 0: no caret).
// A tab is shown as four spaces and a control character escaped, and the
// caret counts what is shown; the shown line is then made safe for a CI
// log, as every line keyhole prints is.
func excerptLines(src string, column int) (string, string) {
	src = strings.TrimRight(src, "\r\n")
	var line, pad strings.Builder
	i := 0
	for _, r := range src {
		i++
		var shown string
		switch {
		case r == '\t':
			shown = "    "
		case unsafeRune(r) || ignorable(r):
			shown = escapeRunes(string(r), func(rune) bool { return true })
		default:
			shown = string(r)
		}
		line.WriteString(shown)
		if i < column {
			pad.WriteString(strings.Repeat(" ", len([]rune(shown))))
		}
	}
	caret := ""
	if column > 0 && column <= i+1 {
		caret = pad.String() + "^"
	}
	return safeLine(line.String()), caret
}
