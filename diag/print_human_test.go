package diag

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"regexp"
	"strings"
	"testing"
)

// sgr matches the colour sequences Options.Color writes.
var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestTextColor: colour changes no byte but the SGR sequences it adds,
// paints the severity, the code and the position, and is off by default.
func TestTextColor(t *testing.T) {
	for name, o := range map[string]Options{"lines": {Verbose: true}, "grouped": {Verbose: true, Grouped: true, Excerpt: sampleExcerpt, Reference: helpRef}} {
		t.Run(name, func(t *testing.T) {
			plain := printWith(t, "text", o, sample())
			if sgr.Match(plain) {
				t.Fatalf("colour without Options.Color:\n%q", plain)
			}
			o.Color = true
			colored := printWith(t, "text", o, sample())
			if got := sgr.ReplaceAll(colored, nil); !bytes.Equal(got, plain) {
				t.Errorf("colour changed more than colour:\n%s\nwant\n%s", got, plain)
			}
			for _, want := range []string{sgrRed + "error" + sgrReset, sgrYellow + "warning" + sgrReset, sgrCyan + "info" + sgrReset, sgrBold + "ConnectionTemplateInvalid" + sgrReset, sgrDim} {
				if !bytes.Contains(colored, []byte(want)) {
					t.Errorf("no %q in\n%q", want, colored)
				}
			}
		})
	}
}

// sampleSource is the source sample()'s connections file holds at its
// lines.
var sampleSource = map[int]string{
	7:  "    - \tgithub.com",
	17: `        value: "Bearer {{ .tok"`,
	40: "::set-output name=x::##[error]pwned\x1b[31m",
}

func sampleExcerpt(d Diagnostic) (string, bool) {
	if d.Pos.File != "deploy/connections.yaml" {
		return "", false
	}
	s, ok := sampleSource[d.Pos.Line]
	return s, ok
}

func helpRef(code string) string { return "keyhole help " + code }

// TestTextGrouped is the grouped layout: the diagnostics under their
// file, each with its source line, a caret at its column (a tab counted
// as the four spaces it is shown as) and its reference; the closing
// lines of the plain layout after them. A hostile source line is escaped.
func TestTextGrouped(t *testing.T) {
	out := printWith(t, "text", Options{Grouped: true, Verbose: true, Excerpt: sampleExcerpt, Reference: helpRef}, sample())
	golden(t, "sample.text-grouped.golden", out)
	s := string(out)
	for _, want := range []string{
		"deploy/connections.yaml\n  7:10: warning HostNotCovered: host github.com has no inject entry\n",
		"    7 |     -     github.com\n      |             ^\n      = see: keyhole help HostNotCovered\n",
		"    17 |         value: \"Bearer {{ .tok\"\n       |                ^\n",
		`\u003a:set-output name=x::##\u005b`,
		`\x1b[31m`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	if !strings.HasSuffix(s, "\n"+SummaryLine(sample(), sampleSummary)+"\n") {
		t.Errorf("does not end with the summary line:\n%s", s)
	}
	// Each file's name heads its diagnostics once, in file order.
	if strings.Count(s, "\ndeploy/connections.yaml\n") != 1 || strings.Index(s, "deploy/connections.yaml\n") > strings.Index(s, "deploy/extra.yaml\n") {
		t.Errorf("not grouped by file in order:\n%s", s)
	}
}

// TestExcerptLines: the caret is under the column, counted in characters
// as shown; past the end of the line it is under the end; no column, no
// caret.
func TestExcerptLines(t *testing.T) {
	cases := map[string]struct {
		src        string
		column     int
		line, want string
	}{
		"start":   {src: "kind: X", column: 1, line: "kind: X", want: "^"},
		"middle":  {src: "kind: X", column: 7, line: "kind: X", want: "      ^"},
		"end":     {src: "kind: X", column: 8, line: "kind: X", want: "       ^"},
		"past":    {src: "kind: X", column: 20, line: "kind: X", want: ""},
		"none":    {src: "kind: X", column: 0, line: "kind: X", want: ""},
		"unicode": {src: "név: ü", column: 6, line: "név: ü", want: "     ^"},
		"tab":     {src: "a:\tb", column: 4, line: "a:    b", want: "      ^"},
		"control": {src: "a: \x07b", column: 5, line: `a: \ab`, want: "     ^"},
		"crlf":    {src: "a: b\r\n", column: 4, line: "a: b", want: "   ^"},
		"command": {src: "  ::error::x", column: 3, line: `  \u003a:error::x`, want: "  ^"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			line, caret := excerptLines(tc.src, tc.column)
			if line != tc.line || caret != tc.want {
				t.Errorf("excerptLines(%q, %d) = %q, %q; want %q, %q", tc.src, tc.column, line, caret, tc.line, tc.want)
			}
		})
	}
}

