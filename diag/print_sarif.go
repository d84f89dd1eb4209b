package diag

import (
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strings"
)

// SARIF identifies the output as SARIF 2.1.0, the version GitHub code
// scanning and other viewers read.
const (
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	sarifVersion = "2.1.0"
	// toolURI is where the SARIF viewer links the tool's name to.
	toolURI = "https://keyhole.dev"
)

// The SARIF wire types: only the properties keyhole fills.
type (
	sarifLog struct {
		Schema  string     `json:"$schema"`
		Version string     `json:"version"`
		Runs    []sarifRun `json:"runs"`
	}
	sarifRun struct {
		Tool       sarifTool      `json:"tool"`
		Results    []sarifResult  `json:"results"`
		ColumnKind string         `json:"columnKind"`
		Properties map[string]int `json:"properties,omitempty"`
	}
	sarifTool struct {
		Driver sarifDriver `json:"driver"`
	}
	sarifDriver struct {
		Name           string      `json:"name"`
		InformationURI string      `json:"informationUri"`
		Rules          []sarifRule `json:"rules"`
	}
	sarifRule struct {
		ID                   string        `json:"id"`
		ShortDescription     *sarifMessage `json:"shortDescription,omitempty"`
		Help                 *sarifMessage `json:"help,omitempty"`
		DefaultConfiguration sarifConfig   `json:"defaultConfiguration"`
	}
	sarifConfig struct {
		Level string `json:"level"`
	}
	sarifMessage struct {
		Text string `json:"text"`
	}
	sarifResult struct {
		RuleID       string             `json:"ruleId"`
		RuleIndex    int                `json:"ruleIndex"`
		Level        string             `json:"level"`
		Message      sarifMessage       `json:"message"`
		Locations    []sarifLocation    `json:"locations,omitempty"`
		Suppressions []sarifSuppression `json:"suppressions,omitempty"`
		Properties   map[string]string  `json:"properties,omitempty"`
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
		URI string `json:"uri"`
	}
	sarifRegion struct {
		StartLine   int `json:"startLine"`
		StartColumn int `json:"startColumn,omitempty"`
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

// sarifPrinter writes one SARIF 2.1.0 log with one run. Every rule in the
// table is listed (sorted by code) so that viewers can show rule help even
// for codes this run did not raise. Suppressed diagnostics are listed with
// SARIF's own suppressions, which viewers hide by default.
type sarifPrinter struct{}

func (sarifPrinter) Print(w io.Writer, ds List, sum Summary, rules map[string]Rule) error {
	ds = sorted(ds)
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
		r, known := rules[code]
		rule := sarifRule{ID: code, DefaultConfiguration: sarifConfig{Level: sarifLevel(r.Severity)}}
		if !known {
			rule.DefaultConfiguration.Level = "warning" // SARIF's own default
		}
		if r.Purpose != "" {
			rule.ShortDescription = &sarifMessage{Text: r.Purpose}
		}
		if r.Help != "" {
			rule.Help = &sarifMessage{Text: r.Help}
		}
		sr = append(sr, rule)
	}
	results := make([]sarifResult, 0, len(ds))
	for _, d := range ds {
		res := sarifResult{
			RuleID:    d.Code,
			RuleIndex: index[d.Code],
			Level:     sarifLevel(d.Severity),
			Message:   sarifMessage{Text: d.Message},
		}
		var loc sarifLocation
		if d.Pos.File != "" {
			loc.PhysicalLocation = &sarifPhysical{ArtifactLocation: sarifArtifact{URI: sarifURI(d.Pos.File)}}
			if d.Pos.Line > 0 {
				loc.PhysicalLocation.Region = &sarifRegion{StartLine: d.Pos.Line, StartColumn: d.Pos.Column}
			}
		}
		if d.Object.Kind != "" {
			loc.LogicalLocations = []sarifLogical{{FullyQualifiedName: d.Object.String(), Kind: "resource"}}
		}
		if loc.PhysicalLocation != nil || loc.LogicalLocations != nil {
			res.Locations = []sarifLocation{loc}
		}
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
	log := sarifLog{
		Schema:  sarifSchema,
		Version: sarifVersion,
		Runs: []sarifRun{{
			Tool:       sarifTool{Driver: sarifDriver{Name: "keyhole", InformationURI: toolURI, Rules: sr}},
			Results:    results,
			ColumnKind: "unicodeCodePoints", // yaml.v3 counts columns in characters
			Properties: map[string]int{"documents": sum.Documents, "objects": sum.Objects},
		}},
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(log)
}

// sarifURI turns a slash-separated path into a URI reference: relative
// paths stay relative (resolved against the checkout by viewers),
// absolute ones become file URIs, and characters that URIs reserve are
// percent-encoded.
func sarifURI(p string) string {
	if strings.HasPrefix(p, "/") {
		return (&url.URL{Scheme: "file", Path: p}).String()
	}
	return (&url.URL{Path: p}).String()
}
