package diag

import (
	"io"
	"strconv"
	"strings"
)

// githubPrinter writes GitHub Actions workflow commands, which the runner
// turns into annotations on the pull request:
//
//	::error file=F,line=L,col=C,title=CODE::message
//
// then the summary as a plain log line. Suppressed diagnostics are left
// out; info becomes ::notice.
type githubPrinter struct{}

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

func (githubPrinter) Print(w io.Writer, ds List, sum Summary, _ map[string]Rule) error {
	ew := &errWriter{w: w}
	for _, d := range sorted(ds) {
		if d.Suppressed != "" {
			continue
		}
		level := githubLevel(d.Severity)
		var props []string
		if d.Pos.File != "" {
			props = append(props, "file="+githubProperty(d.Pos.File))
			if d.Pos.Line > 0 {
				props = append(props, "line="+strconv.Itoa(d.Pos.Line))
				if d.Pos.Column > 0 {
					props = append(props, "col="+strconv.Itoa(d.Pos.Column))
				}
			}
		}
		props = append(props, "title="+githubProperty(d.Code))
		ew.printf("::%s %s::%s\n", level, strings.Join(props, ","), githubData(d.Message))
	}
	ew.printf("%s\n", SummaryLine(ds, sum))
	return ew.err
}

// githubData escapes a command's message as the runner unescapes it, so a
// message can never end the command early or start a new one.
func githubData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// githubProperty escapes a property value, where ':' and ',' are also
// delimiters.
func githubProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
