package diag

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	golden_ "keyhole.dev/keyhole/internal/golden"
)

// sample covers what printers must get right: every severity, a
// suppressed diagnostic, an unknown position, a file outside the working
// directory, and messages and paths with the characters each format must
// escape. It is deliberately out of order.
func sample() List {
	conn := Object{APIVersion: "omnia.altairalabs.ai/v1alpha1", Kind: "Connection", Namespace: "agents", Name: "github-acme"}
	return List{
		{Code: "ConnectionTemplateInvalid", Severity: Error, Pos: Pos{File: "deploy/connections.yaml", Line: 17, Column: 16}, Object: conn, Path: "spec.placement.inject[0].value", Message: "template \"Bearer {{ .tok\" is not closed: add }}"},
		{Code: "KindMissing", Severity: Error, Pos: Pos{File: "a b/x,y:z.yaml", Line: 1, Column: 1}, Message: "100% wrong\r\nsecond line: with, commas"},
		{Code: "UnknownKind", Severity: Info, Pos: Pos{File: "deploy/extra.yaml", Line: 3, Column: 1}, Object: Object{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, Message: "kind ConfigMap is not checked", Units: []string{"apps/production"}},
		{Code: "HostNotCovered", Severity: Warning, Pos: Pos{File: "deploy/connections.yaml", Line: 7, Column: 10}, Object: conn, Path: "spec.hosts[1]", Message: "host github.com has no inject entry"},
		{Code: "HostNotCovered", Severity: Warning, Pos: Pos{File: "deploy/connections.yaml", Line: 40, Column: 10}, Object: conn, Path: "spec.hosts[0]", Message: "suppressed finding", Suppressed: "annotation"},
		{Code: "PlaceholderUnused", Severity: Info, Pos: Pos{File: "/abs/outside.yaml", Line: 2, Column: 3}, Message: "suppressed by config", Suppressed: "config"},
		{Code: "NoPosition", Severity: Error, Message: "a finding about the whole run, ünïcode kept"},
	}
}

func sampleRules() map[string]Rule {
	return map[string]Rule{
		"ConnectionTemplateInvalid": {Code: "ConnectionTemplateInvalid", Severity: Error, Purpose: "A header template does not parse.", Help: "Write {{ .key }} with a key of the Secret."},
		"HostNotCovered":            {Code: "HostNotCovered", Severity: Warning, Purpose: "A host has no inject entry.", Help: "Add an inject entry for the host or remove it."},
		"KindMissing":               {Code: "KindMissing", Severity: Error, Purpose: "A document has no kind.", Help: "Add apiVersion and kind."},
		"UnknownKind":               {Code: "UnknownKind", Severity: Info, Purpose: "A kind keyhole does not check.", Help: "Nothing to do."},
		"NeverRaised":               {Code: "NeverRaised", Severity: Warning, Purpose: "Listed for its help.", Help: "Help text."},
	}
}

var sampleSummary = Summary{Documents: 3, Objects: 2, Skipped: Skipped{Objects: 1, Kinds: 1, Notes: 1}, Units: []string{"", "apps/production"}}

// golden compares got with testdata/name (KEYHOLE_UPDATE=1 rewrites it).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden_.Check(t, filepath.Join("testdata", name), got)
}

func TestPrintersGolden(t *testing.T) {
	cases := map[string]struct {
		ds  List
		sum Summary
	}{
		"sample": {ds: sample(), sum: sampleSummary},
		"empty":  {ds: nil, sum: Summary{Documents: 1, Objects: 1}},
	}
	for _, format := range Formats() {
		for name, tc := range cases {
			t.Run(format+"/"+name, func(t *testing.T) {
				p, err := NewPrinter(format)
				if err != nil {
					t.Fatal(err)
				}
				ds := slices.Clone(tc.ds)
				var buf bytes.Buffer
				if err := p.Print(&buf, ds, tc.sum, sampleRules()); err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(ds, tc.ds, func(a, b Diagnostic) bool { return reflect.DeepEqual(a, b) }) {
					t.Error("Print reordered the caller's list")
				}
				golden(t, name+"."+format+".golden", buf.Bytes())

				// The same diagnostics in another order give the same bytes.
				rev := slices.Clone(tc.ds)
				slices.Reverse(rev)
				var again bytes.Buffer
				if err := p.Print(&again, rev, tc.sum, sampleRules()); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf.Bytes(), again.Bytes()) {
					t.Error("output depends on the order of the input")
				}
			})
		}
	}
}

