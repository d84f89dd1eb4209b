package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/bench/gen/synth"
)

// BenchmarkCheckVsParse runs, on the same repository and in one run, the
// floor (reading the files and parsing them into yaml.Nodes with the
// YAML library), the whole of `keyhole check`, and `keyhole render
// --stdout` (check, then render every sandbox into one stream). Writing the
// rendered files with -o is measured apart (render-o): its cost is mostly
// the file system's, one file creation per rendered object.
func BenchmarkCheckVsParse(b *testing.B) {
	dir, files := synth.ForBenchmark(b)
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
	b.Run("render", func(b *testing.B) {
		for b.Loop() {
			var errs bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errs}
			if code := run(e, []string{"render", "--stdout", dir}); code != exitOK {
				b.Fatalf("exit %d:\n%s", code, errs.String())
			}
		}
	})
	b.Run("render-o", func(b *testing.B) {
		outDir := filepath.Join(b.TempDir(), "rendered")
		for b.Loop() {
			var out bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &out}
			if code := run(e, []string{"render", "-o", outDir, dir}); code != exitOK {
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
