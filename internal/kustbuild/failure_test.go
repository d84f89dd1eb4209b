package kustbuild

import (
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"

// build runs kustomize, as the loader does, on files (absolute path →
// contents) and returns the error of building /k, which must fail.
func build(t *testing.T, files map[string]string) error {
	t.Helper()
	fs := filesys.MakeFsInMemory()
	for p, data := range files {
		if err := fs.WriteFile(p, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	opts := krusty.MakeDefaultOptions()
	opts.AddManagedbyLabel = false
	_, err := krusty.MakeKustomizer(opts).Run(fs, "/k")
	if err == nil {
		t.Fatal("the build succeeded; the case needs it to fail")
	}
	return err
}

// The failures read from kustomize's messages: each is a real failing
// build, so that a kustomize whose text differs fails here.
func TestFailureMessages(t *testing.T) {
	t.Run("MalformedYAML", func(t *testing.T) {
		err := build(t, map[string]string{
			"/k/kustomization.yaml": "resources: [r.yaml]\n",
			"/k/r.yaml":             configMap + "data:\n  a: [1, 2\n  b: c\n",
		})
		line, problem, file, ok := MalformedYAML(err.Error())
		// go-yaml's line, which the loader maps to the line at fault
		// (source's errorLine).
		if !ok || line != 4 || problem != "did not find expected ',' or ']'" || file != "r.yaml" {
			t.Errorf("MalformedYAML(%q) = %d, %q, %q, %v; want 4, did not find expected ',' or ']', r.yaml", err, line, problem, file, ok)
		}
	})
	t.Run("KustomizationYAML", func(t *testing.T) {
		err := build(t, map[string]string{
			"/k/kustomization.yaml": "resources:\n  - r.yaml\n namespace: x\n",
			"/k/r.yaml":             configMap,
		})
		line, problem, ok := KustomizationYAML(err.Error())
		if !ok || line != 2 || problem != "did not find expected key" {
			t.Errorf("KustomizationYAML(%q) = %d, %q, %v; want 2, did not find expected key", err, line, problem, ok)
		}
	})
	t.Run("UnmatchedPatch", func(t *testing.T) {
		err := build(t, map[string]string{
			"/k/kustomization.yaml": "resources: [r.yaml]\npatches:\n  - path: p.yaml\n",
			"/k/r.yaml":             configMap,
			"/k/p.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y.dotted\ndata: {a: b}\n",
		})
		kind, name, ok := UnmatchedPatch(err.Error())
		if !ok || kind != "ConfigMap" || name != "y.dotted" {
			t.Errorf("UnmatchedPatch(%q) = %q, %q, %v; want ConfigMap, y.dotted", err, kind, name, ok)
		}
	})
}

// BadField reads kustomize's typed error, in the root kustomization and
// in a base.
func TestBadField(t *testing.T) {
	tests := map[string]struct {
		files map[string]string
		field string
		list  bool
	}{
		"a list where a string belongs": {
			files: map[string]string{"/k/kustomization.yaml": "resources: [r.yaml]\nnamePrefix: [a]\n", "/k/r.yaml": configMap},
			field: "namePrefix",
			list:  true,
		},
		"a string where an object belongs": {
			files: map[string]string{"/k/kustomization.yaml": "resources: [r.yaml]\npatches:\n  - patch.yaml\n", "/k/r.yaml": configMap},
			field: "patches",
		},
		"in a base": {
			files: map[string]string{"/k/kustomization.yaml": "resources: [../base]\n", "/base/kustomization.yaml": "namespace: [a]\n"},
			field: "namespace",
			list:  true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := build(t, tc.files)
			field, list, ok := BadField(err)
			if !ok || field != tc.field || list != tc.list {
				t.Errorf("BadField(%v) = %q, %v, %v; want %q, %v", err, field, list, ok, tc.field, tc.list)
			}
		})
	}
	t.Run("another error", func(t *testing.T) {
		err := build(t, map[string]string{"/k/kustomization.yaml": "resources: [missing.yaml]\n"})
		if field, _, ok := BadField(err); ok {
			t.Errorf("BadField(%v) = %q; want none", err, field)
		}
	})
}
