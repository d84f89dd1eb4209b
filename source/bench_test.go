package source

import (
	"bytes"
	"os"
	"testing"

	"keyhole.dev/keyhole/bench/gen/synth"
)

// BenchmarkYAMLParse is the floor under BenchmarkLoad: the same files
// parsed into yaml.Nodes by the same library, with nothing else.
func BenchmarkYAMLParse(b *testing.B) {
	_, files := synth.ForBenchmark(b)
	var size int64
	for b.Loop() {
		size = synth.ParseFloor(b, files)
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
	var docs []*Document
	for b.Loop() {
		d, ds, err := testLoad([]string{dir}, Options{})
		if err != nil || len(ds) > 0 {
			b.Fatal(err, ds)
		}
		docs = d
	}
	b.ReportMetric(float64(len(docs)), "docs")
}

// crdLike is a large CustomResourceDefinition-shaped document, as an
// operator's release manifest holds many: mostly descriptions, with the
// words the scope checks look for in prose only (a field named
// allowConnections, secretKeyRef), and no kind field that is keyhole's or
// a Secret.
func crdLike(size int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: poolers.example.com}\nspec:\n  versions:\n  - name: v1\n    schema:\n      openAPIV3Schema:\n        properties:\n")
	for i := 0; b.Len() < size; i++ {
		b.WriteString("          field")
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString(":\n            description: The secretKeyRef of the pooler, as the cluster reads it when it opens a new connection to the database.\n            type: string\n")
		if i == 5000 {
			b.WriteString("          allowConnections:\n            description: Connection limits.\n            type: boolean\n")
		}
	}
	return b.Bytes()
}

// BenchmarkScopeMarkers measures the scope checks a walk runs on every
// file it finds (namesKeyhole, and declaresSecret once a Connection is
// in the input) on a CRD of 700 kB that names the words in prose only.
func BenchmarkScopeMarkers(b *testing.B) {
	data := crdLike(700 << 10)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if namesKeyhole("crd.yaml", data) || declaresSecret(data) {
			b.Fatal("the CRD names no kind of keyhole's and declares no Secret")
		}
	}
}
