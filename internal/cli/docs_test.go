package cli

import (
	"bytes"
	"os"
	"testing"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/render"
)

// TestChecksDoc keeps docs/checks.md equal to what the check table and
// the renderer's rules generate; KEYHOLE_UPDATE=1 rewrites it.
func TestChecksDoc(t *testing.T) {
	got := compiler.ChecksDoc(map[string][]diag.Rule{
		"Reported by `keyhole render --target omnia`": render.OmniaRules(),
	})
	const path = "../../docs/checks.md"
	if os.Getenv("KEYHOLE_UPDATE") == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date: run KEYHOLE_UPDATE=1 go test ./internal/cli", path)
	}
}
