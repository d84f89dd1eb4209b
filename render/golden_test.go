package render

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/golden"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/source/fixture"
)

const (
	examplesDir = "../examples"
	goldenDir   = "../golden"
)

// hasKeyholeInputs is the rule that picks the examples the golden test
// renders: a directory holding an agent.yaml, or a YAML file declaring
// an omnia.altairalabs.ai object. examples/argocd and examples/flux hold
// only deployment wiring (examples/flux its keyhole.yaml too) and are
// left out by it;
// examples/broken is left out by name, and a directory holding an
// expected.txt by that file, since they must fail to check. An example
// whose inputs Argo CD Applications deploy (examples/argocd-repo, one
// Application per environment) has one plan per deploy unit, not one to
// render here: cli's TestArgoCDPluginGenerate renders each of
// its units as Argo CD's plugin does, and its README's walk-through runs.
func hasKeyholeInputs(t *testing.T, dir string) bool {
	t.Helper()
	found, argo := false, false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		if name == "agent.yaml" {
			found = true
			return nil
		}
		if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			switch l := strings.TrimSpace(sc.Text()); {
			case strings.HasPrefix(l, "apiVersion: omnia.altairalabs.ai/"):
				found = true
			case strings.HasPrefix(l, "apiVersion: argoproj.io/"):
				argo = true
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatalf("scanning %s: %v", dir, err)
	}
	return found && !argo
}

// examples lists the example directories the golden test renders, and
// fails when there are none, so a moved examples/ cannot pass silently.
func examples(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "broken" {
			continue
		}
		// An example beside its expected.txt is one that must fail to
		// check, as examples/kustomize-overlay does.
		if _, err := os.Stat(filepath.Join(examplesDir, e.Name(), "expected.txt")); err == nil {
			continue
		}
		if hasKeyholeInputs(t, filepath.Join(examplesDir, e.Name())) {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		t.Fatal("no example with keyhole inputs under examples/")
	}
	return out
}

// compileDir loads and compiles dir as `keyhole check` does, failing the
// test on any error diagnostic: render never sees a Plan with errors.
func compileDir(t *testing.T, dir string) compiler.Plan {
	t.Helper()
	docs, ds := fixture.Load(t, dir, nil)
	res := compiler.Compile(docs, fixture.Validator(t), compiler.Options{})
	ds = append(ds, res.Diagnostics...)
	if ds.HasErrors() {
		t.Fatalf("%s does not check:\n%v", dir, ds)
	}
	return res.Plan
}

// TestGolden renders every example and compares it byte for byte with
// golden/<example>/ (KEYHOLE_UPDATE=1 rewrites it). It also renders twice,
// validates every object against the pinned schemas and loads every
// proxy config as the proxy does.
func TestGolden(t *testing.T) {
	// KEYHOLE_UPDATE=1 rewrites golden/ from the current render instead
	// of comparing; golden files are never edited by hand.
	schemas, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples(t) {
		t.Run(ex, func(t *testing.T) {
			files := renderTwice(t, func() []File {
				return mustRender(t, compileDir(t, filepath.Join(examplesDir, ex)), Options{})
			})
			checkRendered(t, files, func(f File) {
				if err := schemas.validate(f.Data); err != nil {
					t.Errorf("%s: %v", f.Path, err)
				}
			})
			dir := filepath.Join(goldenDir, ex)
			checkDir(t, dir, files)
		})
	}
}

// renderTwice calls render twice, fails unless both renders are the same
// bytes, and returns the first.
func renderTwice(t *testing.T, render func() []File) []File {
	t.Helper()
	files, again := render(), render()
	if !slices.EqualFunc(files, again, func(a, b File) bool { return a.Path == b.Path && bytes.Equal(a.Data, b.Data) }) {
		t.Fatal("rendering twice gave different bytes")
	}
	return files
}

// checkRendered loads every proxy.json of files as the proxy does, and hands
// every manifest (a .yaml file but the kustomization) to manifest.
func checkRendered(t *testing.T, files []File, manifest func(File)) {
	t.Helper()
	for _, f := range files {
		switch {
		case filepath.Base(f.Path) == "proxy.json":
			if _, err := config.Decode(f.Data); err != nil {
				t.Errorf("%s does not load into the proxy: %v", f.Path, err)
			}
		case strings.HasSuffix(f.Path, ".yaml") && f.Path != "kustomization.yaml":
			manifest(f)
		}
	}
}

// checkDir writes files to dir under golden.Update, and otherwise
// compares them with it.
func checkDir(t *testing.T, dir string, files []File) {
	t.Helper()
	if golden.Update() {
		if err := WriteDir(dir, files); err != nil {
			t.Fatal(err)
		}
		return
	}
	compareDir(t, dir, files)
}