func TestNewPrinterUnknown(t *testing.T) {
	_, err := NewPrinter("xml")
	if err == nil {
		t.Fatal("NewPrinter(xml) succeeded")
	}
	for _, f := range []string{"text", "json", "github", "sarif", `"xml"`} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not mention %s", err, f)
		}
	}
}

func TestSummaryLine(t *testing.T) {
	tests := map[string]struct {
		ds   List
		sum  Summary
		want string
	}{
		"nothing": {
			want: "0 documents, 0 objects checked: 0 errors, 0 warnings, 0 info",
		},
		"singulars": {
			ds:   List{{Severity: Error}, {Severity: Warning}, {Severity: Info}},
			sum:  Summary{Documents: 1, Objects: 1},
			want: "1 document, 1 object checked: 1 error, 1 warning, 1 info",
		},
		"suppressed are not counted": {
			ds:   List{{Severity: Error, Suppressed: "config"}, {Severity: Error}, {Severity: Error}},
			sum:  Summary{Documents: 4, Objects: 2},
			want: "4 documents, 2 objects checked: 2 errors, 0 warnings, 0 info (1 suppressed)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := SummaryLine(tc.ds, tc.sum); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGitHubEscaping(t *testing.T) {
	tests := map[string]struct {
		in, data, property string
	}{
		"plain":       {in: "abc", data: "abc", property: "abc"},
		"percent":     {in: "100%", data: "100%25", property: "100%25"},
		"line breaks": {in: "a\r\nb", data: "a%0D%0Ab", property: "a%0D%0Ab"},
		"delimiters":  {in: "a:b,c", data: "a:b,c", property: "a%3Ab%2Cc"},
		"escape-like": {in: "%0A", data: "%250A", property: "%250A"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := githubData(tc.in); got != tc.data {
				t.Errorf("data: got %q, want %q", got, tc.data)
			}
			if got := githubProperty(tc.in); got != tc.property {
				t.Errorf("property: got %q, want %q", got, tc.property)
			}
		})
	}
}

// TestJSONShape checks the json format's one document: every
// diagnostic with the documented fields, suppressed and info ones
// included, and the summary's counts.
func TestJSONShape(t *testing.T) {
	var buf bytes.Buffer
	if err := (jsonPrinter{}).Print(&buf, sample(), sampleSummary, nil); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Diagnostics []map[string]any `json:"diagnostics"`
		Summary     map[string]any   `json:"summary"`
	}
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Error("more than one JSON document")
	}
	if len(doc.Diagnostics) != len(sample()) {
		t.Fatalf("%d diagnostics listed for %d", len(doc.Diagnostics), len(sample()))
	}
	suppressed := 0
	for _, m := range doc.Diagnostics {
		for _, k := range []string{"code", "severity", "file", "line", "column", "object", "path", "message"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%v has no %s", m, k)
			}
		}
		if _, ok := m["suppressed"]; ok {
			suppressed++
		}
	}
	if suppressed != 2 {
		t.Errorf("%d suppressed diagnostics listed, want 2", suppressed)
	}
	want := map[string]any{"documents": 3.0, "objects": 2.0, "errors": 3.0, "warnings": 1.0, "info": 1.0, "suppressed": 2.0}
	for k, v := range want {
		if doc.Summary[k] != v {
			t.Errorf("summary %s = %v, want %v", k, doc.Summary[k], v)
		}
	}
	if sk, _ := doc.Summary["skipped"].(map[string]any); sk["objects"] != 1.0 || sk["kinds"] != 1.0 || sk["files"] != 0.0 {
		t.Errorf("summary skipped = %v", doc.Summary["skipped"])
	}
	if u, _ := doc.Summary["units"].([]any); len(u) != 2 {
		t.Errorf("summary units = %v", doc.Summary["units"])
	}
}

