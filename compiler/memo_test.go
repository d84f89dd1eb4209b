package compiler

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// TestMemo compiles each check fixture twice, its documents loaded with
// one source.Memo so that they share nodes, and then for a declared
// operator: with a Memo, every Result is the one Compile gives without,
// and the second compile validates no node again.
func TestMemo(t *testing.T) {
	dirs, err := os.ReadDir(filepath.Join("testdata", "checks"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		t.Run(d.Name(), func(t *testing.T) {
			dir := filepath.Join("testdata", "checks", d.Name())
			loads := source.NewMemo()
			load := func() ([]source.Document, Options) {
				docs, ds, err := source.Load([]string{dir}, source.Options{Memo: loads})
				if err != nil {
					t.Fatal(err)
				}
				return docs, Options{Loaded: ds}
			}
			memo := NewMemo()
			steps := []struct {
				name, operator string
			}{
				{name: "first"},
				{name: "again"},
				{name: "declared operator", operator: "v0.9.0-beta.17"},
			}
			for _, step := range steps {
				docs, opts := load()
				opts.OperatorVersion = step.operator
				hits := memo.Hits()
				fresh := Compile(docs, v, opts)
				opts.Memo = memo
				got := Compile(docs, v, opts)
				if !reflect.DeepEqual(got, fresh) {
					t.Errorf("%s: with the memo:\n%v\nwithout:\n%v", step.name, got.Diagnostics, fresh.Diagnostics)
				}
				// Documents kustomize builds are new nodes on each load.
				if step.name == "again" && len(memo.found) > 0 && memo.Hits() == hits && !fromKustomize(docs) {
					t.Errorf("%s: no validation reused", step.name)
				}
			}
		})
	}
}

func fromKustomize(docs []source.Document) bool {
	for _, d := range docs {
		if d.Unit != source.LooseUnit {
			return true
		}
	}
	return false
}
