package diag

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SARIF identifies the output as SARIF 2.1.0, the version GitHub code
// scanning and other viewers read.
const (
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	sarifVersion = "2.1.0"
	// toolURI is where the SARIF viewer links the tool's name to.
	toolURI = "https://keyhole.dev"
	// srcRoot is the uriBaseId of every file in the repository: GitHub
	// resolves it against the checkout.
	srcRoot = "%SRCROOT%"
	// fingerprintKey names keyhole's partialFingerprints entry; the
	// version after the slash changes only if the way it is computed
	// does, which would reopen every alert.
	fingerprintKey = "keyhole/v1"
)

// The SARIF wire types: only the properties keyhole fills.
type (
	sarifLog struct {
		Schema  string     `json:"$schema"`
		Version string     `json:"version"`
		Runs    []sarifRun `json:"runs"`
	}
	sarifRun struct {
		Tool               sarifTool                `json:"tool"`
		AutomationDetails  sarifAutomation          `json:"automationDetails"`
		OriginalURIBaseIDs map[string]sarifArtifact `json:"originalUriBaseIds,omitempty"`
		Results            []sarifResult            `json:"results"`
		ColumnKind         string                   `json:"columnKind"`
		Properties         map[string]int           `json:"properties,omitempty"`
	}
	sarifAutomation struct {
		ID string `json:"id"`
	}
	sarifTool struct {
		Driver sarifDriver `json:"driver"`
	}
	sarifDriver struct {
		Name            string      `json:"name"`
		Version         string      `json:"version,omitempty"`
		SemanticVersion string      `json:"semanticVersion,omitempty"`
		InformationURI  string      `json:"informationUri"`
		Rules           []sarifRule `json:"rules"`
	}
	sarifRule struct {
		ID                   string       `json:"id"`
		Name                 string       `json:"name"`
		ShortDescription     sarifMessage `json:"shortDescription"`
		FullDescription      sarifMessage `json:"fullDescription"`
		Help                 sarifMessage `json:"help"`
		HelpURI              string       `json:"helpUri,omitempty"`
		DefaultConfiguration sarifConfig  `json:"defaultConfiguration"`
	}
	sarifConfig struct {
		Level string `json:"level"`
	}
	sarifMessage struct {
		Text     string `json:"text"`
		Markdown string `json:"markdown,omitempty"`
	}
	sarifResult struct {
		RuleID              string             `json:"ruleId"`
		RuleIndex           int                `json:"ruleIndex"`
		Level               string             `json:"level"`
		Message             sarifMessage       `json:"message"`
		Locations           []sarifLocation    `json:"locations,omitempty"`
		PartialFingerprints map[string]string  `json:"partialFingerprints"`
		Suppressions        []sarifSuppression `json:"suppressions,omitempty"`
		Properties          map[string]string  `json:"properties,omitempty"`
	}
	sarifLocation struct {
		PhysicalLocation *sarifPhysical `json:"physicalLocation,omitempty"`
		LogicalLocations []sarifLogical `json:"logicalLocations,omitempty"`
	}
	sarifPhysical struct {
		ArtifactLocation sarifArtifact `json:"artifactLocation"`
		Region           *sarifRegion  `json:"region,omitempty"`
	}
	sarifArtifact struct {
		URI       string `json:"uri"`
		URIBaseID string `json:"uriBaseId,omitempty"`
	}
	sarifRegion struct {
		StartLine   int `json:"startLine"`
		StartColumn int `json:"startColumn"`
		EndLine     int `json:"endLine"`
		EndColumn   int `json:"endColumn"`
	}
	sarifLogical struct {
		FullyQualifiedName string `json:"fullyQualifiedName"`
		Kind               string `json:"kind"`
	}
	sarifSuppression struct {
		Kind          string `json:"kind"`
		Justification string `json:"justification,omitempty"`
	}
)

// sarifLevel maps a severity to SARIF's result level.
func sarifLevel(s Severity) string {
	switch s {
	case Warning:
		return "warning"
	case Info:
		return "note"
	}
	return "error"
}

// sarifPrinter writes one SARIF 2.1.0 log with one run, in the form
// GitHub code scanning documents for uploads: every rule with its
// descriptions and help, every result with a full region in a file
// relative to the repository root (%SRCROOT%) and a fingerprint that
// survives edits elsewhere in the file. Every rule in the table is listed
// (sorted by code), so that viewers can show rule help even for codes this
// run did not raise. Diagnostics below Options.MinSeverity are left out;
// suppressed ones are listed with SARIF's own suppressions, which viewers
// hide by default.
type sarifPrinter struct{ o Options }

