package memlimit

import (
	"os"
	"path/filepath"
	"testing"
)

// writeTree writes files of the given sizes under a new directory.
func writeTree(t *testing.T, sizes map[string]int) string {
	t.Helper()
	dir := t.TempDir()
	for name, n := range sizes {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestInputSize(t *testing.T) {
	dir := writeTree(t, map[string]int{
		"a.yaml":          1000,
		"sub/b.yml":       200,
		"sub/c.json":      30,
		"chart/t.tpl":     4,
		".git/objects/ab": 1 << 20, // not an input
	})
	if err := os.Symlink(filepath.Join(dir, "a.yaml"), filepath.Join(dir, "sub", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "dirlink")); err != nil {
		t.Fatal(err)
	}
	kust := writeTree(t, map[string]int{"a.yaml": 10, "overlay/kustomization.yaml": 10})
	chart := writeTree(t, map[string]int{"a.yaml": 10, "charts/c/Chart.yaml": 10})
	tests := map[string]struct {
		paths []string
		size  int64
		ok    bool
	}{
		"a directory: its files, a link to a file read through, .git and a link to a directory not": {paths: []string{dir}, size: 1000 + 200 + 30 + 4 + 1000, ok: true},
		"a file":                         {paths: []string{filepath.Join(dir, "a.yaml")}, size: 1000, ok: true},
		"two paths":                      {paths: []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "chart")}, size: 1004, ok: true},
		"a link to a directory, named":   {paths: []string{filepath.Join(dir, "dirlink")}, size: 200 + 30 + 1000, ok: true},
		"standard input cannot be sized": {paths: []string{dir, "-"}},
		"a missing path cannot be sized": {paths: []string{filepath.Join(dir, "missing")}},
		"a kustomization is not sized":   {paths: []string{kust}},
		"a Helm chart is not sized":      {paths: []string{chart}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			size, ok := InputSize(tt.paths)
			if size != tt.size || ok != tt.ok {
				t.Fatalf("InputSize = %d, %v; want %d, %v", size, ok, tt.size, tt.ok)
			}
		})
	}
}

func TestInputSizeOfTheWorkingDirectory(t *testing.T) {
	dir := writeTree(t, map[string]int{"a.yaml": 123})
	t.Chdir(dir)
	if size, ok := InputSize(nil); size != 123 || !ok {
		t.Fatalf("InputSize(nil) = %d, %v; want 123, true", size, ok)
	}
}

func TestForInput(t *testing.T) {
	dir := writeTree(t, map[string]int{"a.yaml": 10 << 20})
	sized := InputBase + int64(float64(10<<20)*PerInputByte)
	tests := map[string]struct {
		env   map[string]string
		d     Decision
		paths []string
		want  Decision
	}{
		"no other limit": {
			d:     Decision{Why: "the cgroup sets no memory limit"},
			paths: []string{dir},
			want:  Decision{Limit: sized, Input: 10 << 20},
		},
		"below the cgroup's": {
			d:     Decision{Cgroup: 1 << 30, Limit: 900 << 20},
			paths: []string{dir},
			want:  Decision{Cgroup: 1 << 30, Limit: sized, Input: 10 << 20},
		},
		"the cgroup's is lower": {
			d:     Decision{Cgroup: 40 << 20, Limit: 36 << 20},
			paths: []string{dir},
			want:  Decision{Cgroup: 40 << 20, Limit: 36 << 20},
		},
		"GOMEMLIMIT wins": {
			env:   map[string]string{"GOMEMLIMIT": "1GiB"},
			d:     Decision{Why: "GOMEMLIMIT is set"},
			paths: []string{dir},
			want:  Decision{Why: "GOMEMLIMIT is set"},
		},
		"an input that cannot be sized": {
			d:     Decision{Why: "the cgroup sets no memory limit"},
			paths: []string{"-"},
			want:  Decision{Why: "the cgroup sets no memory limit"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var set int64 = -1
			got := forInput(tt.d, tt.paths, func(k string) string { return tt.env[k] }, func(n int64) int64 { set = n; return 0 })
			if got != tt.want {
				t.Fatalf("forInput = %+v, want %+v", got, tt.want)
			}
			// The limit is set only where the input sized it.
			want := int64(-1)
			if tt.want.Input > 0 {
				want = tt.want.Limit
			}
			if set != want {
				t.Fatalf("set the limit to %d, want %d", set, want)
			}
		})
	}
}