// TestGitLabReport holds the report to GitLab's documented fields: an
// array of issues, each with description, check_name, a fingerprint
// unique in the report, a severity of its scale and location.path with
// location.lines.begin (https://docs.gitlab.com/ci/testing/code_quality/,
// "Code Quality report format"). A fingerprint does not change when the
// finding moves to another line.
func TestGitLabReport(t *testing.T) {
	decode := func(b []byte) []map[string]any {
		var issues []map[string]any
		if err := json.Unmarshal(b, &issues); err != nil {
			t.Fatalf("not a JSON array: %v\n%s", err, b)
		}
		return issues
	}
	ds := sample()
	ds = append(ds, ds[3]) // the same finding twice: two fingerprints
	issues := decode(printWith(t, "gitlab", Options{}, ds))
	if len(issues) != 6 {
		t.Fatalf("%d issues, want the 6 unsuppressed ones", len(issues))
	}
	fps := map[string]bool{}
	scale := map[string]bool{"info": true, "minor": true, "major": true, "critical": true, "blocker": true}
	for _, is := range issues {
		for _, f := range []string{"description", "check_name", "fingerprint", "severity"} {
			if s, _ := is[f].(string); s == "" {
				t.Errorf("issue without %s: %v", f, is)
			}
		}
		if !scale[is["severity"].(string)] {
			t.Errorf("severity %v is not on GitLab's scale", is["severity"])
		}
		loc, _ := is["location"].(map[string]any)
		lines, _ := loc["lines"].(map[string]any)
		if p, _ := loc["path"].(string); p == "" || lines["begin"] == nil || lines["begin"].(float64) < 1 {
			t.Errorf("location %v has no path or lines.begin", loc)
		}
		fp := is["fingerprint"].(string)
		if fps[fp] {
			t.Errorf("fingerprint %s twice", fp)
		}
		fps[fp] = true
	}
	if json, _ := NewPrinterWith("gitlab", Options{}); json == nil {
		t.Fatal("no gitlab printer")
	}
	moved := sample()
	for i := range moved {
		moved[i].Pos.Line += 5
	}
	before, after := decode(printWith(t, "gitlab", Options{}, sample())), decode(printWith(t, "gitlab", Options{}, moved))
	for i := range before {
		if before[i]["fingerprint"] != after[i]["fingerprint"] {
			t.Errorf("issue %d's fingerprint changed with its line", i)
		}
	}
	if out := printWith(t, "gitlab", Options{}, nil); string(out) != "[]\n" {
		t.Errorf("an empty report is %q, want []", out)
	}
}

// TestJUnitReport: well-formed XML with one testsuite, whose counts are
// those of its testcases: one for the run and one per file named, a
// failure for each that holds an error.
func TestJUnitReport(t *testing.T) {
	out := printWith(t, "junit", Options{}, sample())
	var r junitSuites
	if err := xml.Unmarshal(out, &r); err != nil {
		t.Fatalf("not XML: %v\n%s", err, out)
	}
	if len(r.Suites) != 1 {
		t.Fatalf("%d testsuites, want 1", len(r.Suites))
	}
	s := r.Suites[0]
	failed := 0
	var names []string
	for _, c := range s.Cases {
		names = append(names, c.Name)
		if c.Failure != nil {
			failed++
		}
	}
	want := []string{"keyhole check", "a b/x,y:z.yaml", "deploy/connections.yaml", "deploy/extra.yaml"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("testcases %q, want %q", names, want)
	}
	if s.Tests != len(s.Cases) || s.Failures != failed || failed != 3 || r.Tests != s.Tests || r.Failures != s.Failures {
		t.Errorf("counts tests=%d failures=%d, testcases %d with %d failing", s.Tests, s.Failures, len(s.Cases), failed)
	}
}
