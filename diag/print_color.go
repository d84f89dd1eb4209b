package diag

import "strings"

// Terminal colours of the text format (Options.Color), as SGR escape
// sequences: every one a terminal's default palette has, none of them
// 256-colour or true-colour, so that they read on light and dark themes
// alike.
const (
	sgrReset  = "\x1b[0m"
	sgrBold   = "\x1b[1m"
	sgrDim    = "\x1b[2m"
	sgrRed    = "\x1b[1;31m"
	sgrYellow = "\x1b[1;33m"
	sgrCyan   = "\x1b[1;36m"
)

// paint wraps s in the SGR sequence sgr, or returns it as it is when
// colour is off, so that the bytes without colour are the plain layout's.
func paint(on bool, sgr, s string) string {
	if !on || s == "" {
		return s
	}
	return sgr + s + sgrReset
}

// severityColor is the colour of a severity's name: red for an error,
// yellow for a warning, cyan for info.
func severityColor(s Severity) string {
	switch s {
	case Error:
		return sgrRed
	case Warning:
		return sgrYellow
	}
	return sgrCyan
}

// colorLine is textLine with the position dim, the severity in its
// colour and the code bold; the text between them is textLine's.
func colorLine(d Diagnostic) string {
	plain := textLine(d)
	prefix := ""
	if d.Pos.File != "" {
		prefix = d.Pos.String() + ": "
	}
	rest := strings.TrimPrefix(plain, prefix)
	head := d.Severity.String() + " " + d.Code + ":"
	msg := strings.TrimPrefix(rest, head)
	return paint(true, sgrDim, strings.TrimSuffix(prefix, " ")) + cond(prefix != "", " ") +
		paint(true, severityColor(d.Severity), d.Severity.String()) + " " + paint(true, sgrBold, d.Code) + ":" + msg
}

// cond is s when ok, else "".
func cond(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}
