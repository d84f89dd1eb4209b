package diag

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// ciOptions are the options the CLI passes in CI: run in a subdirectory
// (sub) of a repository at /repo, warnings and errors only, file contents
// to find where each line ends.
func ciOptions() Options {
	files := map[string]string{
		"deploy/connections.yaml": strings.Repeat("# line\n", 6) + "  hosts: [api.github.com, github.com]\n" + strings.Repeat("# filler\n", 9) + "      value: \"Bearer {{ .tok\"\r\n" + strings.Repeat("# more\n", 30),
		"a b/x,y:z.yaml":          "kïnd: nothing\n",
	}
	return Options{
		MinSeverity:     Warning,
		WorkDir:         "/repo/sub",
		Root:            "/repo",
		Version:         "v0.1.0 (5124f20c9e5e)",
		SemanticVersion: "0.1.0",
		HelpURI:         func(code string) string { return "https://example.com/checks.md#" + strings.ToLower(code) },
		Source: func(file string) ([]byte, error) {
			if s, ok := files[file]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		},
	}
}

func printWith(t *testing.T, format string, o Options, ds List) []byte {
	t.Helper()
	p, err := NewPrinterWith(format, o)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.Print(&buf, ds, sampleSummary, sampleRules()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPrintersCIGolden is the sarif and github output as CI gets it.
func TestPrintersCIGolden(t *testing.T) {
	for _, format := range []string{"sarif", "github"} {
		t.Run(format, func(t *testing.T) {
			golden(t, "sample-ci."+format+".golden", printWith(t, format, ciOptions(), sample()))
		})
	}
}

func loadSARIFSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft4
	c.AssertFormat = true
	if err := c.AddResource("sarif-schema.json", f); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("sarif-schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSARIFSchemaProvenance keeps the vendored schema the file
// testdata/PROVENANCE.md says it is.
func TestSARIFSchemaProvenance(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	note, err := os.ReadFile(filepath.Join("testdata", "PROVENANCE.md"))
	if err != nil {
		t.Fatal(err)
	}
	if h := hex.EncodeToString(sum[:]); !bytes.Contains(note, []byte("sha256 "+h)) {
		t.Errorf("sarif-schema-2.1.0.json has sha256 %s, which PROVENANCE.md does not record", h)
	}
}

// githubRequirement is one rule of GitHub code scanning's documented SARIF
// subset, checked on a decoded log.
type githubRequirement struct {
	property string // as the documentation names it
	check    func(log map[string]any) error
}

// githubSARIFDoc is where GitHub documents what code scanning reads from
// an uploaded SARIF file: the properties it requires per object, and its
// upload limits.
const githubSARIFDoc = "https://docs.github.com/en/code-security/code-scanning/integrating-with-code-scanning/sarif-support-for-code-scanning"

// githubRequirements are the properties that page marks required (and the
// limits it sets) for what keyhole writes: sarifLog, run, toolComponent,
// reportingDescriptor, result, location, physicalLocation and
// runAutomationDetails. Properties the page lists as optional and keyhole
// fills (semanticVersion, helpUri, originalUriBaseIds) are checked too.
func githubRequirements() []githubRequirement {
	run := func(l map[string]any) map[string]any { return index(l, "runs", 0) }
	each := func(l map[string]any, what string, f func(map[string]any) error) error {
		items, _ := get(run(l), what).([]any)
		for i, it := range items {
			m, _ := it.(map[string]any)
			if err := f(m); err != nil {
				return fmt.Errorf("%s[%d]: %w", what, i, err)
			}
		}
		return nil
	}
	rules := func(l map[string]any) []any { r, _ := get(run(l), "tool", "driver", "rules").([]any); return r }
	eachRule := func(l map[string]any, f func(map[string]any) error) error {
		for i, r := range rules(l) {
			if err := f(r.(map[string]any)); err != nil {
				return fmt.Errorf("rules[%d]: %w", i, err)
			}
		}
		return nil
	}
	return []githubRequirement{
		{"$schema", func(l map[string]any) error { return nonEmpty(l, "$schema") }},
		{"version is 2.1.0", func(l map[string]any) error { return equal(l["version"], "2.1.0") }},
		{"runs[]: at most 20 runs per file", func(l map[string]any) error {
			runs, _ := l["runs"].([]any)
			if len(runs) == 0 || len(runs) > 20 {
				return fmt.Errorf("%d runs", len(runs))
			}
			return nil
		}},
		{"run.tool.driver.name", func(l map[string]any) error { return nonEmpty(run(l), "tool", "driver", "name") }},
		{"toolComponent.semanticVersion", func(l map[string]any) error { return nonEmpty(run(l), "tool", "driver", "semanticVersion") }},
		{"run.results[]: at most 25,000 per run", func(l map[string]any) error {
			rs, ok := get(run(l), "results").([]any)
			if !ok || len(rs) > 25000 {
				return fmt.Errorf("results missing or too many")
			}
			return nil
		}},
		{"toolComponent.rules[]: at most 25,000 per run", func(l map[string]any) error {
			if n := len(rules(l)); n == 0 || n > 25000 {
				return fmt.Errorf("%d rules", n)
			}
			return nil
		}},
		{"reportingDescriptor.id", func(l map[string]any) error {
			return eachRule(l, func(r map[string]any) error { return nonEmpty(r, "id") })
		}},
		{"reportingDescriptor.shortDescription.text (under 1024 characters)", func(l map[string]any) error {
			return eachRule(l, func(r map[string]any) error { return shortText(r, "shortDescription", "text") })
		}},
		{"reportingDescriptor.fullDescription.text (under 1024 characters)", func(l map[string]any) error {
			return eachRule(l, func(r map[string]any) error { return shortText(r, "fullDescription", "text") })
		}},
		{"reportingDescriptor.help.text", func(l map[string]any) error {
			return eachRule(l, func(r map[string]any) error { return nonEmpty(r, "help", "text") })
		}},
		{"reportingDescriptor.helpUri", func(l map[string]any) error {
			return eachRule(l, func(r map[string]any) error { return nonEmpty(r, "helpUri") })
		}},
		{"result.ruleId names a rule, ruleIndex points at it", func(l map[string]any) error {
			rs := rules(l)
			return each(l, "results", func(r map[string]any) error {
				i, ok := r["ruleIndex"].(float64)
				if !ok || int(i) >= len(rs) || rs[int(i)].(map[string]any)["id"] != r["ruleId"] {
					return fmt.Errorf("ruleId %v, ruleIndex %v", r["ruleId"], r["ruleIndex"])
				}
				return nil
			})
		}},
		{"result.message.text", func(l map[string]any) error {
			return each(l, "results", func(r map[string]any) error { return nonEmpty(r, "message", "text") })
		}},
		{"result.partialFingerprints", func(l map[string]any) error {
			return each(l, "results", func(r map[string]any) error { return nonEmpty(r, "partialFingerprints", fingerprintKey) })
		}},
		{"result.locations[]: at least one, at most 1,000", func(l map[string]any) error {
			return each(l, "results", func(r map[string]any) error {
				locs, _ := r["locations"].([]any)
				if len(locs) == 0 || len(locs) > 1000 {
					return fmt.Errorf("%d locations", len(locs))
				}
				return nil
			})
		}},
		{"location.physicalLocation.artifactLocation.uri, relative to the repository root", func(l map[string]any) error {
			return each(l, "results", func(r map[string]any) error {
				loc := index(r, "locations", 0)
				uri, _ := get(loc, "physicalLocation", "artifactLocation", "uri").(string)
				if uri == "" || strings.HasPrefix(uri, "/") || strings.Contains(uri, "://") || strings.HasPrefix(uri, "../") {
					return fmt.Errorf("uri %q", uri)
				}
				return equal(get(loc, "physicalLocation", "artifactLocation", "uriBaseId"), srcRoot)
			})
		}},
		{"physicalLocation.region: startLine, startColumn, endLine, endColumn", func(l map[string]any) error {
			return each(l, "results", func(r map[string]any) error {
				reg, _ := get(index(r, "locations", 0), "physicalLocation", "region").(map[string]any)
				sl, _ := reg["startLine"].(float64)
				sc, _ := reg["startColumn"].(float64)
				el, _ := reg["endLine"].(float64)
				ec, _ := reg["endColumn"].(float64)
				if sl < 1 || sc < 1 || el < sl || (el == sl && ec <= sc) {
					return fmt.Errorf("region %v", reg)
				}
				return nil
			})
		}},
		{"run.originalUriBaseIds[%SRCROOT%]", func(l map[string]any) error {
			uri, _ := get(run(l), "originalUriBaseIds", srcRoot, "uri").(string)
			if !strings.HasPrefix(uri, "file:///") || !strings.HasSuffix(uri, "/") {
				return fmt.Errorf("uri %q", uri)
			}
			return nil
		}},
		{"runAutomationDetails.id: category/run-id", func(l map[string]any) error {
			id, _ := get(run(l), "automationDetails", "id").(string)
			if !strings.Contains(id, "/") {
				return fmt.Errorf("id %q", id)
			}
			return nil
		}},
	}
}

// TestSARIFGitHubUpload checks the SARIF of a CI run against the SARIF
// 2.1.0 schema and against every requirement in githubRequirements.
func TestSARIFGitHubUpload(t *testing.T) {
	schema := loadSARIFSchema(t)
	// The sample with its file-less and outside-the-repository
	// diagnostics left out: those GitHub cannot place, by design.
	var inRepo List
	for _, d := range sample() {
		if d.Pos.File != "" && !strings.HasPrefix(d.Pos.File, "/") {
			inRepo = append(inRepo, d)
		}
	}
	out := printWith(t, "sarif", ciOptions(), inRepo)
	var log map[string]any
	if err := json.Unmarshal(out, &log); err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(log); err != nil {
		t.Fatalf("not valid SARIF 2.1.0: %v", err)
	}
	if results := get(index(log, "runs", 0), "results").([]any); len(results) == 0 {
		t.Fatal("no results to check")
	}
	for _, req := range githubRequirements() {
		t.Run(req.property, func(t *testing.T) {
			if err := req.check(log); err != nil {
				t.Errorf("%v (required by %s)", err, githubSARIFDoc)
			}
		})
	}
}

func TestSARIFRegionsAndURIs(t *testing.T) {
	out := printWith(t, "sarif", ciOptions(), sample())
	var log sarifLog
	if err := json.Unmarshal(out, &log); err != nil {
		t.Fatal(err)
	}
	type loc struct {
		uri, base string
		region    sarifRegion
	}
	got := map[string]loc{}
	for _, r := range log.Runs[0].Results {
		if len(r.Locations) == 0 || r.Locations[0].PhysicalLocation == nil {
			got[r.RuleID] = loc{}
			continue
		}
		pl := r.Locations[0].PhysicalLocation
		got[fmt.Sprintf("%s@%d", r.RuleID, pl.Region.StartLine)] = loc{uri: pl.ArtifactLocation.URI, base: pl.ArtifactLocation.URIBaseID, region: *pl.Region}
	}
	want := map[string]loc{
		// "      value: ..." ends in \r\n: the \r is not a column.
		"ConnectionTemplateInvalid@17": {uri: "sub/deploy/connections.yaml", base: srcRoot, region: sarifRegion{StartLine: 17, StartColumn: 16, EndLine: 17, EndColumn: 30}},
		"HostNotCovered@7":             {uri: "sub/deploy/connections.yaml", base: srcRoot, region: sarifRegion{StartLine: 7, StartColumn: 10, EndLine: 7, EndColumn: 38}},
		// A column past the end of its line: one character.
		"HostNotCovered@40": {uri: "sub/deploy/connections.yaml", base: srcRoot, region: sarifRegion{StartLine: 40, StartColumn: 10, EndLine: 40, EndColumn: 11}},
		// Columns count code points: "kïnd: nothing" is 13.
		"KindMissing@1": {uri: "sub/a%20b/x,y:z.yaml", base: srcRoot, region: sarifRegion{StartLine: 1, StartColumn: 1, EndLine: 1, EndColumn: 14}},
		"NoPosition":    {},
	}
	for code, w := range want {
		if g := got[code]; g != w {
			t.Errorf("%s: got %+v, want %+v", code, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d results, want %d: %v", len(got), len(want), got)
	}
	if _, ok := got["UnknownKind@3"]; ok {
		t.Error("an info diagnostic is in the SARIF with --min-severity warning")
	}
	if log.Runs[0].Properties["belowMinSeverity"] != 1 {
		t.Errorf("belowMinSeverity = %d, want 1", log.Runs[0].Properties["belowMinSeverity"])
	}
}

func TestSARIFURIOutsideRoot(t *testing.T) {
	tests := map[string]struct {
		o       Options
		file    string
		uri     string
		baseID  string
		located bool
	}{
		"relative, in the repository": {o: ciOptions(), file: "x.yaml", uri: "sub/x.yaml", baseID: srcRoot, located: true},
		"parent of the working dir":   {o: ciOptions(), file: "../top.yaml", uri: "top.yaml", baseID: srcRoot, located: true},
		"absolute, in the repository": {o: ciOptions(), file: "/repo/y.yaml", uri: "y.yaml", baseID: srcRoot, located: true},
		"outside the repository":      {o: ciOptions(), file: "../../etc/x.yaml", uri: "file:///etc/x.yaml", located: true},
		"standard input":              {o: ciOptions(), file: "-"},
		"no root: as given":           {file: "deploy/x.yaml", uri: "deploy/x.yaml", located: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := List{{Code: "KindMissing", Severity: Error, Pos: Pos{File: tc.file, Line: 1}, Object: Object{Kind: "Secret", Name: "s"}, Message: "m"}}
			var log sarifLog
			if err := json.Unmarshal(printWith(t, "sarif", tc.o, ds), &log); err != nil {
				t.Fatal(err)
			}
			locs := log.Runs[0].Results[0].Locations
			if len(locs) != 1 || len(locs[0].LogicalLocations) != 1 {
				t.Fatalf("locations %+v: want one, with the object", locs)
			}
			pl := locs[0].PhysicalLocation
			if !tc.located {
				if pl != nil {
					t.Errorf("physical location %+v for %q", pl, tc.file)
				}
				return
			}
			if pl == nil || pl.ArtifactLocation.URI != tc.uri || pl.ArtifactLocation.URIBaseID != tc.baseID {
				t.Errorf("got %+v, want uri %q base %q", pl, tc.uri, tc.baseID)
			}
		})
	}
}

// TestSARIFFingerprints checks the fingerprint names what a finding is,
// not the line it is on.
func TestSARIFFingerprints(t *testing.T) {
	conn := Object{Kind: "Connection", Namespace: "agents", Name: "gh"}
	base := Diagnostic{Code: "ConnectionHostNotInjected", Severity: Warning, Pos: Pos{File: "c.yaml", Line: 7, Column: 5}, Object: conn, Path: "spec.hosts[1]", Message: "host github.com has no inject entry"}
	fp := func(ds ...Diagnostic) []string {
		var log sarifLog
		if err := json.Unmarshal(printWith(t, "sarif", ciOptions(), ds), &log); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range log.Runs[0].Results {
			out = append(out, r.PartialFingerprints[fingerprintKey])
		}
		return out
	}
	with := func(f func(*Diagnostic)) Diagnostic { d := base; f(&d); return d }
	same := map[string]Diagnostic{
		"moved down by an edit above": with(func(d *Diagnostic) { d.Pos.Line = 12 }),
		"reworded message":            with(func(d *Diagnostic) { d.Message = "host github.com: no inject entry covers it" }),
	}
	differ := map[string]Diagnostic{
		"another code":   with(func(d *Diagnostic) { d.Code = "ConnectionRuleShadowed" }),
		"another file":   with(func(d *Diagnostic) { d.Pos.File = "d.yaml" }),
		"another object": with(func(d *Diagnostic) { d.Object.Name = "gl" }),
		"another field":  with(func(d *Diagnostic) { d.Path = "spec.hosts[2]" }),
	}
	want := fp(base)[0]
	if !strings.HasSuffix(want, ":1") {
		t.Errorf("fingerprint %q does not end in its occurrence :1", want)
	}
	for name, d := range same {
		if got := fp(d)[0]; got != want {
			t.Errorf("%s: fingerprint changed from %s to %s", name, want, got)
		}
	}
	for name, d := range differ {
		if got := fp(d)[0]; got == want {
			t.Errorf("%s: fingerprint stayed %s", name, got)
		}
	}
	twice := fp(base, with(func(d *Diagnostic) { d.Pos.Line = 9; d.Message = "again" }))
	if twice[0] == twice[1] || strings.TrimSuffix(twice[0], ":1") != strings.TrimSuffix(twice[1], ":2") {
		t.Errorf("two findings on one field: %v, want one hash with :1 and :2", twice)
	}
	noObject := Diagnostic{Code: "YAMLInvalid", Severity: Error, Pos: Pos{File: "c.yaml", Line: 3}, Message: "mapping values are not allowed here"}
	other := noObject
	other.Message = "did not find expected key"
	if fp(noObject)[0] == fp(other)[0] {
		t.Error("two different syntax errors in one file share a fingerprint")
	}
}

func TestGitHubAnnotationCap(t *testing.T) {
	var ds List
	for i := range 25 {
		ds = append(ds, Diagnostic{Code: "KindMissing", Severity: Error, Pos: Pos{File: "e.yaml", Line: i + 1, Column: 1}, Message: fmt.Sprintf("error %d", i+1)})
	}
	for i := range 3 {
		ds = append(ds, Diagnostic{Code: "HostNotCovered", Severity: Warning, Pos: Pos{File: "w.yaml", Line: i + 1, Column: 1}, Message: "warning\n::error::injected"})
	}
	ds = append(ds, Diagnostic{Code: "UnknownKind", Severity: Info, Pos: Pos{File: "i.yaml", Line: 1}, Message: "info"})
	out := string(printWith(t, "github", Options{MinSeverity: Warning}, ds))
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	count := map[string]int{}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "::error "):
			count["error"]++
		case strings.HasPrefix(l, "::warning "):
			count["warning"]++
		case strings.HasPrefix(l, "::"):
			t.Errorf("unexpected command %q", l)
		case strings.HasPrefix(l, "e.yaml:"):
			count["plain"]++
		}
	}
	if count["error"] != annotationsPerLevel || count["warning"] != 3 || count["plain"] != 15 {
		t.Errorf("got %v: want 10 error annotations, 3 warnings, the other 15 errors as plain lines\n%s", count, out)
	}
	summary := lines[len(lines)-1]
	for _, want := range []string{"25 errors, 3 warnings, 1 info", "1 below warning not shown", "15 not annotated"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q does not say %q", summary, want)
		}
	}
}

