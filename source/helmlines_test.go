package source

import (
	"testing"

	"keyhole.dev/keyhole/diag"
)

// A document a Helm template wrote is placed at the template's lines: its
// Pos, each node's Where, and At for a position in the rendered text (as
// the schema validator gives one); Identity keeps its place in the
// rendered text, for counting.
func TestHelmTemplateLines(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"chart/Chart.yaml":             helmChart,
		"chart/values.yaml":            "enabled: true\n",
		"chart/templates/_helpers.tpl": "{{- define \"l\" -}}\na: b\nc: d\ne: f\n{{- end }}\n",
		"chart/templates/conn.yaml": `{{- if .Values.enabled -}}
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: github
  labels:
    {{- include "l" . | nindent 4 }}
spec:
  credential: {kind: secret, secretRef: {name: {{ .Release.Name }}-token}}
{{- end }}
`,
	})
	docs, _, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c := helmObjects(t, docs)["Connection /github"]
	if c == nil {
		t.Fatalf("not rendered: %q", docIDs(docs))
	}
	file := "chart/templates/conn.yaml"
	if want := (diag.Pos{File: file, Line: 2, Column: 1}); c.Pos != want {
		t.Errorf("Pos %v, want %v", c.Pos, want)
	}
	if want := (diag.Pos{File: file, Line: 1, Column: 1}); c.Identity() != want {
		t.Errorf("Identity %v, want %v (the rendered text's)", c.Identity(), want)
	}
	name := Lookup(Lookup(c.Node, "metadata"), "name")
	ref := Lookup(Lookup(Lookup(Lookup(c.Node, "spec"), "credential"), "secretRef"), "name")
	for what, tc := range map[string]struct {
		got  diag.Pos
		want diag.Pos
	}{
		"a plain line":                                {got: where(c.Where(name)), want: diag.Pos{File: file, Line: 5, Column: 9}},
		"a value an action wrote, at its column":      {got: where(c.Where(ref)), want: diag.Pos{File: file, Line: 9, Column: 48}},
		"a column inside it, past the action's start": {got: where(c.WhereColumn(ref, ref.Column+3)), want: diag.Pos{File: file, Line: 9, Column: 48}},
		"a label the include wrote":                   {got: where(c.Where(Lookup(Lookup(Lookup(c.Node, "metadata"), "labels"), "e"))), want: diag.Pos{File: file, Line: 7, Column: 5}},
		"At, a rendered position":                     {got: where(c.At(name.Line, name.Column, "metadata.name")), want: diag.Pos{File: file, Line: 5, Column: 9}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", what, tc.got, tc.want)
		}
	}
	// Past the rendered text's lines, a position stays as it is.
	if got := templatePos(c.from.lines, file, 99, 3); got != (diag.Pos{File: file, Line: 99, Column: 3}) {
		t.Errorf("line 99 placed at %v", got)
	}
}

func where(pos diag.Pos, _ string) diag.Pos { return pos }
