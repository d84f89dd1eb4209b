package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"keyhole.dev/keyhole/bench/gen/synth"
)

// TestOutputSameOnOneCoreAndMany runs check and render on the examples,
// the corpus of real-shaped repositories and a generated repository with
// kustomize overlays, once with GOMAXPROCS 1 (files parsed and documents
// validated one after the other) and once with several workers, and
// requires the same bytes on stdout and stderr and the same exit code.
// (The compiler's tests compile every fixture with and without
// compiler.Digest and require the same Result of both.)
func TestOutputSameOnOneCoreAndMany(t *testing.T) {
	synthDir := filepath.Join(t.TempDir(), "synth")
	if _, err := synth.Generate(synthDir, synth.Options{Connections: 200, Agents: 20, Overlays: 1}); err != nil {
		t.Fatal(err)
	}
	// Broken files among the generated ones, so diagnostics are compared
	// too: the examples' broken references and templates, and documents
	// that fail their schemas, spread over several files.
	if err := os.CopyFS(filepath.Join(synthDir, "namespaces", "broken"), os.DirFS("../examples/broken")); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		var doc strings.Builder
		for j := range 5 {
			fmt.Fprintf(&doc, "---\napiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: invalid-%d-%d, namespace: team-0%d}\nspec:\n  hosts: [%q]\n  bogus%d: %d\n", i, j, i%3, strings.Repeat("h", i+j), j, i)
		}
		dir := filepath.Join(synthDir, "namespaces", fmt.Sprintf("team-0%d", i%3))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("invalid-%02d.yaml", i)), []byte(doc.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inputs := map[string]string{"generated": synthDir}
	examples, err := os.ReadDir("../examples")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range examples {
		inputs["examples/"+e.Name()] = filepath.Join("../examples", e.Name())
	}
	for _, repo := range corpus {
		inputs["repos/"+repo] = filepath.Join("testdata", "repos", repo)
	}
	commands := map[string][]string{
		"check -v":             {"check", "-v"},
		"check --format json":  {"check", "--format", "json"},
		"check --format sarif": {"check", "--format", "sarif"},
		"render --stdout":      {"render", "--stdout"},
		"render omnia":         {"render", "--stdout", "--target", "omnia"},
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for in, dir := range inputs {
		for cmd, args := range commands {
			t.Run(in+"/"+cmd, func(t *testing.T) {
				args := append(append([]string{}, args...), dir)
				var want string
				for i, procs := range []int{1, 4, 8} {
					runtime.GOMAXPROCS(procs)
					var out, errs bytes.Buffer
					e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errs}
					code := run(e, args)
					got := fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
					if i == 0 {
						want = got
						continue
					}
					if got != want {
						t.Fatalf("GOMAXPROCS=%d gives other output than GOMAXPROCS=1:\n%s\nwant:\n%s", procs, got, want)
					}
				}
			})
		}
	}
}