func TestDefaultMinSeverity(t *testing.T) {
	want := map[string]Severity{"sarif": Warning, "github": Warning, "gitlab": Warning, "junit": Warning, "text": Info, "json": Info}
	for _, f := range Formats() {
		if got := DefaultMinSeverity(f); got != want[f] {
			t.Errorf("%s: %s, want %s", f, got, want[f])
		}
	}
	// text and json drop what is below the threshold too.
	for _, f := range []string{"text", "json"} {
		out := printWith(t, f, Options{MinSeverity: Error}, sample())
		if bytes.Contains(out, []byte("HostNotCovered")) {
			t.Errorf("%s printed a warning with MinSeverity error:\n%s", f, out)
		}
	}
}

// index and get walk decoded JSON.
func index(m map[string]any, key string, i int) map[string]any {
	l, _ := m[key].([]any)
	if i >= len(l) {
		return nil
	}
	v, _ := l[i].(map[string]any)
	return v
}

func get(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

func nonEmpty(m map[string]any, keys ...string) error {
	if s, ok := get(m, keys...).(string); !ok || s == "" {
		return fmt.Errorf("%s is missing or empty", strings.Join(keys, "."))
	}
	return nil
}

func shortText(m map[string]any, keys ...string) error {
	if err := nonEmpty(m, keys...); err != nil {
		return err
	}
	if n := len([]rune(get(m, keys...).(string))); n >= 1024 {
		return fmt.Errorf("%s is %d characters", strings.Join(keys, "."), n)
	}
	return nil
}

func equal(got, want any) error {
	if got != want {
		return fmt.Errorf("got %v, want %v", got, want)
	}
	return nil
}
