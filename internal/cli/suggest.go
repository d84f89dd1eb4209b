package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/diff"
	"keyhole.dev/keyhole/suggest"
)

// suggestHelp follows suggest's flags in its -h.
const suggestHelp = `Reads the egress proxy's JSON request log (a file, or kubectl logs piped in
with --log -), groups the refusals per sandbox, host, method and reason,
and proposes for each group the smallest edit of the inputs' Connection
rules that allows what was refused: an exact path (or the narrowest prefix
that covers paths sharing their first two segments) added to the rule
with just that method on that host, else a new rule. Each edit comes with
its verdict from the access engine diff uses (the requests it lets
through that were refused before) and the ceiling's verdict. Refusals no
rule edit fixes are named with the reason. Lines that are not the
proxy's request lines are skipped and counted. --write applies the
edits, all files or none.

Exit status: 0 the log holds no refusal; 1 refusals found (with --write:
the edits written); 2 a usage error, an unreadable log or inputs, or
inputs whose check finds errors.
`

func runSuggest(e *env, args []string) int {
	fs := newFlags(e, "suggest", "[flags] [PATH...]")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintf(e.stdout, "\n%s", suggestHelp)
	}
	var f checkFlags
	f.registerInputs(fs)
	f.noImages = true // what a sandbox may reach does not depend on its image
	f.objects = true  // the Connections' YAML, where the edits go
	logFile := fs.String("log", "-", "the proxy's request log `FILE`; - reads standard input")
	write := fs.Bool("write", false, "apply the edits to the Connection files (all files or none)")
	format := fs.String("format", "text", "output: `text` or json")
	paths, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if err := oneOf("--format", *format, "text", "json"); err != nil {
		fmt.Fprintf(e.stderr, "keyhole suggest: %s\n", errText(err))
		return exitUsage
	}
	f.format = "text"
	var in io.Reader = e.stdin
	name := "standard input"
	if *logFile != "-" {
		fh, err := os.Open(*logFile)
		if err != nil {
			fmt.Fprintf(e.stderr, "keyhole suggest: --log: %s\n", errText(err))
			return exitUsage
		}
		defer fh.Close()
		in, name = fh, *logFile
	}
	log, err := suggest.ReadLog(in)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole suggest: %s: %s\n", diag.EscapeControl(name), errText(err))
		return exitUsage
	}
	units, code, ok := plan(e, "suggest", paths, &f)
	if !ok {
		if code == exitFailed {
			code = exitUsage
		}
		return code
	}
	r := suggest.Suggest(log, units, os.ReadFile)
	if *format == "json" {
		if err := writeJSON(e.stdout, r); err != nil {
			return fail(e, "suggest", err)
		}
	} else {
		printSuggestions(e.stdout, r)
	}
	if *write && len(r.Patches) > 0 {
		if err := writeAll(r.Patches); err != nil {
			fmt.Fprintf(e.stderr, "keyhole suggest: --write: %v; no file was changed\n", err)
			return exitUsage
		}
		for _, p := range r.Patches {
			fmt.Fprintf(e.stderr, "keyhole suggest: wrote %s\n", diag.EscapeControl(p.File))
		}
	}
	if r.Refused == 0 {
		return exitOK
	}
	return exitFailed
}

func printSuggestions(w io.Writer, r *suggest.Report) {
	fmt.Fprintf(w, "read %d request lines: %d refused, in %d groups", r.Requests, r.Refused, len(r.Suggestions))
	if r.Skipped > 0 {
		fmt.Fprintf(w, "; %d other lines skipped", r.Skipped)
	}
	fmt.Fprintln(w)
	for _, s := range r.Suggestions {
		plural := "s"
		if s.Count == 1 {
			plural = ""
		}
		fmt.Fprintf(w, "\n%s %s %s: %s, %d request%s", escape(s.Sandbox), escape(s.Host), escape(s.Method), escape(s.Reason), s.Count, plural)
		if s.Connection != "" {
			fmt.Fprintf(w, " (Connection %s)", escape(s.Connection))
		}
		fmt.Fprintln(w)
		for _, p := range s.Paths {
			if p != "" {
				fmt.Fprintf(w, "  refused: %s\n", escape(p))
			}
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if s.Fix == nil {
			fmt.Fprintf(w, "  no rule edit: %s\n", s.NoFix)
			continue
		}
		fx := s.Fix
		fmt.Fprintf(w, "  edit: %s:%d: %s\n", fx.File, fx.Line, fx.Edit)
		for _, m := range fx.Merged {
			fmt.Fprintf(w, "  merged: %d refused paths into %s, which allows every path under it too\n", len(m.Paths), m.Prefix)
		}
		for _, wn := range fx.Warnings {
			fmt.Fprintf(w, "  warning: %s\n", escape(wn))
		}
		fmt.Fprintf(w, "  verdict: %s\n", fx.Verdict)
		for _, wt := range fx.Widened {
			fmt.Fprintf(w, "    + %s: %s\n", wt.Request(), wt.Head)
		}
		switch fx.Ceiling {
		case diff.CeilingAbove, diff.CeilingUnproven:
			fmt.Fprintf(w, "  ceiling: %s: left out of the patch (check would refuse it)\n", fx.Ceiling)
		default:
			fmt.Fprintf(w, "  ceiling: %s\n", fx.Ceiling)
		}
		for _, a := range fx.AboveCeiling {
			fmt.Fprintf(w, "    ! %s %s: %s\n", a.Method, a.URL, a.Limit)
		}
	}
	for _, p := range r.Patches {
		fmt.Fprintf(w, "\n%s", p.Diff)
	}
}

// escape quotes text from the log as Go does, without the quotes, so a
// control byte or an escape sequence in it cannot act on a terminal.
func escape(s string) string {
	q := fmt.Sprintf("%+q", s)
	return q[1 : len(q)-1]
}

// writeAll writes every patch's file, or none: each new text goes to a
// temporary file beside its file first, and only when all are written
// are they renamed over the originals.
func writeAll(ps []suggest.Patch) error {
	var tmps []string
	cleanup := func() {
		for _, t := range tmps {
			os.Remove(t)
		}
	}
	for _, p := range ps {
		info, err := os.Stat(p.File)
		if err != nil {
			cleanup()
			return err
		}
		t, err := os.CreateTemp(filepath.Dir(p.File), "."+filepath.Base(p.File)+".keyhole-*")
		if err != nil {
			cleanup()
			return err
		}
		tmps = append(tmps, t.Name())
		_, werr := t.Write(p.Text)
		cerr := t.Close()
		if err := errors.Join(werr, cerr, os.Chmod(t.Name(), info.Mode().Perm())); err != nil {
			cleanup()
			return err
		}
	}
	for i, p := range ps {
		if err := os.Rename(tmps[i], p.File); err != nil {
			cleanup()
			return fmt.Errorf("%w (%s and later files unchanged)", err, p.File)
		}
	}
	return nil
}
