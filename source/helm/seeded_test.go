package helm

import (
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"

	"keyhole.dev/keyhole/source"
)

// A chart's random and time functions give the same values on every
// render of the same chart for the same release, other values for
// another release, and values of the shape Sprig's give: check, render
// and diff say the same of the same inputs.
func TestSeededFuncs(t *testing.T) {
	tmpl := `a: {{ randAlphaNum 5 }}
b: {{ randAlpha 6 }}
c: {{ randNumeric 4 }}
d: {{ randAscii 8 | quote }}
e: {{ randBytes 12 }}
f: {{ randInt 10 20 }}
g: {{ uuidv4 }}
h: {{ shuffle "abcdefgh" }}
i: {{ now | date "2006-01-02" }}
j: {{ randAlphaNum 5 }}
k: {{ randAlphaNum 0 | quote }}
`
	render := func(release string) map[string]string {
		t.Helper()
		ch, err := chartloader.LoadFiles([]*archive.BufferedFile{
			{Name: "Chart.yaml", Data: []byte("apiVersion: v2\nname: web\nversion: 0.1.0\n")},
			{Name: "templates/t.yaml", Data: []byte(tmpl)},
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := renderChart(ch, map[string]any{}, &source.HelmOverlay{ReleaseName: release, Namespace: "default"})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		if err := yaml.Unmarshal([]byte(out["web/templates/t.yaml"]), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	one, again, other := render("release-name"), render("release-name"), render("other")
	shapes := map[string]string{
		"a": `^[A-Za-z0-9]{5}$`, "b": `^[A-Za-z]{6}$`, "c": `^[0-9]{4}$`, "d": `^[ -~]{8}$`,
		"e": `^[A-Za-z0-9+/]{16}$`, "f": `^1[0-9]$`,
		"g": `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`,
		"i": `^1970-01-01$`, "j": `^[A-Za-z0-9]{5}$`, "k": `^$`,
	}
	for k, re := range shapes {
		if !regexp.MustCompile(re).MatchString(one[k]) {
			t.Errorf("%s = %q, want %s", k, one[k], re)
		}
	}
	if h := one["h"]; len(h) != 8 || strings.Trim(h, "abcdefgh") != "" {
		t.Errorf("shuffle gave %q, not a permutation of abcdefgh", h)
	}
	differ := 0
	for k := range one {
		if one[k] != again[k] {
			t.Errorf("%s: %q, then %q on the same inputs", k, one[k], again[k])
		}
		if one[k] != other[k] {
			differ++
		}
	}
	if one["a"] == one["j"] {
		t.Errorf("two calls gave one value, %q", one["a"])
	}
	if differ < 5 {
		t.Errorf("another release drew the same values: %v and %v", one, other)
	}
}
