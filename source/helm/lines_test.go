package helm

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	"sigs.k8s.io/yaml"

	"keyhole.dev/keyhole/source"
)

// helpers is a chart's _helpers.tpl as `helm create` writes it: labels
// an include writes on several lines.
const helpers = `{{- define "web.labels" -}}
app.kubernetes.io/name: web
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}
`

// renderTemplate renders tmpl as templates/t.yaml of a chart with the
// helpers above and values, as Helm renders it.
func renderTemplate(t *testing.T, tmpl, values string) string {
	t.Helper()
	files := []*archive.BufferedFile{
		{Name: "Chart.yaml", Data: []byte("apiVersion: v2\nname: web\nversion: 0.1.0\n")},
		{Name: "values.yaml", Data: []byte(values)},
		{Name: "templates/_helpers.tpl", Data: []byte(helpers)},
		{Name: "templates/t.yaml", Data: []byte(tmpl)},
	}
	ch, err := chartloader.LoadFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		t.Fatal(err)
	}
	out, err := renderChart(ch, vals, &source.HelmOverlay{ReleaseName: "release-name", Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	return out["web/templates/t.yaml"]
}

// mapped is where lines place column col of line (1-based) of the
// output, as source places a node there.
func mapped(lines []source.TemplateLine, line, col int) string {
	l := lines[line-1]
	if col > int(l.Same)+1 {
		col = int(l.Column)
	}
	return fmt.Sprintf("%d:%d", l.Line, col)
}

// at is the line and column (1-based, in characters) of the n-th (from
// 1) occurrence of what in out.
func at(t *testing.T, out, what string, n int) (int, int) {
	t.Helper()
	for i, l := range splitLines(out) {
		if k := strings.Index(l, what); k >= 0 {
			if n--; n == 0 {
				return i + 1, utf8.RuneCountInString(l[:k]) + 1
			}
		}
	}
	t.Fatalf("%q (%d) not in the output:\n%s", what, n, out)
	return 0, 0
}

// TestTemplateLines: each line of a template's output, as Helm renders
// it, is placed at the template's line that wrote it: a line written as
// it is at its own line and column, below a multi-line include too; one
// an action wrote at the action's line, at its own column as far as the
// line reads as the template's, else at the action's; a range block's
// lines at the block's lines on each pass.
func TestTemplateLines(t *testing.T) {
	cases := map[string]struct {
		tmpl, values string
		// want maps what is found in the output (the n-th time, after a
		// #n suffix) to its line:column in the template.
		want map[string]string
	}{
		"below an include with nindent": {
			tmpl: "apiVersion: v1\nkind: Connection\nmetadata:\n  name: {{ .Release.Name }}-api\n  labels:\n    {{- include \"web.labels\" . | nindent 4 }}\nspec:\n  placement:\n        basic: {usernameKey: email, passwordKey: tokne}\n        value: 'Bearer {{ \"{{ .tokne }}\" }}'\n",
			want: map[string]string{
				"passwordKey":                "9:37",
				".tokne":                     "10:27",
				"spec:":                      "7:1",
				"release-name-api":           "4:9",
				"app.kubernetes.io/instance": "6:5",
				"managed-by: Helm":           "6:5",
				"Helm":                       "6:5",
			},
		},
		"a condition joining the first line": {
			tmpl:   "{{- if .Values.enabled -}}\napiVersion: v1\nkind: Connection\nmetadata:\n  labels:\n    {{- include \"web.labels\" . | nindent 4 }}\nspec:\n  key: tokne\n{{- end }}\n",
			values: "enabled: true\n",
			want:   map[string]string{"apiVersion": "2:1", "key: tokne": "8:3", "spec:": "7:1"},
		},
		"a range block, each pass at the block's lines": {
			tmpl:   "{{- range .Values.conns }}\n---\napiVersion: v1\nkind: Connection\nmetadata:\n  name: {{ .name }}\n  labels:\n    {{- include \"web.labels\" $ | nindent 4 }}\nspec:\n  key: tokne\n{{- end }}\n",
			values: "conns: [{name: a}, {name: b}, {name: c}]\n",
			want: map[string]string{
				"key: tokne#1": "10:3", "key: tokne#2": "10:3", "key: tokne#3": "10:3",
				"name: a": "6:3", "name: b": "6:3", "name: c": "6:3",
				"kind#3": "4:1", "spec:#2": "9:1",
			},
		},
		"a range block writing whole documents, its end trimming the break before it": {
			tmpl:   "{{- range .Values.applications }}\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {{ .name }}\n  namespace: argocd\nspec:\n  source:\n    path: {{ .name }}\n---\n{{ end -}}\n",
			values: "applications: [{name: guestbook}, {name: agents}]\n",
			want: map[string]string{
				"apiVersion#1": "2:1", "apiVersion#2": "2:1",
				"guestbook#1": "5:9", "agents#1": "5:9", "agents#2": "9:11",
				"---#2": "10:1",
			},
		},
		"values a range writes, one line each": {
			tmpl:   "hosts:\n{{- range .Values.hosts }}\n  - {{ . }}\n{{- end }}\nspec: {}\n",
			values: "hosts: [a.example.com, b.example.com]\n",
			want:   map[string]string{"a.example.com": "3:5", "b.example.com": "3:5", "spec": "5:1"},
		},
		"toYaml under a with, and a define of the template's own": {
			tmpl:   "{{- define \"own\" }}\nkind: Nothing\n{{- end }}\nmetadata:\n  {{- with .Values.annotations }}\n  annotations:\n    {{- toYaml . | nindent 4 }}\n  {{- end }}\nspec:\n  key: tokne\n",
			values: "annotations: {a: '1', deep: x}\n",
			want:   map[string]string{"annotations:": "6:3", "a: ": "7:5", "deep": "7:5", "key: tokne": "10:3"},
		},
		"tpl of a value": {
			tmpl:   "metadata:\n  labels:\n{{ tpl .Values.extra . | indent 4 }}\nspec:\n  key: tokne\n",
			values: "extra: \"x: {{ .Release.Name }}\\ny: z\\n\"\n",
			want:   map[string]string{"x: release-name": "3:1", "y: z": "3:1", "key: tokne": "5:3"},
		},
		"two documents in one template": {
			tmpl: "apiVersion: v1\nkind: Secret\nmetadata:\n  labels:\n    {{- include \"web.labels\" . | nindent 4 }}\n---\napiVersion: v1\nkind: Connection\nspec:\n  key: tokne\n",
			want: map[string]string{"---": "6:1", "kind: Connection": "8:1", "key: tokne": "10:3"},
		},
		"CRLF line breaks": {
			tmpl: "apiVersion: v1\r\nkind: Connection\r\nmetadata:\r\n  labels:\r\n    {{- include \"web.labels\" . | nindent 4 }}\r\nspec:\r\n  key: tokne\r\n",
			want: map[string]string{"key: tokne": "7:3", "spec:": "6:1"},
		},
		"a comment and a variable write nothing": {
			tmpl: "{{- /* a comment\n  of two lines */ -}}\n{{- $name := .Release.Name }}\nmetadata:\n  name: {{ $name }}\n  labels:\n    {{- include \"web.labels\" . | nindent 4 }}\nspec:\n  key: tokne\n",
			want: map[string]string{"name: release-name": "5:3", "key: tokne": "9:3"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out := renderTemplate(t, c.tmpl, c.values)
			lines := templateLines(c.tmpl, out)
			if len(lines) != len(splitLines(out)) {
				t.Fatalf("%d lines mapped, the output has %d:\n%s", len(lines), len(splitLines(out)), out)
			}
			if last := len(strings.Split(strings.TrimSuffix(c.tmpl, "\n"), "\n")); len(lines) > 0 && int(lines[len(lines)-1].Line) > last {
				t.Errorf("the output's last line placed at %d, past the template's %d lines", lines[len(lines)-1].Line, last)
			}
			for what, want := range c.want {
				if want == "" {
					continue
				}
				find, n := what, 1
				if k := strings.LastIndex(what, "#"); k > 0 {
					find = what[:k]
					fmt.Sscan(what[k+1:], &n)
				}
				line, col := at(t, out, find, n)
				if got := mapped(lines, line, col); got != want {
					t.Errorf("%q at %d:%d of the output: placed at %s, want %s\noutput:\n%s", what, line, col, got, want, out)
				}
			}
		})
	}
}

// TestTemplateLinesBounded: a template too long to align in the bound
// leaves its output at its own lines, without an error, as far as the
// template has them and no range block starts; from a range block's
// start, at its {{ range }} line.
func TestTemplateLinesBounded(t *testing.T) {
	var tmpl, out strings.Builder
	for i := range 1200 {
		fmt.Fprintf(&tmpl, "k%d: {{ .Values.v }}\n", i)
		fmt.Fprintf(&out, "k%d: x\n", i)
	}
	fmt.Fprintf(&out, "extra: x\n")
	lines := templateLines(tmpl.String(), out.String())
	if len(lines) != 1202 || lines[599] != (source.TemplateLine{Line: 600, Same: 7, Column: 1}) || lines[1200].Line != 1200 || lines[1201].Line != 1200 {
		t.Errorf("past the bound, lines 600, 1201 and 1202 placed at %+v, %+v, %+v of %d", lines[599], lines[1200], lines[1201], len(lines))
	}
	// A range block at line 1002 writing 1200 items: the lines above it
	// at their own, each of its lines at the {{ range }} line, at the
	// action's column.
	tmpl.Reset()
	out.Reset()
	for i := range 1000 {
		fmt.Fprintf(&tmpl, "k%d: {{ .Values.v }}\n", i)
		fmt.Fprintf(&out, "k%d: x\n", i)
	}
	tmpl.WriteString("list:\n  {{- range .Values.items }}\n  - k: {{ . }}\n  {{- end }}\n")
	out.WriteString("list:\n")
	for i := range 1200 {
		fmt.Fprintf(&out, "  - k: v%d\n", i)
	}
	lines = templateLines(tmpl.String(), out.String())
	ranged := source.TemplateLine{Line: 1002, Column: 3}
	if len(lines) != 2202 || lines[1000].Line != 1001 || lines[1001] != ranged || lines[2201] != ranged {
		t.Errorf("past the bound, lines 1001, 1002 and 2202 placed at %+v, %+v, %+v of %d", lines[1000], lines[1001], lines[2201], len(lines))
	}
	// Within it, the same shape maps line by line.
	small := "a: {{ .Values.v }}\nb: {{ .Values.v }}\nc: 1\n"
	if got := templateLines(small, "a: x\nb: x\nc: 1\n"); len(got) != 4 || got[1].Line != 2 || got[2].Line != 3 {
		t.Errorf("lines %+v", got)
	}
}

// FuzzTemplateLines: whatever the template and the output, mapping never
// panics, maps every line of the output, and only to lines the template
// has (not the empty text after its last line break).
func FuzzTemplateLines(f *testing.F) {
	f.Add("a: 1\n{{- include \"x\" . | nindent 2 }}\nb: 2\n", "a: 1\n  x: y\n  z: w\nb: 2\n")
	f.Add("{{- range .v }}\n- {{ . }}\n{{- end }}\n", "\n- a\n- b\n")
	f.Add("{{ define \"x\" }}\nk: v\n{{ end }}{{ /* open", "k: v\n")
	f.Add("x: '{{ \"{{ .k }}\" }}'\r\ny: `{{`\r", "x: '{{ .k }}'\r\ny: `{{`\r")
	f.Add("{{ if }}{{ else }}{{ with }}{{ end }}{{ end }}\u2028a\u0085b", "a\rb\n")
	f.Fuzz(func(t *testing.T, tmpl, out string) {
		lines := templateLines(tmpl, out)
		tl := splitLines(tmpl)
		n := len(tl)
		if n > 1 && tl[n-1] == "" {
			n-- // the empty text after the last line break is no line
		}
		if len(lines) != len(splitLines(out)) {
			t.Fatalf("%d lines mapped, the output has %d", len(lines), len(splitLines(out)))
		}
		for i, l := range lines {
			if l.Line < 1 || int(l.Line) > n || l.Column < 1 || l.Same < 0 {
				t.Fatalf("line %d of the output placed at %+v; the template has %d lines", i+1, l, n)
			}
		}
	})
}
