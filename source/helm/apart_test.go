package helm

import (
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/strvals"
	"sigs.k8s.io/yaml"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/testrepo"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/internal/sourcetest"
)

// TestRenderApartAsInProcess: the renderer process renders what Helm's
// engine renders in keyhole's own process, the Go types of the values
// included (a number from YAML prints as a float64, one from --set as an
// int64), with the release's options and the chart's replaced values.
func TestRenderApartAsInProcess(t *testing.T) {
	chart := "apiVersion: v2\nname: c\nversion: 0.1.0\n"
	tmpl := `n: {{ .Values.n }} {{ kindOf .Values.n }}
big: {{ .Values.big }} {{ kindOf .Values.big }}
set: {{ .Values.s }} {{ kindOf .Values.s }}
nothing: {{ kindOf .Values.nothing }} {{ .Values.nothing }}
list: {{ .Values.l | toJson }}
nested: {{ with .Values.m }}{{ .k.deep }} {{ kindOf . }}{{ end }}
str: {{ .Values.str | quote }}
release: {{ .Release.Name }} {{ .Release.Namespace }} {{ .Capabilities.KubeVersion.Minor }}
api: {{ .Capabilities.APIVersions.Has "x.example.com/v1" }}
`
	cases := map[string]struct {
		files       map[string]string
		valuesYAML  string
		set         []string
		chartValues string
		o           source.HelmOverlay
	}{
		"values of every kind": {
			valuesYAML: "n: 3\nbig: 1000000\nl: [1, a, true, null, {x: 2.5}]\nm: {k: {deep: yes}}\nstr: \"line\\nbreak\"\nnothing: null\n",
			set:        []string{"s=12", "m.k.deep=false"},
			o:          source.HelmOverlay{ReleaseName: "r", Namespace: "team", KubeVersion: "1.31.0", APIVersions: []string{"x.example.com/v1"}},
		},
		"chart values replaced": {
			files:       map[string]string{"values.yaml": "n: 1\n"},
			chartValues: "n: 7\nbig: 2.5e10\n",
			o:           source.HelmOverlay{ReleaseName: "release-name", Namespace: "default"},
		},
		"a subchart, a test hook left out": {
			files: map[string]string{
				"charts/sub/Chart.yaml":           "apiVersion: v2\nname: sub\nversion: 1.0.0\n",
				"charts/sub/templates/s.yaml":     "sub: {{ .Values.x }} {{ .Values.global.g }}\n",
				"charts/sub/values.yaml":          "x: from-sub\n",
				"templates/tests/t.yaml":          "apiVersion: v1\nkind: Pod\nmetadata: {name: t, annotations: {helm.sh/hook: test}}\n",
				"templates/NOTES.txt":             "notes {{ .Release.Name }}\n",
				"templates/_helpers.tpl":          `{{ define "h" }}helped{{ end }}`,
				"templates/uses-helper.yaml":      `h: {{ include "h" . }}`,
				"templates/empty-when-off.yaml":   "{{ if .Values.on }}on: true{{ end }}",
				"templates/fail-not-taken.yaml":   `{{ if .Values.never }}{{ fail "no" }}{{ end }}`,
				"templates/lookup-offline.yaml":   `l: {{ lookup "v1" "Secret" "ns" "s" | toJson }}`,
				"templates/dns-offline.yaml":      `d: {{ getHostByName "example.com" | quote }}`,
				"templates/tpl-of-a-value.yaml":   `t: {{ tpl .Values.str . }}`,
				"templates/release-revision.yaml": `rev: {{ .Release.Revision }} {{ .Release.IsInstall }}`,
			},
			valuesYAML: "n: 1\nstr: '{{ .Release.Name }}'\nglobal: {g: G}\n",
			o:          source.HelmOverlay{ReleaseName: "rel", Namespace: "ns", SkipTests: true},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			files := []*archive.BufferedFile{{Name: "Chart.yaml", Data: []byte(chart)}, {Name: "templates/t.yaml", Data: []byte(tmpl)}}
			for _, n := range slices.Sorted(maps.Keys(c.files)) {
				files = append(files, &archive.BufferedFile{Name: n, Data: []byte(c.files[n])})
			}
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(c.valuesYAML), &vals); err != nil {
				t.Fatal(err)
			}
			for _, s := range c.set {
				if err := strvals.ParseInto(s, vals); err != nil {
					t.Fatal(err)
				}
			}
			var cvals map[string]any
			if c.chartValues != "" {
				if err := yaml.Unmarshal([]byte(c.chartValues), &cvals); err != nil {
					t.Fatal(err)
				}
			}
			ch, err := chartloader.LoadFiles(files)
			if err != nil {
				t.Fatal(err)
			}
			dropMissingDependencies(ch)
			if cvals != nil {
				ch.Values = cvals
			}
			want, wantErr := renderChart(ch, vals, &c.o)
			got, err := renderApart(files, cvals, vals, &c.o)
			if err != nil || wantErr != nil {
				t.Fatalf("apart: %v; in process: %v", err, wantErr)
			}
			if !maps.Equal(got, want) {
				t.Errorf("apart:\n%v\nin process:\n%v", got, want)
			}
			if !strings.Contains(got["c/templates/t.yaml"], "n: ") {
				t.Errorf("the template did not render: %q", got["c/templates/t.yaml"])
			}
		})
	}
}

