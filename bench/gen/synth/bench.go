package synth

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"go.yaml.in/yaml/v3"
)

// ForBenchmark writes, under tb's temporary directory, the repository the
// repository's benchmarks share: KEYHOLE_BENCH_N Connections (default
// 1000), a tenth as many agents, and KEYHOLE_BENCH_OVERLAYS kustomize
// overlays (default 3). It returns the repository's directory
// and its files, so benchmarks can time parsing them apart from walking.
func ForBenchmark(tb testing.TB) (dir string, files []string) {
	tb.Helper()
	n, overlays := envCount(tb, "KEYHOLE_BENCH_N", 1000), envCount(tb, "KEYHOLE_BENCH_OVERLAYS", 3)
	dir = filepath.Join(tb.TempDir(), "repo")
	if _, err := Generate(dir, Options{Connections: n, Agents: n / 10, Overlays: overlays}); err != nil {
		tb.Fatal(err)
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return dir, files
}

func envCount(tb testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		tb.Fatalf("%s=%q: want a count", name, s)
	}
	return v
}

// ParseFloor reads each of files and parses its documents into yaml.Nodes
// with the YAML library keyhole's loader uses, and does nothing else: the
// floor under a load of the same files. It returns the bytes it read.
func ParseFloor(tb testing.TB, files []string) (size int64) {
	tb.Helper()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		size += int64(len(data))
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				tb.Fatal(err)
			}
		}
	}
	return size
}
