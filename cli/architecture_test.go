package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestArchitectureImports keeps docs/architecture.md's list of each
// package's keyhole imports equal to what go list gives, so the drawing
// of the house is the house.
func TestArchitectureImports(t *testing.T) {
	root := ".."
	out, err := exec.Command("go", "list", "-C", root, "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "keyhole.dev/keyhole/"
	var want []string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		if strings.HasPrefix(pkg, "bench") {
			continue
		}
		var deps []string
		for _, imp := range f[1:] {
			if d, ok := strings.CutPrefix(imp, mod); ok {
				deps = append(deps, d)
			}
		}
		if len(deps) > 0 {
			want = append(want, pkg+": "+strings.Join(deps, " "))
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n```text\naccess:")
	if start < 0 {
		t.Fatal("docs/architecture.md has no import list starting with access:")
	}
	list, _, _ := strings.Cut(doc[start+len("\n```text\n"):], "```")
	if got := strings.TrimSpace(list); got != strings.Join(want, "\n") {
		t.Errorf("docs/architecture.md lists the imports as\n%s\ngo list gives\n%s", got, strings.Join(want, "\n"))
	}
}