// A template that loops for as long as its values say ends in an error
// after the bound, not in a hang.
func TestHelmRenderBounded(t *testing.T) {
	defer func(d time.Duration) { helmRenderTimeout = d }(helmRenderTimeout)
	// A bound shorter than any rendering: the loop below takes
	// milliseconds.
	helmRenderTimeout = time.Nanosecond
	dir := t.TempDir()
	testrepo.WriteFiles(t, dir, map[string]string{
		"c/Chart.yaml":          sourcetest.HelmChart,
		"c/values.yaml":         "name: a\nsecret: s\nn: 300\n",
		"c/templates/conn.yaml": sourcetest.HelmConn,
		"c/templates/loop.yaml": "{{ range until (int .Values.n) }}{{ range until (int $.Values.n) }}{{ end }}{{ end }}",
	})
	_, ds, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Code != source.CodeHelmRenderFailed || !strings.Contains(ds[0].Message, "did not end within") {
		t.Errorf("got %v", ds)
	}
}

// TestHelmRenderMemoryBounded: a template that asks for more memory than
// the machine has, at once or a little at a time, ends in a diagnostic
// naming the bound, not in a crash of keyhole's process.
func TestHelmRenderMemoryBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux bounds an address space; elsewhere the bound is the garbage collector's alone")
	}
	defer func(m int64) { helmRenderMemory = m }(helmRenderMemory)
	helmRenderMemory = 256 << 20
	for name, tmpl := range map[string]string{
		"at once":         `a: {{ repeat 100000000000 "x" | quote }}`,
		"a little a time": `{{ range until 1000000 }}{{ repeat 100000 "x" }}{{ end }}`,
		"nested ranges":   `{{ $l := until 1000 }}{{ range $l }}{{ range $l }}{{ range $l }}xxxxxxxxxxxxxxxx{{ end }}{{ end }}{{ end }}`,
		"a list":          `{{ $x := until 10000000000 }}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			testrepo.WriteFiles(t, dir, map[string]string{
				"c/Chart.yaml":          sourcetest.HelmChart,
				"c/values.yaml":         "name: a\nsecret: s\n",
				"c/templates/conn.yaml": sourcetest.HelmConn,
				"c/templates/bomb.yaml": tmpl,
			})
			_, ds, err := load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 1 || ds[0].Code != source.CodeHelmRenderFailed || !strings.Contains(ds[0].Message, "rendering needed more than 256 MiB of memory") {
				t.Errorf("got %v", ds)
			}
		})
	}
}

// load loads the directory dir as keyhole check does, with this engine.
func load(dir string) ([]*source.Document, diag.List, error) {
	return source.Load([]string{"."}, source.Options{Dir: dir, Engines: source.Engines{Helm: Engine{}}})
}
