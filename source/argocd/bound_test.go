package argocd

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/testrepo"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/kustomize"
)

// TestAppSetTemplateBounded: a goTemplate that asks for more memory, time
// or output than keyhole gives one string is a diagnostic naming the
// bound, reached within it, and the rest of the repository is still
// checked; a flat template is filled in keyhole's own process and one
// that loops in a child process, to the same result.
func TestAppSetTemplateBounded(t *testing.T) {
	defer func(d time.Duration, m int64) { appSetRenderTimeout, appSetRenderMemory = d, m }(appSetRenderTimeout, appSetRenderMemory)
	// The cases bounded in time run with a bound of 2s and the memory
	// keyhole gives; the others with 256 MiB and the time keyhole gives,
	// so that each meets the bound it is about first: a child process slow
	// to start on a loaded machine still runs out of memory before time,
	// and one whose loops' garbage the collector is slow to return on a
	// loaded machine still runs out of time before memory.
	given, givenMemory := appSetRenderTimeout, appSetRenderMemory
	timed := map[string]bool{"loops that write nothing": true, "templates that call each other twice": true}
	cases := map[string]struct {
		// name and path are the template's metadata.name and source path.
		name, path string
		// wantDiag are substrings of diagnostics that must be said; any
		// other error fails the case.
		wantDiag []string
		// want is "UNIT NAMESPACE NAME" of each Connection an Application
		// deploys.
		want []string
	}{
		"a string too large for memory": {
			name:     `m-{{ $s := repeat 1000000000 "x" }}{{ len $s }}`,
			wantDiag: []string{"Argo CD ApplicationSet argocd/s", "rendering needed more than 256 MiB of memory, the bound keyhole gives one string of an ApplicationSet's template"},
		},
		"a string doubled in a loop": {
			name:     `d-{{ $s := "xxxxxxxx" }}{{ range until 40 }}{{ $s = cat $s $s }}{{ end }}{{ len $s }}`,
			wantDiag: []string{"rendering needed more than 256 MiB of memory"},
		},
		"a loop that writes without end": {
			name:     `w-{{ range until 2000000 }}xxxxxxxxxx{{ end }}`,
			wantDiag: []string{"filling the template wrote more than 16 MiB, the bound keyhole gives one string of an ApplicationSet's template"},
		},
		"loops that write nothing": {
			name:     `t-{{ range until 100000 }}{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}{{ end }}`,
			wantDiag: []string{"rendering did not end within 2s, the bound keyhole gives one string of an ApplicationSet's template"},
		},
		"templates that call each other twice": {
			name:     `c-` + doublingTemplates(60),
			wantDiag: []string{"rendering did not end within 2s"},
		},
		"a loop within the bounds, filled apart": {
			name: `l-{{ range $i, $e := list .env }}{{ $e }}{{ end }}`,
			path: `envs/{{ .env }}`,
			want: []string{"argocd:argocd/l-dev agents gh-dev"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			appSetRenderTimeout, appSetRenderMemory = given, 256<<20
			if timed[name] {
				appSetRenderTimeout, appSetRenderMemory = 2*time.Second, givenMemory
			}
			start := time.Now()
			got, ds := loadListSet(t, c.name, cmp.Or(c.path, "envs/dev"))
			if d := time.Since(start); d > 3*appSetRenderTimeout {
				t.Errorf("took %v, past its bound of %v", d, appSetRenderTimeout)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("Connections read as %q, want %q\n%s", got, c.want, ds)
			}
			for _, w := range c.wantDiag {
				if !strings.Contains(ds.Error(), w) {
					t.Errorf("no diagnostic says %q:\n%s", w, ds)
				}
			}
			for _, d := range ds {
				if d.Severity == diag.Error && !slices.ContainsFunc(c.wantDiag, func(w string) bool { return strings.Contains(d.String(), w) }) {
					t.Errorf("unexpected error: %s", d)
				}
			}
		})
	}
}

// loadListSet loads, with this engine, a repository holding a Connection
// in envs/dev and a goTemplate ApplicationSet whose list generator makes
// one Application of the directory path, named name: "UNIT NAMESPACE
// NAME" of each Connection an Application deploys, sorted, and what
// the Load said.
func loadListSet(t *testing.T, name, path string) ([]string, diag.List) {
	t.Helper()
	dir, _ := testrepo.Init(t)
	testrepo.WriteFiles(t, dir, map[string]string{
		"envs/dev/conn.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh-dev}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n",
		"argo/set.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: s, namespace: argocd}\nspec:\n" +
			"  goTemplate: true\n  generators:\n    - list: {elements: [{env: dev}]}\n" +
			"  template:\n    metadata: {name: '" + name + "'}\n    spec:\n      project: default\n" +
			"      source: {repoURL: 'https://git.example.com/r.git', path: '" + path + "'}\n" +
			"      destination: {name: in-cluster, namespace: agents}\n",
	})
	// The Applications build a kustomize directory: the kustomize engine
	// reads what they build.
	docs, ds, err := source.Load([]string{"."}, source.Options{Dir: dir, Engines: source.Engines{Argo: Engine{}, Kustomize: kustomize.Engine{}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		if u := d.Unit(); d.Object().Kind == "Connection" && !u.Loose() {
			got = append(got, u.Name+" "+cmp.Or(d.Object().Namespace, u.Namespace)+" "+d.Object().Name)
		}
	}
	slices.Sort(got)
	return got, ds
}

// doublingTemplates defines n templates, each calling the next twice,
// and calls the first: 2^n calls, writing nothing.
func doublingTemplates(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(`{{ define "t` + strconv.Itoa(i) + `" }}{{ template "t` + strconv.Itoa(i+1) + `" }}{{ template "t` + strconv.Itoa(i+1) + `" }}{{ end }}`)
	}
	b.WriteString(`{{ define "t` + strconv.Itoa(n) + `" }}{{ end }}{{ template "t0" }}`)
	return b.String()
}

// TestFlatTemplate: what is filled in keyhole's own process.
func TestFlatTemplate(t *testing.T) {
	cases := map[string]struct {
		text string
		flat bool
	}{
		"fields and Argo CD's functions": {text: `{{ .path.basename | normalize }}-{{ index .path.segments 1 }}`, flat: true},
		"if, with and printf":            {text: `{{ if .a }}{{ with .b }}{{ printf "%s-x" . }}{{ end }}{{ else }}z{{ end }}`, flat: true},
		"range":                          {text: `{{ range .l }}{{ . }}{{ end }}`},
		"a variable":                     {text: `{{ $x := .a }}{{ $x }}`},
		"define and template":            {text: `{{ define "x" }}a{{ end }}{{ template "x" }}`},
		"repeat":                         {text: `{{ repeat 3 "a" }}`},
		"replace, which can grow":        {text: `{{ replace "a" "aa" .x }}`},
		"toYaml, which escapes":          {text: `{{ toYaml .x }}`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tmpl, err := appSetTmpl{goTemplate: true}.parse(c.text)
			if err != nil {
				t.Fatal(err)
			}
			if got := flatTemplate(tmpl); got != c.flat {
				t.Errorf("flatTemplate(%q) = %v, want %v", c.text, got, c.flat)
			}
		})
	}
}
