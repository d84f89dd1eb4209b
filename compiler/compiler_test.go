package compiler

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
	goldenfile "keyhole.dev/keyhole/internal/golden"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// golden compares got with the file at path (KEYHOLE_UPDATE=1 rewrites it).
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	goldenfile.Check(t, path, got)
}

// compileDir loads and compiles a fixture directory: walked, or, when it
// holds paths.txt, the paths that lists (one a line, relative to the
// fixture), named explicitly as a user would.
func compileDir(t *testing.T, dir string, opts Options) Result {
	t.Helper()
	paths := []string{dir}
	if b, err := os.ReadFile(filepath.Join(dir, "paths.txt")); err == nil {
		paths = nil
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			paths = append(paths, filepath.Join(dir, line))
		}
	}
	docs, ds, err := source.Load(paths, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	opts.Loaded = ds
	return Compile(docs, v, opts)
}

func render(ds diag.List) []byte {
	var b bytes.Buffer
	for _, d := range ds {
		if d.Suppressed != "" {
			b.WriteString("(suppressed by " + d.Suppressed + ") ")
		}
		b.WriteString(d.String() + "\n")
	}
	return b.Bytes()
}

// TestCheckFixtures runs every directory under testdata/checks: its YAML
// inputs and want.txt, the diagnostics expected, with code, severity,
// file, line and column.
func TestCheckFixtures(t *testing.T) {
	t.Chdir("testdata/checks")
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		t.Run(d.Name(), func(t *testing.T) {
			res := compileDir(t, d.Name(), Options{AllowMissingSecrets: strings.HasSuffix(d.Name(), "-allowed")})
			golden(t, filepath.Join(d.Name(), "want.txt"), render(res.Diagnostics))
		})
	}
}

// TestEveryCheckHasAFixture keeps the table and the fixtures together: a
// code no fixture produces is a check nobody has seen fire.
func TestEveryCheckHasAFixture(t *testing.T) {
	seen := map[string]bool{}
	wants, _ := filepath.Glob("testdata/checks/*/want.txt")
	for _, w := range wants {
		b, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range table() {
			if bytes.Contains(b, []byte(" "+c.Code+": ")) {
				seen[c.Code] = true
			}
		}
	}
	for _, c := range table() {
		if !seen[c.Code] {
			t.Errorf("no fixture under testdata/checks produces %s", c.Code)
		}
	}
}
