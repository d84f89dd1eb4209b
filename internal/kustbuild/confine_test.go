package kustbuild

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"keyhole.dev/keyhole/diag"
)

func TestInside(t *testing.T) {
	root := filepath.FromSlash("/repo")
	tests := map[string]bool{
		"/repo":                     true,
		"/repo/apps/k.yaml":         true,
		"/repo/.github/workflows/a": true,
		"/repo/a/.gitignore":        true,
		"/repo/.git":                false,
		"/repo/.git/config":         false,
		"/repo/.GIT/config":         false,
		"/repo/vendor/x/.Git/HEAD":  false,
		"/repo2/k.yaml":             false,
		"/proc/self/environ":        false,
		"/":                         false,
	}
	for p, want := range tests {
		if got := Inside(root, filepath.FromSlash(p)); got != want {
			t.Errorf("Inside(%s, %s) = %v, want %v", root, p, got, want)
		}
	}
}

// diskRules are the loader's rules as a build on disk needs them, with no
// link ever outside.
type diskRules struct{}

func (diskRules) Stat(name string) (fs.FileInfo, error)                   { return os.Stat(name) }
func (diskRules) Outside(string) (string, diag.Diagnostic)                { return "", diag.Diagnostic{} }
func (diskRules) Decode(_ string, data []byte) ([]byte, *diag.Diagnostic) { return data, nil }
func (diskRules) TooLarge(int64, int64) diag.Diagnostic                   { return diag.Diagnostic{} }
func (diskRules) AliasesPastLimit(string, []byte) bool                    { return false }

// TestBuildConfined: with load restrictions off, a generator still reads
// nothing outside Options.Root nor in its .git; what stays inside builds.
func TestBuildConfined(t *testing.T) {
	const canary = "canary-9d41-outside"
	top := t.TempDir()
	root := filepath.Join(top, "repo")
	for name, body := range map[string]string{
		"secret.env":         "TOKEN=" + canary + "\n",
		"repo/.git/config":   "[http]\n\textraheader = " + canary + "\n",
		"repo/app/plain.env": "NAME=plain\n",
	} {
		p := filepath.Join(top, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[string]struct {
		source  string
		outside bool
	}{
		"../ out of the root":     {source: "envs: [../../secret.env]", outside: true},
		"an absolute path":        {source: "envs: [" + filepath.Join(top, "secret.env") + "]", outside: true},
		".git, by ../":            {source: "files: [c=../.git/config]", outside: true},
		"inside the root":         {source: "envs: [plain.env]"},
		"inside, by ../ and back": {source: "envs: [../app/plain.env]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, "app")
			o := Options{MaxSize: 1 << 20, Unrestricted: true, Root: root,
				KFile: filepath.Join(dir, "kustomization.yaml"), KData: []byte("configMapGenerator:\n  - name: leak\n    " + tc.source + "\n")}
			disk, err := OnDisk(root, false)
			if err != nil {
				t.Fatal(err)
			}
			m, _, err := Build(disk, diskRules{}, dir, o)
			if !tc.outside {
				if err != nil {
					t.Fatalf("build: %v", err)
				}
				if m.Size() != 1 {
					t.Fatalf("built %d objects", m.Size())
				}
				return
			}
			var o2 *Outside
			if err == nil || !errors.As(err, &o2) && !strings.Contains(err.Error(), "outside the repository") {
				t.Fatalf("build did not refuse the read: %v", err)
			}
			if m != nil {
				if y, _ := m.AsYaml(); strings.Contains(string(y), canary) {
					t.Fatalf("the build holds the file outside")
				}
			}
			if strings.Contains(err.Error(), canary) {
				t.Fatalf("the error holds the file outside: %v", err)
			}
		})
	}
}

// TestConfinedReadsWhatItChecks: a path is read as it was checked,
// cleaned: "link/.." is the directory the path names, not the parent of
// the link's target, which the OS would read.
func TestConfinedReadsWhatItChecks(t *testing.T) {
	const canary = "canary-3b7e-above-the-target"
	top := t.TempDir()
	root := filepath.Join(top, "repo")
	for _, d := range []string{root, filepath.Join(top, "outside", "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(top, "outside", "secret"), []byte(canary), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(top, "outside", "sub"), filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	f := confinedFS{FileSystem: filesys.MakeFsOnDisk(), root: root, real: root, refused: &Outside{}}
	data, err := f.ReadFile(root + "/d/../secret")
	if strings.Contains(string(data), canary) {
		t.Fatalf("read through the link's parent: %q", data)
	}
	if err == nil {
		t.Fatal("read a file that is not in the repository")
	}
}
