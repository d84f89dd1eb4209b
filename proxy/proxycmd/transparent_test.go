package proxycmd

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCopyNames: the copies are read-only and replace what the directory
// held under their names, a symbolic link included, without writing
// through it.
func TestCopyNames(t *testing.T) {
	tests := map[string]struct {
		before func(t *testing.T, dir, outside string)
	}{
		"empty directory": {before: func(*testing.T, string, string) {}},
		"older copies": {before: func(t *testing.T, dir, _ string) {
			for _, f := range []string{"hosts", "resolv.conf"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("old\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
		"symbolic links": {before: func(t *testing.T, dir, outside string) {
			for _, f := range []string{"hosts", "resolv.conf"} {
				if err := os.Symlink(outside, filepath.Join(dir, f)); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir, outside := t.TempDir(), filepath.Join(t.TempDir(), "target")
			if err := os.WriteFile(outside, []byte("untouched\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			tc.before(t, dir, outside)
			resolv, hosts := []byte("nameserver 10.96.0.10\n"), []byte("127.0.0.1\tlocalhost\n")
			if err := copyNames(dir, resolv, hosts); err != nil {
				t.Fatal(err)
			}
			for f, want := range map[string][]byte{"resolv.conf": resolv, "hosts": hosts} {
				p := filepath.Join(dir, f)
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o444 {
					t.Errorf("%s: mode %v, want a regular file 0444", f, fi.Mode())
				}
				if got, _ := os.ReadFile(p); string(got) != string(want) {
					t.Errorf("%s: %q, want %q", f, got, want)
				}
			}
			if got, _ := os.ReadFile(outside); string(got) != "untouched\n" {
				t.Errorf("written through a link: %q", got)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 2 {
				t.Errorf("the directory holds %d entries, want the 2 copies", len(entries))
			}
		})
	}
}
