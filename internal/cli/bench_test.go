package cli

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/bench/gen/synth"
)

// benchRepo writes the synthetic repository of KEYHOLE_BENCH_N Connections
// (default 1000, with a tenth as many agents) once per benchmark.
func benchRepo(b *testing.B) (dir string, files []string) {
	b.Helper()
	n := 1000
	if s := os.Getenv("KEYHOLE_BENCH_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("KEYHOLE_BENCH_N: %v", err)
		}
		n = v
	}
	dir = filepath.Join(b.TempDir(), "repo")
	if _, err := synth.Generate(dir, synth.Options{Connections: n, Agents: n / 10}); err != nil {
		b.Fatal(err)
	}
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

// BenchmarkCheckVsParse runs, on the same repository and in one run, the
// floor (reading the files and parsing them into yaml.Nodes with the
// YAML library) and the whole of `keyhole check`, and reports their ratio.
func BenchmarkCheckVsParse(b *testing.B) {
	dir, files := benchRepo(b)
	b.Run("parse", func(b *testing.B) {
		for b.Loop() {
			parseAll(b, files)
		}
	})
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			var out bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard}
			if code := run(e, []string{"check", dir}); code != exitOK {
				b.Fatalf("exit %d:\n%s", code, out.String())
			}
		}
	})
}

func parseAll(b *testing.B, files []string) {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
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
