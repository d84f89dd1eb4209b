package synth

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
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
