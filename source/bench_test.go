package source

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

	"keyhole.dev/keyhole/bench/gen/synth"
)

// benchRepo generates the synthetic repository the benchmarks read:
// KEYHOLE_BENCH_N Connections (default 1000) and a tenth as many agents.
func benchRepo(b *testing.B) (string, []string) {
	b.Helper()
	n := 1000
	if s := os.Getenv("KEYHOLE_BENCH_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("KEYHOLE_BENCH_N: %v", err)
		}
		n = v
	}
	dir := filepath.Join(b.TempDir(), "repo")
	if _, err := synth.Generate(dir, synth.Options{Connections: n, Agents: n / 10}); err != nil {
		b.Fatal(err)
	}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return dir, files
}

// BenchmarkYAMLParse is the floor under BenchmarkLoad: the same files
// parsed into yaml.Nodes by the same library, with nothing else.
func BenchmarkYAMLParse(b *testing.B) {
	_, files := benchRepo(b)
	var size int64
	for b.Loop() {
		size = 0
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			size += int64(len(data))
			dec := yaml.NewDecoder(bytes.NewReader(data))
			for {
				var n yaml.Node
				if err := dec.Decode(&n); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.SetBytes(size)
}

// BenchmarkLoad measures source.Load on the whole repository: the walk,
// .gitignore matching, byte checks, parsing, alias resolution and the
// document checks.
func BenchmarkLoad(b *testing.B) {
	dir, files := benchRepo(b)
	var size int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			b.Fatal(err)
		}
		size += fi.Size()
	}
	b.SetBytes(size)
	var docs []Document
	for b.Loop() {
		d, ds, err := Load([]string{dir}, Options{})
		if err != nil || len(ds) > 0 {
			b.Fatal(err, ds)
		}
		docs = d
	}
	b.ReportMetric(float64(len(docs)), "docs")
}
