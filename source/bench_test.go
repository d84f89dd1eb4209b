package source

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/bench/gen/synth"
)

// BenchmarkYAMLParse is the floor under BenchmarkLoad: the same files
// parsed into yaml.Nodes by the same library, with nothing else.
func BenchmarkYAMLParse(b *testing.B) {
	_, files := synth.ForBenchmark(b)
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
	dir, files := synth.ForBenchmark(b)
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