// TestTextVerbose: the default text output shows errors and warnings and
// counts the rest; -v lists every diagnostic, suppressed ones marked.
func TestTextVerbose(t *testing.T) {
	for name, verbose := range map[string]bool{"quiet": false, "verbose": true} {
		t.Run(name, func(t *testing.T) {
			p, err := NewPrinterWith("text", Options{Verbose: verbose})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := p.Print(&buf, sample(), sampleSummary, nil); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, s := range []string{"error KindMissing", "warning HostNotCovered: host github.com", "1 object of 1 other kind skipped"} {
				if !strings.Contains(out, s) {
					t.Errorf("%s output lacks %q:\n%s", name, s, out)
				}
			}
			for s, want := range map[string]bool{
				"info UnknownKind": verbose,
				"suppressed finding (suppressed by annotation)": verbose,
				"(-v lists them)": !verbose,
			} {
				if strings.Contains(out, s) != want {
					t.Errorf("%s output: %q shown %v, want %v:\n%s", name, s, !want, want, out)
				}
			}
			if verbose {
				golden(t, "sample.text-verbose.golden", buf.Bytes())
			}
		})
	}
}

// TestSARIFSchema validates the SARIF output against the SARIF 2.1.0 JSON
// schema (testdata/sarif-schema-2.1.0.json, as shipped in the npm package
// @microsoft/jest-sarif 1.0.0-beta.0, file lib/schemas/sarif-2.1.0-rtm.5.json).
func TestSARIFSchema(t *testing.T) {
	schema := loadSARIFSchema(t)
	for name, ds := range map[string]List{"sample": sample(), "empty": nil} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := (sarifPrinter{}).Print(&buf, ds, sampleSummary, sampleRules()); err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(v); err != nil {
				var ve *jsonschema.ValidationError
				if errors.As(err, &ve) {
					t.Fatalf("invalid SARIF: %#v", ve)
				}
				t.Fatalf("invalid SARIF: %v", err)
			}
			// The schema cannot say that every result's rule is listed.
			var log sarifLog
			if err := json.Unmarshal(buf.Bytes(), &log); err != nil {
				t.Fatal(err)
			}
			rules := log.Runs[0].Tool.Driver.Rules
			for _, r := range log.Runs[0].Results {
				if r.RuleIndex >= len(rules) || rules[r.RuleIndex].ID != r.RuleID {
					t.Errorf("result %s points at rule %d", r.RuleID, r.RuleIndex)
				}
			}
		})
	}
}

// TestPrintWriteError checks a failing writer is reported, not ignored.
func TestPrintWriteError(t *testing.T) {
	for _, format := range Formats() {
		t.Run(format, func(t *testing.T) {
			p, _ := NewPrinter(format)
			if err := p.Print(failingWriter{}, sample(), sampleSummary, nil); err == nil {
				t.Error("no error from a failing writer")
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestCountsSuppressed holds CountsSuppressed to what each printer does:
// where it says a format only counts the suppressed diagnostics, blanking
// their messages changes no byte of the output; where it says not, the
// messages are printed.
func TestCountsSuppressed(t *testing.T) {
	blank := sample()
	for i := range blank {
		if blank[i].Suppressed != "" {
			blank[i].Message = ""
		}
	}
	for _, format := range Formats() {
		for _, verbose := range []bool{false, true} {
			o := Options{Verbose: verbose, MinSeverity: Info}
			p, err := NewPrinterWith(format, o)
			if err != nil {
				t.Fatal(err)
			}
			var full, blanked bytes.Buffer
			if err := p.Print(&full, sample(), sampleSummary, sampleRules()); err != nil {
				t.Fatal(err)
			}
			if err := p.Print(&blanked, blank, sampleSummary, sampleRules()); err != nil {
				t.Fatal(err)
			}
			same := bytes.Equal(full.Bytes(), blanked.Bytes())
			if counts := CountsSuppressed(format, o); counts != same {
				t.Errorf("%s, verbose %v: CountsSuppressed is %v, but blanking the suppressed messages changes the output: %v", format, verbose, counts, !same)
			}
		}
	}
	if CountsSuppressed("no-such-format", Options{}) {
		t.Error("an unknown format is said to only count suppressed diagnostics")
	}
}
