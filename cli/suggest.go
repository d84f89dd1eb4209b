package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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
	helpAfterUsage(fs, e.stdout, suggestHelp)
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
		if err := writeAll(r.Patches, paths); err != nil {
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
func writeAll(ps []suggest.Patch, paths []string) error {
	var tmps []string
	cleanup := func() {
		for _, t := range tmps {
			os.Remove(t)
		}
	}
	roots, err := repositoryRoots(paths)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if err := insideRepository(roots, p.File); err != nil {
			return err // before anything is written: every file or none
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

// repositoryRoots are the repositories suggest --write may edit: of each
// PATH (default .), the git working tree enclosing it, or, outside one,
// the working directory when the PATH is under it, else the PATH's own
// directory, as the loader finds the root whose keyhole.yaml governs.
func repositoryRoots(paths []string) ([]string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var roots []string
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		if info, err := os.Stat(abs); err == nil && !info.IsDir() {
			abs = filepath.Dir(abs)
		}
		root := abs
		if within(wd, abs) {
			root = wd
		}
		for d := abs; ; d = filepath.Dir(d) {
			if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
				root = d
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
		roots = append(roots, root)
	}
	return roots, nil
}

// within reports whether abs is dir or under it.
func within(dir, abs string) bool {
	rel, err := filepath.Rel(dir, abs)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// insideRepository refuses a file outside root, inside its .git, or
// reached through a symbolic link below root: a kustomization may read a
// file from anywhere its load restrictions allow, and a checkout may
// commit links, but suggest --write edits only the repository's own
// files, never through a link.
func insideRepository(roots []string, file string) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	root := ""
	for _, r := range roots {
		if within(r, abs) && len(r) > len(root) {
			root = r
		}
	}
	if root == "" {
		return fmt.Errorf("%s is outside the repository (%s): suggest --write edits only the repository's files; edit it by hand if it is yours", file, strings.Join(roots, ", "))
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return err
	}
	cur := root
	for _, e := range strings.Split(rel, string(filepath.Separator)) {
		if e == ".git" {
			return fmt.Errorf("%s is inside the repository's .git: suggest --write edits only the repository's files", file)
		}
		cur = filepath.Join(cur, e)
		info, err := os.Lstat(cur)
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is reached through the symbolic link %s: suggest --write never writes through a link; edit the file it leads to by hand if it is the repository's", file, cur)
		}
	}
	return nil
}
