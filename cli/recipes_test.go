package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConnectionRecipes: each YAML block of docs/connections.md checks
// clean, with no warning, as its page promises; and the value its Secret
// holds is printed nowhere.
func TestConnectionRecipes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "connections.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	for line := range strings.Lines(string(b)) {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur = new(strings.Builder)
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	if len(blocks) < 8 {
		t.Fatalf("%d recipes found in docs/connections.md, want every one of its sections'", len(blocks))
	}
	for i, block := range blocks {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "recipe.yaml"), []byte(block), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := Main([]string{"check", "--format", "json", dir}, &stdout, &stderr)
			var res struct {
				Diagnostics []struct{ Code, Severity, Message string }
				Summary     struct{ Objects, Errors, Warnings int }
			}
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				t.Fatalf("exit %d, %v:\n%s%s", code, err, stdout.String(), stderr.String())
			}
			objects := 2 // a Connection and its Secret
			if strings.Contains(block, "identity: workload") {
				objects = 1 // the proxy's own identity: no Secret
			}
			if code != 0 || res.Summary.Errors+res.Summary.Warnings > 0 || res.Summary.Objects != objects {
				t.Errorf("exit %d, %+v:\n%s", code, res.Summary, stdout.String())
			}
			if strings.Contains(stdout.String()+stderr.String(), "REPLACE-ME") {
				t.Error("the Secret's value is printed")
			}
		})
	}
}
