package diag

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// junitPrinter writes a JUnit XML report, which CI systems other than
// GitHub (GitLab's artifacts:reports:junit, Jenkins, Azure Pipelines,
// CircleCI) show as test results: one testsuite, "keyhole check", with a
// testcase for the run as a whole and one for each file a diagnostic
// names, in file order. A testcase fails when its diagnostics hold an
// error; its failure's text lists them, and its warnings (and info, with
// --min-severity info) are in its system-out. The run's testcase holds
// the diagnostics about no file and the summary line. Suppressed
// diagnostics and those below Options.MinSeverity are left out.
type junitPrinter struct{ o Options }

type (
	junitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Errors   int          `xml:"errors,attr"`
		Suites   []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name     string      `xml:"name,attr"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Errors   int         `xml:"errors,attr"`
		Skipped  int         `xml:"skipped,attr"`
		Cases    []junitCase `xml:"testcase"`
	}
	junitCase struct {
		Name      string        `xml:"name,attr"`
		Classname string        `xml:"classname,attr"`
		Failure   *junitFailure `xml:"failure,omitempty"`
		SystemOut *junitText    `xml:"system-out,omitempty"`
	}
	junitFailure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",innerxml"`
	}
	junitText struct {
		Text string `xml:",innerxml"`
	}
)

// junitEscape escapes s as XML character data, as encoding/xml does, but
// keeps its line breaks and tabs as they are, so that the diagnostics
// read one a line in the report.
func junitEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return strings.NewReplacer("&#xA;", "\n", "&#x9;", "\t").Replace(b.String())
}

// junitRun names the testcase of the run as a whole.
const junitRun = "keyhole check"

func (p junitPrinter) Print(w io.Writer, ds List, sum Summary, _ map[string]Rule) error {
	shown, below := atLeast(sorted(ds), p.o.MinSeverity)
	type group struct {
		name          string
		errors, other []string
	}
	groups := []*group{{name: junitRun}}
	byFile := map[string]*group{}
	for _, d := range shown {
		if d.Suppressed != "" {
			continue
		}
		d.Pos.File = p.o.repoPath(d.Pos.File)
		g := groups[0]
		if d.Pos.File != "" {
			if g = byFile[d.Pos.File]; g == nil {
				g = &group{name: EscapeControl(d.Pos.File)}
				byFile[d.Pos.File] = g
				groups = append(groups, g)
			}
		}
		if d.Severity == Error {
			g.errors = append(g.errors, textLine(d))
		} else {
			g.other = append(g.other, textLine(d))
		}
	}
	suite := junitSuite{Name: junitRun}
	for i, g := range groups {
		c := junitCase{Name: g.name, Classname: "keyhole"}
		out := g.other
		if i == 0 {
			line := SummaryLine(ds, sum)
			if below > 0 {
				line += fmt.Sprintf("; %d below %s not shown (--min-severity)", below, p.o.MinSeverity)
			}
			out = append(out, line)
		}
		if len(g.errors) > 0 {
			c.Failure = &junitFailure{Message: plural(len(g.errors), "error"), Type: "error", Text: junitEscape(strings.Join(g.errors, "\n") + "\n")}
			suite.Failures++
		}
		if len(out) > 0 {
			c.SystemOut = &junitText{junitEscape(strings.Join(out, "\n") + "\n")}
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.Tests = len(suite.Cases)
	report := junitSuites{Name: "keyhole", Tests: suite.Tests, Failures: suite.Failures, Suites: []junitSuite{suite}}
	return safely(w, func(w io.Writer) error {
		if _, err := io.WriteString(w, xml.Header); err != nil {
			return err
		}
		enc := xml.NewEncoder(w)
		enc.Indent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
		_, err := io.WriteString(w, "\n")
		return err
	})
}
