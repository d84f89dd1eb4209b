package source

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAppSetTemplateBounded: a goTemplate that asks for more memory, time
// or output than keyhole gives one string is a diagnostic naming the
// bound, reached within it, and the rest of the repository is still
// checked; a flat template is filled in keyhole's own process and one
// that loops in a child process, to the same result.
func TestAppSetTemplateBounded(t *testing.T) {
	defer func(d time.Duration, m int64) { appSetRenderTimeout, appSetRenderMemory = d, m }(appSetRenderTimeout, appSetRenderMemory)
	appSetRenderMemory = 256 << 20
	// The cases bounded in time run with a bound of 2s; those bounded in
	// memory or output keep the bound keyhole gives, so that a child
	// process slow to start on a loaded machine still meets the bound the
	// case is about before the time runs out.
	given := appSetRenderTimeout
	timed := map[string]bool{"loops that write nothing": true, "templates that call each other twice": true}
	list := "  goTemplate: true\n  generators:\n    - list: {elements: [{env: dev}]}\n"
	cases := map[string]argoCase{
		"a string too large for memory": {
			ignoreLoose: true,
			files: withFiles(envFiles("dev"), map[string]string{"argo/set.yaml": appSet("s", list+
				dirTemplate(`m-{{ $s := repeat 1000000000 "x" }}{{ len $s }}`, `envs/dev`, `agents`))}),
			wantDiag: []string{"Argo CD ApplicationSet argocd/s", "rendering needed more than 256 MiB of memory, the bound keyhole gives one string of an ApplicationSet's template"},
		},
		"a string doubled in a loop": {
			ignoreLoose: true,
			files: withFiles(envFiles("dev"), map[string]string{"argo/set.yaml": appSet("s", list+
				dirTemplate(`d-{{ $s := "xxxxxxxx" }}{{ range until 40 }}{{ $s = cat $s $s }}{{ end }}{{ len $s }}`, `envs/dev`, `agents`))}),
			wantDiag: []string{"rendering needed more than 256 MiB of memory"},
		},
		"a loop that writes without end": {
			ignoreLoose: true,
			files: withFiles(envFiles("dev"), map[string]string{"argo/set.yaml": appSet("s", list+
				dirTemplate(`w-{{ range until 2000000 }}xxxxxxxxxx{{ end }}`, `envs/dev`, `agents`))}),
			wantDiag: []string{"filling the template wrote more than 16 MiB, the bound keyhole gives one string of an ApplicationSet's template"},
		},
		"loops that write nothing": {
			ignoreLoose: true,
			files: withFiles(envFiles("dev"), map[string]string{"argo/set.yaml": appSet("s", list+
				dirTemplate(`t-{{ range until 100000 }}{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}{{ end }}`, `envs/dev`, `agents`))}),
			wantDiag: []string{"rendering did not end within 2s, the bound keyhole gives one string of an ApplicationSet's template"},
		},
		"templates that call each other twice": {
			ignoreLoose: true,
			files: withFiles(envFiles("dev"), map[string]string{"argo/set.yaml": appSet("s", list+
				dirTemplate(`c-`+doublingTemplates(60), `envs/dev`, `agents`))}),
			wantDiag: []string{"rendering did not end within 2s"},
		},
		"a loop within the bounds, filled apart": {
			files: withFiles(envFiles("dev"), map[string]string{"argo/set.yaml": appSet("s", list+
				dirTemplate(`l-{{ range $i, $e := list .env }}{{ $e }}{{ end }}`, `envs/{{ .env }}`, `agents`))}),
			want: []string{"argocd:argocd/l-dev agents gh-dev"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			appSetRenderTimeout = given
			if timed[name] {
				appSetRenderTimeout = 2 * time.Second
			}
			start := time.Now()
			c.run(t)
			if d := time.Since(start); d > 3*appSetRenderTimeout {
				t.Errorf("took %v, past its bound of %v", d, appSetRenderTimeout)
			}
		})
	}
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