func (p sarifPrinter) Print(w io.Writer, ds List, sum Summary, rules map[string]Rule) error {
	ds, below := atLeast(sorted(ds), p.o.MinSeverity)
	codes := make([]string, 0, len(rules))
	for code := range rules {
		codes = append(codes, code)
	}
	for _, d := range ds {
		if _, ok := rules[d.Code]; !ok && !slices.Contains(codes, d.Code) {
			codes = append(codes, d.Code)
		}
	}
	slices.Sort(codes)
	index := map[string]int{}
	sr := make([]sarifRule, 0, len(codes))
	for i, code := range codes {
		index[code] = i
		sr = append(sr, p.rule(code, rules[code]))
	}
	src := sourceCache{read: p.o.Source, files: map[string][][]byte{}}
	seen := map[string]int{}
	results := make([]sarifResult, 0, len(ds))
	for _, d := range ds {
		file := p.o.repoPath(d.Pos.File)
		res := sarifResult{
			RuleID:    d.Code,
			RuleIndex: index[d.Code],
			Level:     sarifLevel(d.Severity),
			Message:   sarifMessage{Text: d.Message},
		}
		var loc sarifLocation
		if file != "" && file != "-" {
			loc.PhysicalLocation = &sarifPhysical{
				ArtifactLocation: sarifArtifactFor(file, p.o.Root != "" && p.o.WorkDir != ""),
				Region:           src.region(d.Pos),
			}
		}
		if d.Object.Kind != "" {
			loc.LogicalLocations = []sarifLogical{{FullyQualifiedName: d.Object.String(), Kind: "resource"}}
		}
		if loc.PhysicalLocation != nil || loc.LogicalLocations != nil {
			res.Locations = []sarifLocation{loc}
		}
		res.PartialFingerprints = map[string]string{fingerprintKey: fingerprint(d, file, seen)}
		if d.Suppressed != "" {
			kind := "external"
			if d.Suppressed == "annotation" {
				kind = "inSource"
			}
			res.Suppressions = []sarifSuppression{{Kind: kind, Justification: "suppressed by " + d.Suppressed}}
		}
		if d.Path != "" {
			res.Properties = map[string]string{"path": d.Path}
		}
		results = append(results, res)
	}
	category := p.o.Category
	if category == "" {
		category = "keyhole"
	}
	run := sarifRun{
		Tool: sarifTool{Driver: sarifDriver{
			Name:            "keyhole",
			Version:         p.o.Version,
			SemanticVersion: p.o.SemanticVersion,
			InformationURI:  toolURI,
			Rules:           sr,
		}},
		AutomationDetails: sarifAutomation{ID: category + "/"},
		Results:           results,
		ColumnKind:        "unicodeCodePoints", // yaml.v3 counts columns in characters
		Properties:        map[string]int{"documents": sum.Documents, "objects": sum.Objects, "belowMinSeverity": below},
	}
	if p.o.Root != "" && p.o.WorkDir != "" {
		root := (&url.URL{Scheme: "file", Path: strings.TrimSuffix(p.o.Root, "/") + "/"}).String()
		run.OriginalURIBaseIDs = map[string]sarifArtifact{srcRoot: {URI: root}}
	}
	log := sarifLog{Schema: sarifSchema, Version: sarifVersion, Runs: []sarifRun{run}}
	return safely(w, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(log)
	})
}

// rule is the reportingDescriptor of a code. GitHub shows the short
// description as the alert's title, the full one under it and the help
// in the rule's panel; each must be there, so a code missing from the
// table (which the tests keep from happening) still gets a text.
func (p sarifPrinter) rule(code string, r Rule) sarifRule {
	purpose, help := r.Purpose, r.Help
	level := sarifLevel(r.Severity)
	if r.Code == "" {
		purpose = "keyhole diagnostic " + code + "."
		help = "See the message of each result."
		level = "warning" // SARIF's own default
	}
	out := sarifRule{
		ID:                   code,
		Name:                 code,
		ShortDescription:     sarifMessage{Text: firstSentence(purpose)},
		FullDescription:      sarifMessage{Text: purpose},
		Help:                 sarifMessage{Text: help, Markdown: "**What it catches.** " + purpose + "\n\n**How to fix it.** " + help},
		DefaultConfiguration: sarifConfig{Level: level},
	}
	if p.o.HelpURI != nil {
		out.HelpURI = p.o.HelpURI(code)
	}
	return out
}

// firstSentence is s up to the end of its first sentence: a ". " or the
// end, whichever comes first.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// sarifArtifactFor locates a file given relative to the repository root
// (inRepo) or, failing that, as a URI reference: absolute paths become
// file URIs, and characters that URIs reserve are percent-encoded.
func sarifArtifactFor(file string, inRepo bool) sarifArtifact {
	if path.IsAbs(file) {
		return sarifArtifact{URI: (&url.URL{Scheme: "file", Path: file}).String()}
	}
	a := sarifArtifact{URI: (&url.URL{Path: file}).String()}
	if inRepo {
		a.URIBaseID = srcRoot
	}
	return a
}

// fingerprint identifies a result across runs by what it is about, not
// where: its code, file, object and field path (a line moved by an edit
// above it keeps its alert). Only a diagnostic about no object and no
// field (a YAML syntax error, say) falls back to its message. Results
// that share all of that are told apart by their order in the file, as
// GitHub's own primaryLocationLineHash does: "<hash>:<n>".
func fingerprint(d Diagnostic, file string, seen map[string]int) string {
	parts := []string{d.Code, file, d.Object.String(), d.Path}
	if d.Object.Kind == "" && d.Path == "" {
		parts = append(parts, d.Message)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	h := hex.EncodeToString(sum[:16])
	seen[h]++
	return h + ":" + strconv.Itoa(seen[h])
}

// sourceCache reads each file once, split into lines.
type sourceCache struct {
	read  func(string) ([]byte, error)
	files map[string][][]byte
}

// region is the full region of a position: from its column to the end of
// its line (columns in code points, the end exclusive). A position with
// no line is the file's first line; one whose line cannot be read is one
// character wide.
func (c sourceCache) region(p Pos) *sarifRegion {
	r := &sarifRegion{StartLine: max(p.Line, 1), StartColumn: max(p.Column, 1)}
	r.EndLine, r.EndColumn = r.StartLine, r.StartColumn+1
	lines, ok := c.files[p.File]
	if !ok && c.read != nil {
		if b, err := c.read(p.File); err == nil {
			lines = bytes.Split(b, []byte("\n"))
		}
		c.files[p.File] = lines
	}
	if r.StartLine <= len(lines) {
		line := bytes.TrimSuffix(lines[r.StartLine-1], []byte("\r"))
		if end := utf8.RuneCount(line) + 1; end > r.StartColumn {
			r.EndColumn = end
		}
	}
	return r
}
