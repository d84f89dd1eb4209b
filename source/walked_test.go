package source

import (
	"os"
	"path/filepath"
	"testing"

	"keyhole.dev/keyhole/diag"
)

// TestWalkedNonObjects: a repository holds other tools' YAML and JSON. A
// document with neither apiVersion nor kind found by a walk is skipped at
// info; the same file named explicitly, or a document with only one of the
// two, is an error.
func TestWalkedNonObjects(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"package.json":       `{"name": "app"}`,
		"docker-compose.yml": "services:\n  web: {image: nginx}\n",
		"half.yaml":          "kind: Connection\nmetadata: {name: c}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[string]struct {
		paths []string
		want  map[string]diag.Severity // code by file base name
	}{
		"walked": {
			paths: []string{dir},
			want:  map[string]diag.Severity{"package.json": diag.Info, "docker-compose.yml": diag.Info, "half.yaml": diag.Error},
		},
		"named": {
			paths: []string{filepath.Join(dir, "package.json"), filepath.Join(dir, "docker-compose.yml")},
			want:  map[string]diag.Severity{"package.json": diag.Error, "docker-compose.yml": diag.Error},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			docs, ds, err := testLoad(tc.paths, Options{})
			if err != nil || len(docs) != 0 {
				t.Fatalf("Load: %d docs, %v", len(docs), err)
			}
			got := map[string]diag.Severity{}
			for _, d := range ds {
				got[filepath.Base(d.Pos.File)] = d.Severity
				wantCode := CodeKindMissing
				if d.Severity == diag.Info {
					wantCode = CodeInputSkipped
				}
				if d.Code != wantCode {
					t.Errorf("%s: code %s at %s, want %s", d.Pos, d.Code, d.Severity, wantCode)
				}
			}
			for f, sev := range tc.want {
				if got[f] != sev {
					t.Errorf("%s: severity %v, want %v (all: %v)", f, got[f], sev, ds)
				}
			}
		})
	}
}
