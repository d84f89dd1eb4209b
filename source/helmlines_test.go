package source

import (
	"strings"
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
	// Past the rendered text's lines (its end, where a syntax error may
	// stand), a position is at the template's line that wrote the last
	// one, never past the template's 10 lines.
	if got := templatePos(c.from.lines, file, 99, 1); got != (diag.Pos{File: file, Line: 10, Column: 1}) {
		t.Errorf("line 99 placed at %v", got)
	}
}

func where(pos diag.Pos, _ string) diag.Pos { return pos }

// An app of apps written as a Helm chart whose one template ranges over
// its values: what is said of each Application it writes is at the
// template's lines, each pass at the range block's, never past the
// template's 17 lines (the second Application starts at line 18 of the
// rendered text).
func TestHelmAppOfAppsRangeLines(t *testing.T) {
	dir := t.TempDir()
	const tmpl = `{{- range .Values.applications }}
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: {{ .name }}
  namespace: argocd
spec:
  project: default
  source:
    repoURL: https://github.com/example/apps
    targetRevision: HEAD
    path: {{ .name }}
  destination:
    server: https://kubernetes.default.svc
    namespace: {{ .name }}
---
{{ end -}}
`
	writeFiles(t, dir, map[string]string{
		"apps/Chart.yaml":                  "apiVersion: v2\nname: apps\nversion: 0.1.0\n",
		"apps/values.yaml":                 "applications:\n  - name: guestbook\n  - name: agents\n  - name: gone\n",
		"apps/templates/applications.yaml": tmpl,
		"agents/conn.yaml":                 connection,
		"guestbook/cm.yaml":                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: guestbook\ndata: {a: b}\n",
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	file := "apps/templates/applications.yaml"
	want := map[string]diag.Pos{
		"argocd/guestbook not built":   {File: file, Line: 2, Column: 1},  // the Application's first line
		"argocd/agents applies":        {File: file, Line: 2, Column: 1},  // the same, on the second pass
		"argocd/gone builds gone from": {File: file, Line: 10, Column: 5}, // its repoURL, on the third
	}
	for _, d := range ds {
		if d.Pos.File == file && d.Pos.Line > 17 {
			t.Errorf("placed past the template's 17 lines: %v", d)
		}
		for what, pos := range want {
			if strings.Contains(d.Message, what) {
				if d.Pos != pos {
					t.Errorf("%q said at %v, want %v", what, d.Pos, pos)
				}
				delete(want, what)
			}
		}
	}
	for what := range want {
		t.Errorf("nothing said of %q: %v", what, ds)
	}
	c := helmObjects(t, docs)["Connection agents/github-acme"]
	if c == nil {
		t.Fatalf("the Application's path was not built: %q %v", docIDs(docs), ds)
	}
	if got, want := c.Unit().Decl, (diag.Pos{File: file, Line: 2, Column: 1}); got != want {
		t.Errorf("the unit declared at %v, want %v", got, want)
	}
}
