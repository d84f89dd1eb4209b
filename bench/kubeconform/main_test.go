package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// TestWriteSchemas writes the per-kind files and validates documents with
// them as kubeconform would: a file per kind, found by the lower-case
// kind, that accepts a valid object and refuses an invalid one.
func TestWriteSchemas(t *testing.T) {
	dir := t.TempDir()
	if code := run([]string{"-o", dir}, os.Stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	tests := map[string]struct {
		kind  string
		doc   string
		valid bool
	}{
		"a valid Secret": {
			kind: "Secret", valid: true,
			doc: `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"token": "x"}}`,
		},
		"a Connection with an unknown field": {
			kind: "Connection", valid: false,
			doc: `{"apiVersion": "omnia.altairalabs.ai/v1alpha1", "kind": "Connection", "metadata": {"name": "c"}, "spec": {"bogus": 1}}`,
		},
		"a SandboxClass without its spec": {
			kind: "SandboxClass", valid: false,
			doc: `{"apiVersion": "omnia.altairalabs.ai/v1alpha1", "kind": "SandboxClass", "metadata": {"name": "c"}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ToLower(tc.kind)+".json")
			s, err := jsonschema.Compile(file)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal([]byte(tc.doc), &v); err != nil {
				t.Fatal(err)
			}
			err = s.Validate(v)
			if (err == nil) != tc.valid {
				t.Fatalf("valid = %v, want %v (%v)", err == nil, tc.valid, err)
			}
		})
	}
	if code := run(nil, &strings.Builder{}); code != 2 {
		t.Fatalf("without -o: exit %d, want 2", code)
	}
}
