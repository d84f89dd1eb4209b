package diag

import (
	"encoding/json"
	"io"
)

// jsonDiagnostic is the wire form of one diagnostic in the json format.
// It is kept apart from Diagnostic so that the domain type can change
// without breaking the scripts that read this output.
type jsonDiagnostic struct {
	Code       string `json:"code"`
	Severity   string `json:"severity"`
	File       string `json:"file"`
	Line       int    `json:"line"`
	Column     int    `json:"column"`
	Object     Object `json:"object"`
	Path       string `json:"path"`
	Message    string `json:"message"`
	Suppressed string `json:"suppressed,omitempty"`
}

// jsonPrinter writes JSON Lines: one object per diagnostic, suppressed ones
// included (with "suppressed" set), and nothing else — no summary object,
// so every line has the same shape and `jq` or a line-by-line reader needs
// no special case. No diagnostics means no output.
type jsonPrinter struct{}

func (jsonPrinter) Print(w io.Writer, ds List, _ Summary, _ map[string]Rule) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, d := range sorted(ds) {
		err := enc.Encode(jsonDiagnostic{
			Code:       d.Code,
			Severity:   d.Severity.String(),
			File:       d.Pos.File,
			Line:       d.Pos.Line,
			Column:     d.Pos.Column,
			Object:     d.Object,
			Path:       d.Path,
			Message:    d.Message,
			Suppressed: d.Suppressed,
		})
		if err != nil {
			return err
		}
	}
	return nil
}
