package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"keyhole.dev/keyhole/internal/golden"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"keyhole": func() { os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs testdata/script/*.txtar. Each script starts in a work
// directory holding a copy of the repository's examples/, so scripts name
// them by the same relative paths a user would. KEYHOLE_UPDATE=1 rewrites
// the scripts' expected output.
func TestScripts(t *testing.T) {
	testscript.Run(t, scriptParams(t, "testdata/script", nil))
}

// scriptParams runs the scripts in dir, each in a work directory holding
// a copy of examples/, after setup (when set) has prepared it further.
func scriptParams(t *testing.T, dir string, setup func(env *testscript.Env) error) testscript.Params {
	t.Helper()
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	return testscript.Params{
		Dir:           dir,
		UpdateScripts: golden.Update(),
		Setup: func(env *testscript.Env) error {
			if setup != nil {
				if err := setup(env); err != nil {
					return err
				}
			}
			return copyTree(examples, filepath.Join(env.WorkDir, "examples"))
		},
	}
}

func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}
