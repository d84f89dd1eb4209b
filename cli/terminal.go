package cli

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"keyhole.dev/keyhole/diag"
)

// The text format for a person at a terminal: colour (--color) and the
// grouped layout with source lines (--layout). Neither is ever chosen
// for output that is not a terminal unless asked for, so what a pipe, a
// file or a CI log receives is the plain layout, byte for byte.

// colorModes and layouts are the values of --color and --layout.
func colorModes() []string { return []string{"auto", "always", "never"} }
func layouts() []string    { return []string{"auto", "lines", "grouped"} }

// isTerminal reports whether w is a terminal: e.isTerminal in tests,
// else whether w is a file that is a terminal.
func (e *env) isTerminal(w io.Writer) bool {
	if e.terminal != nil {
		return e.terminal(w)
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// getenv is the environment the command runs with.
func (e *env) getenv(key string) string {
	if e.env != nil {
		return e.env(key)
	}
	return os.Getenv(key)
}

// human fills the text format's colour and layout for output to w (the
// writer as given, before any guard): --color=auto colours a terminal
// unless NO_COLOR is set to anything but "" (https://no-color.org) or
// TERM is "dumb"; --color=always colours whatever the output and the
// environment, as the flag is the user's word for this one run.
// --layout=auto groups on a terminal; the grouped layout shows source
// lines where showLine allows (see excerpts) and a reference for each
// code (keyhole help CODE).
func (pf printFlags) human(e *env, w io.Writer, o *diag.Options) {
	tty := w != nil && e.isTerminal(w)
	switch pf.color {
	case "always":
		o.Color = true
	case "auto", "":
		o.Color = tty && e.getenv("NO_COLOR") == "" && e.getenv("TERM") != "dumb"
	}
	switch pf.layout {
	case "grouped":
		o.Grouped = true
	case "auto", "":
		o.Grouped = tty
	}
	if o.Grouped {
		x := newExcerpts()
		o.Excerpt = x.line
		o.Reference = func(code string) string { return fmt.Sprintf("keyhole help %s", code) }
	}
}
