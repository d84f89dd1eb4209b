package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestUpdateOnlyOnOne: only the exact value 1 rewrites; every other value
// compares, so a typo cannot bless a changed golden file.
func TestUpdateOnlyOnOne(t *testing.T) {
	cases := map[string]struct {
		value string
		want  bool
	}{
		"one":   {"1", true},
		"zero":  {"0", false},
		"true":  {"true", false},
		"empty": {"", false},
		"space": {" 1", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv(Env, tc.value)
			if got := Update(); got != tc.want {
				t.Errorf("%s=%q: Update() = %v, want %v", Env, tc.value, got, tc.want)
			}
		})
	}
}

// TestCheckRewritesOnlyUnderUpdate: with the switch off a differing file
// is left as it is; with it on, the file becomes what was got.
func TestCheckRewritesOnlyUnderUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "want.txt")
	t.Setenv(Env, "1")
	Check(t, path, []byte("new\n"))
	if b, err := os.ReadFile(path); err != nil || string(b) != "new\n" {
		t.Fatalf("under update: %q, %v", b, err)
	}
	t.Setenv(Env, "0")
	var rec recorder
	Check(&rec, path, []byte("other\n"))
	if !rec.failed {
		t.Error("a differing file passed with KEYHOLE_UPDATE=0")
	}
	if b, _ := os.ReadFile(path); string(b) != "new\n" {
		t.Errorf("KEYHOLE_UPDATE=0 rewrote the file: %q", b)
	}
}

// recorder is a testing.TB that records a failure instead of stopping.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Fatal(...any)          { r.failed = true }

// TestOneSwitch: no other file reads the variable, so no test can grow
// its own, laxer rule for it again.
func TestOneSwitch(t *testing.T) {
	root := filepath.Join("..", "..")
	needle := []byte(`Getenv("` + Env + `")`)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".cache" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(p) != ".go" || filepath.Base(filepath.Dir(p)) == "golden" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			t.Errorf("%s reads %s itself; use golden.Update or golden.Check", p, Env)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
