// Package golden is the repository's one switch for expected files: the
// golden files tests compare against, and the docs generated from code.
// KEYHOLE_UPDATE=1, and no other value, makes the tests rewrite them
// instead of comparing; an unset or any other value compares, so a stray
// KEYHOLE_UPDATE=0 never blesses a changed file.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Env is the variable that switches updating on.
const Env = "KEYHOLE_UPDATE"

// Update reports whether tests rewrite their expected files.
func Update() bool { return os.Getenv(Env) == "1" }

// Check compares got with the file at path. Under Update it writes got to
// path instead (creating its directory) and compares nothing.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if Update() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (%s=1 writes it)", err, Env)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (%s=1 rewrites it)\n--- got\n%s\n--- want\n%s", path, Env, got, want)
	}
}
