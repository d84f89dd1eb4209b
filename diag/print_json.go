package diag

import (
	"encoding/json"
	"io"
)

// jsonReport is the json format: one JSON document holding every
// diagnostic (suppressed and info ones included) and a summary. Its shape
// is documented in docs/checks.md; it is kept apart from the domain types
// so that they can change without breaking the scripts that read it.
type jsonReport struct {
	Diagnostics []jsonDiagnostic `json:"diagnostics"`
	Summary     jsonSummary      `json:"summary"`
}

// jsonDiagnostic is the wire form of one diagnostic.
type jsonDiagnostic struct {
	Code       string   `json:"code"`
	Severity   string   `json:"severity"`
	File       string   `json:"file"`
	Line       int      `json:"line"`
	Column     int      `json:"column"`
	Object     Object   `json:"object"`
	Path       string   `json:"path"`
	Message    string   `json:"message"`
	Suppressed string   `json:"suppressed,omitempty"`
	Units      []string `json:"units,omitempty"`
}

// jsonSummary counts what was checked and found. Errors, warnings and
// info count the unsuppressed diagnostics, as the exit status does.
type jsonSummary struct {
	Documents  int         `json:"documents"`
	Objects    int         `json:"objects"`
	Errors     int         `json:"errors"`
	Warnings   int         `json:"warnings"`
	Info       int         `json:"info"`
	Suppressed int         `json:"suppressed"`
	Skipped    Skipped     `json:"skipped"`
	Units      []string    `json:"units"`
	Built      []BuiltUnit `json:"built"`
}

type jsonPrinter struct{}

func (jsonPrinter) Print(w io.Writer, ds List, sum Summary, _ map[string]Rule) error {
	r := jsonReport{
		Diagnostics: []jsonDiagnostic{},
		Summary: jsonSummary{
			Documents: sum.Documents,
			Objects:   sum.Objects,
			Errors:    ds.Count(Error),
			Warnings:  ds.Count(Warning),
			Info:      ds.Count(Info),
			Skipped:   sum.Skipped,
			Units:     sum.Units,
			Built:     sum.Built,
		},
	}
	if r.Summary.Units == nil {
		r.Summary.Units = []string{}
	}
	if r.Summary.Built == nil {
		r.Summary.Built = []BuiltUnit{}
	}
	for _, d := range sorted(ds) {
		if d.Suppressed != "" {
			r.Summary.Suppressed++
		}
		r.Diagnostics = append(r.Diagnostics, jsonDiagnostic{
			Code:       d.Code,
			Severity:   d.Severity.String(),
			File:       d.Pos.File,
			Line:       d.Pos.Line,
			Column:     d.Pos.Column,
			Object:     d.Object,
			Path:       d.Path,
			Message:    d.Message,
			Suppressed: d.Suppressed,
			Units:      d.Units,
		})
	}
	return safely(w, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	})
}
