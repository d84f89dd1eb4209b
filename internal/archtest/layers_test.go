package archtest

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "keyhole.dev/keyhole"

// layers ranks the module's packages, bottom first: a package may import
// packages of its own layer or of a lower one, never of a higher one. A
// pattern "p" is the package p, "p/..." the packages below p; a package
// takes the layer of the longest pattern it matches. A package that
// matches none fails the test, so a new top-level package gets its place
// here on purpose.
var layers = []struct {
	name     string
	patterns []string
}{
	{name: "diagnostics", patterns: []string{"diag"}},
	{name: "leaves", patterns: []string{"internal/..."}},
	{name: "vocabulary", patterns: []string{"schema", "schema/...", "proxy/config", "proxy/policy"}},
	{name: "source", patterns: []string{"source"}},
	{name: "source's engines", patterns: []string{"source/..."}},
	{name: "compile and compare", patterns: []string{
		"compiler", "compiler/...", "access", "access/...", "render", "render/...",
		"diff", "diff/...", "suggest", "suggest/...",
	}},
	{name: "pipeline", patterns: []string{"pipeline", "pipeline/..."}},
	{name: "commands", patterns: []string{
		"cli", "cli/...", "cmd/...", "proxy", "proxy/...", "e2e/...", "bench", "bench/...",
	}},
}

// engineArrows are the imports allowed between the packages of source's
// engines, by importer: the engines import one another as a DAG, each
// arrow listed here on purpose, so fixing one engine never reaches into
// another unseen.
var engineArrows = map[string][]string{
	"source/engines": {"source/argocd", "source/flux", "source/helm", "source/kustomize"},
	"source/fixture": {"source/engines"},
}

// proxyMay are the module's packages the proxy's tree may import: the
// keyhole-proxy binary is built from it alone.
var proxyMay = []string{"diag", "internal/...", "proxy", "proxy/..."}

// match reports how specifically pattern matches pkg: the pattern's
// length, or -1.
func match(pattern, pkg string) int {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		if strings.HasPrefix(pkg, dir+"/") {
			return len(pattern)
		}
		return -1
	}
	if pkg == pattern {
		return len(pattern)
	}
	return -1
}

// layerOf returns the index in layers of pkg (relative to the module), or
// -1 when no pattern matches it.
func layerOf(pkg string) int {
	best, layer := -1, -1
	for i, l := range layers {
		for _, p := range l.patterns {
			if n := match(p, pkg); n > best {
				best, layer = n, i
			}
		}
	}
	return layer
}

func matchesAny(patterns []string, pkg string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, pkg) >= 0 })
}

// pkg is a package as go list gives it: its path and its imports, both
// relative to the module, the module's own imports only.
type pkg struct {
	path    string
	imports []string
}

// violations returns each import of pkgs that points up a layer or out of
// the proxy's tree, as an arrow with the rule it breaks.
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from := layerOf(p.path)
		if from < 0 {
			out = append(out, p.path+" has no layer: add it to the layers table in internal/archtest")
			continue
		}
		inProxy := matchesAny([]string{"proxy", "proxy/..."}, p.path)
		for _, imp := range p.imports {
			to := layerOf(imp)
			switch {
			case to < 0:
				out = append(out, p.path+" ─► "+imp+": "+imp+" has no layer")
			case to > from:
				out = append(out, p.path+" ─► "+imp+": "+layers[from].name+" may not import "+layers[to].name)
			case to == from && layers[from].name == "source's engines" && !slices.Contains(engineArrows[p.path], imp):
				out = append(out, p.path+" ─► "+imp+": not an arrow between source's engines that engineArrows allows")
			case inProxy && !matchesAny(proxyMay, imp):
				out = append(out, p.path+" ─► "+imp+": the proxy's tree imports only diag, internal/... and proxy/...")
			}
		}
	}
	return out
}

// golist returns the module's packages, built with tags, and their
// imports of the module's packages (tests left out: a test may reach up,
// as the e2e suites run the CLI).
func golist(t *testing.T, tags string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-C", "../..", "-tags", tags, "-json", "./...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list -json: %v", err)
		}
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			t.Fatalf("go list gave %s, outside %s", p.ImportPath, module)
		}
		q := pkg{path: rel}
		for _, imp := range p.Imports {
			if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				q.imports = append(q.imports, r)
			}
		}
		pkgs = append(pkgs, q)
	}
	return pkgs
}

// TestLayers checks every import of the module's packages, with and
// without the e2e build tag, against the layers.
func TestLayers(t *testing.T) {
	for _, tags := range []string{"", "e2e"} {
		pkgs := golist(t, tags)
		if len(pkgs) < 20 {
			t.Fatalf("go list -tags %q gave %d packages; the module has more", tags, len(pkgs))
		}
		for _, v := range violations(pkgs) {
			t.Errorf("-tags %q: %s", tags, v)
		}
	}
}

// TestViolations checks that the rules catch what they are for.
func TestViolations(t *testing.T) {
	tests := map[string]struct {
		pkgs []pkg
		want []string
	}{
		"down and sideways": {
			pkgs: []pkg{
				{path: "cli", imports: []string{"pipeline", "proxy/proxycmd", "source"}},
				{path: "compiler", imports: []string{"access", "source", "proxy/policy"}},
				{path: "source/fixture", imports: []string{"source", "schema", "source/engines"}},
				{path: "source/engines", imports: []string{"source", "source/helm"}},
				{path: "internal/kustbuild", imports: []string{"diag"}},
				{path: "proxy/proxycmd", imports: []string{"proxy", "internal/version", "diag"}},
			},
		},
		"source imports pipeline": {
			pkgs: []pkg{{path: "source", imports: []string{"pipeline"}}},
			want: []string{"source ─► pipeline: source may not import pipeline"},
		},
		"a leaf imports source": {
			pkgs: []pkg{{path: "internal/gitfs", imports: []string{"source"}}},
			want: []string{"internal/gitfs ─► source: leaves may not import source"},
		},
		"source imports an engine": {
			pkgs: []pkg{{path: "source", imports: []string{"source/flux"}}},
			want: []string{"source ─► source/flux: source may not import source's engines"},
		},
		"an engine imports another unlisted": {
			pkgs: []pkg{{path: "source/helm", imports: []string{"source", "source/fixture"}}},
			want: []string{"source/helm ─► source/fixture: not an arrow between source's engines that engineArrows allows"},
		},
		"the proxy imports the schema": {
			pkgs: []pkg{{path: "proxy/config", imports: []string{"schema"}}},
			want: []string{"proxy/config ─► schema: the proxy's tree imports only diag, internal/... and proxy/..."},
		},
		"the compiler imports the proxy server": {
			pkgs: []pkg{{path: "compiler", imports: []string{"proxy"}}},
			want: []string{"compiler ─► proxy: compile and compare may not import commands"},
		},
		"a package with no layer": {
			pkgs: []pkg{{path: "tools2", imports: nil}},
			want: []string{"tools2 has no layer: add it to the layers table in internal/archtest"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := violations(tc.pkgs); !slices.Equal(got, tc.want) {
				t.Errorf("violations = %q, want %q", got, tc.want)
			}
		})
	}
}
