package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"keyhole.dev/keyhole/internal/golden"
)

// TestGeneratedFilesMatchCUE is the drift test: the committed generated
// files must be exactly what the CUE generates now. Fix a failure with
// `go generate ./schema` (or KEYHOLE_UPDATE=1 go test ./...), never by
// editing the generated files.
func TestGeneratedFilesMatchCUE(t *testing.T) {
	dir := filepath.Join("..", "..")
	files, err := generate(dir)
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if len(files) == 0 {
		t.Fatal("generate produced no files")
	}
	if golden.Update() {
		// The repository's one way to refresh generated and golden files.
		if err := write(dir, files); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("%s: %v (run go generate ./schema)", name, err)
			continue
		}
		if !bytes.Equal(got, files[name]) {
			t.Errorf("%s differs from what schema.cue generates; run go generate ./schema", name)
		}
	}
	// A CRD whose kind was dropped must not linger on disk.
	onDisk, err := filepath.Glob(filepath.Join(dir, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range onDisk {
		if _, ok := files["crds/"+filepath.Base(path)]; !ok {
			t.Errorf("%s is not generated any more; delete it", path)
		}
	}
}

// TestGenerateIsDeterministic guards the drift test itself: generating
// twice must give the same bytes, or drift would be reported at random.
func TestGenerateIsDeterministic(t *testing.T) {
	dir := filepath.Join("..", "..")
	a, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(a, b, bytes.Equal) {
		t.Error("two runs of generate gave different output")
	}
}
