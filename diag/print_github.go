package diag

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// annotationsPerLevel is how many annotations of one level (error,
// warning, notice) GitHub shows for one step; it drops the rest silently
// (https://github.com/orgs/community/discussions/68471 and the actions
// toolkit's annotation docs give 10 errors and 10 warnings per step).
const annotationsPerLevel = 10

// githubPrinter writes GitHub Actions workflow commands, which the runner
// turns into annotations on the pull request:
//
//	::error file=F,line=L,col=C,title=CODE::message
//
// at most annotationsPerLevel of each level, errors first since they are
// what fails the step; the diagnostics past that are printed as plain
// text lines (file:line:col: severity CODE: message), so they are in the
// log and a workflow can put them in its step summary, and the summary
// line says how many were not annotated. Suppressed diagnostics and those
// below Options.MinSeverity are left out; info becomes ::notice.
type githubPrinter struct{ o Options }

// githubLevel names the workflow command for a severity.
func githubLevel(s Severity) string {
	switch s {
	case Warning:
		return "warning"
	case Info:
		return "notice"
	}
	return "error"
}

func (p githubPrinter) Print(w io.Writer, ds List, sum Summary, _ map[string]Rule) error {
	ew := &errWriter{w: w}
	shown, below := atLeast(sorted(ds), p.o.MinSeverity)
	var rest List
	annotated := map[Severity]int{}
	for _, sev := range []Severity{Error, Warning, Info} {
		for _, d := range shown {
			if d.Severity != sev || d.Suppressed != "" {
				continue
			}
			if annotated[sev] == annotationsPerLevel {
				rest = append(rest, d)
				continue
			}
			annotated[sev]++
			d.Pos.File = p.o.repoPath(d.Pos.File)
			ew.printf("%s\n", githubCommand(d))
		}
	}
	rest.Sort()
	// The lines that are not annotations are keyhole's text, which names
	// files and quotes values: none may read as a command.
	for _, d := range rest {
		d.Pos.File = p.o.repoPath(d.Pos.File)
		ew.printf("%s\n", SafeLines(oneLine(d.String())))
	}
	line := SummaryLine(ds, sum)
	if below > 0 {
		line += fmt.Sprintf("; %d below %s not shown (--min-severity)", below, p.o.MinSeverity)
	}
	if len(rest) > 0 {
		line += fmt.Sprintf("; %d not annotated (GitHub shows %d annotations of each level per step): listed above", len(rest), annotationsPerLevel)
	}
	ew.printf("%s\n", SafeLines(line))
	return ew.err
}

// githubCommand is the workflow command that annotates d.
func githubCommand(d Diagnostic) string {
	var props []string
	if d.Pos.File != "" && d.Pos.File != "-" {
		props = append(props, "file="+githubProperty(d.Pos.File))
		if d.Pos.Line > 0 {
			props = append(props, "line="+strconv.Itoa(d.Pos.Line))
			if d.Pos.Column > 0 {
				props = append(props, "col="+strconv.Itoa(d.Pos.Column))
			}
		}
	}
	props = append(props, "title="+githubProperty(d.Code))
	return fmt.Sprintf("::%s %s::%s", githubLevel(d.Severity), strings.Join(props, ","), githubData(d.Message))
}

// oneLine keeps a plain log line on one line, so that no message can put
// a workflow command at the start of the next.
func oneLine(s string) string {
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}

// githubData escapes a command's message as the runner unescapes it, so a
// message can never end the command early or start a new one.
func githubData(s string) string {
	// Line breaks are the runner's to render; any other control
	// character is written out.
	s = escapeRunes(s, func(r rune) bool { return r != '\n' && r != '\r' && unsafeRune(r) })
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// githubProperty escapes a property value, where ':' and ',' are also
// delimiters.
func githubProperty(s string) string {
	s = escapeRunes(s, func(r rune) bool { return r != '\n' && r != '\r' && unsafeRune(r) })
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