// noCanary fails if a rendered file, their stream, a diagnostic of ds or
// the directory WriteDir makes of them (a path or a file's bytes) holds
// the canary. It returns the stream.
func noCanary(t *testing.T, files []File, ds diag.List) []byte {
	t.Helper()
	stream, err := Stream(files)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := WriteDir(out, files); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if bytes.Contains(f.Data, []byte(canary)) {
			t.Errorf("%s holds the canary", f.Path)
		}
	}
	if bytes.Contains(stream, []byte(canary)) || strings.Contains(ds.Error(), canary) {
		t.Error("the stream or a diagnostic holds the canary")
	}
	for p, data := range snapshot(t, out) {
		if strings.Contains(data, canary) || strings.Contains(p, canary) {
			t.Errorf("written %s holds the canary", p)
		}
	}
	return stream
}

// noSecretRendered renders every example with render, a canary planted
// in place of its Secrets' token, and fails if a file, the stream, a
// diagnostic or the written directory holds the canary, or the stream a
// Secret; check then looks at each example's files.
func noSecretRendered(t *testing.T, render func(compiler.Plan, Options) ([]File, diag.List, error), check func(*testing.T, []File)) {
	for _, ex := range examples(t) {
		t.Run(ex, func(t *testing.T) {
			dir := plantCanary(t, filepath.Join(examplesDir, ex))
			files, ds := mustRenderTarget(t, render, compileDir(t, dir))
			if stream := noCanary(t, files, ds); bytes.Contains(stream, []byte("kind: Secret")) {
				t.Error("the stream holds a Secret")
			}
			check(t, files)
		})
	}
}

// compareDir fails unless dir holds exactly files plus the marker.
func compareDir(t *testing.T, dir string, files []File) {
	t.Helper()
	want := map[string][]byte{MarkerFile: []byte(markerText)}
	for _, f := range files {
		want[f.Path] = f.Data
	}
	got := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		got[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatalf("%v (KEYHOLE_UPDATE=1 go test ./render/... writes it)", err)
	}
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s/%s is missing (KEYHOLE_UPDATE=1 rewrites it)", dir, p)
		case !bytes.Equal(g, w):
			t.Errorf("%s/%s differs (KEYHOLE_UPDATE=1 rewrites it)\n--- got\n%s\n--- want\n%s", dir, p, w, g)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s/%s is not rendered any more (KEYHOLE_UPDATE=1 removes it)", dir, p)
		}
	}
}

// TestExampleCanary compiles every example with a canary planted in
// place of its Secrets' stand-in token and asserts that no rendered byte,
// streamed or written, holds it, in either proxy mode.
func TestExampleCanary(t *testing.T) {
	for _, ex := range examples(t) {
		t.Run(ex, func(t *testing.T) {
			dir := plantCanary(t, filepath.Join(examplesDir, ex))
			plan := compileDir(t, dir)
			for _, mode := range modes {
				t.Run(mode, func(t *testing.T) {
					files := mustRender(t, plan, Options{ProxyMode: mode})
					noCanary(t, files, nil)
					// The per-claim trust objects (docs/spec.md §7), for every sandbox.
					objs := objects(t, files)
					for _, sb := range plan.Sandboxes {
						find(t, objs, "Certificate", sb.Name+"-egress-ca")
						find(t, objs, "ConfigMap", sb.Name+"-egress-trust")
						dep := find(t, objs, "Deployment", sb.Name+"-sandbox")
						env := envOf(container(t, dep, "sandbox"))
						for _, e := range sb.Env {
							if env[e.Name] != "omnia-injected-"+e.Connection {
								t.Errorf("%s = %q, want omnia-injected-%s", e.Name, env[e.Name], e.Connection)
							}
						}
						if ex == "github-acme" && env["GH_TOKEN"] != "omnia-injected-github-acme" {
							t.Errorf("GH_TOKEN = %q", env["GH_TOKEN"])
						}
					}
				})
			}
		})
	}
}

// standIn is the placeholder token the examples' Secrets hold so that they
// check on their own.
const standIn = "replace-me-with-a-github-token"

// plantCanary copies the example at src into a temporary directory with
// every stand-in token replaced by the canary, failing if there is none.
func plantCanary(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	planted := false
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(standIn)) {
			data = bytes.ReplaceAll(data, []byte(standIn), []byte(canary))
			planted = true
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !planted {
		t.Fatalf("%s holds no Secret with the stand-in token %q to replace with the canary", src, standIn)
	}
	return dst
}
