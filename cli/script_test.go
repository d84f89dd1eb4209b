package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"

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
	examples, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}
	return testscript.Params{
		Dir:           dir,
		UpdateScripts: golden.Update(),
		Cmds:          map[string]func(ts *testscript.TestScript, neg bool, args []string){"encode": cmdEncode, "proxylog": cmdProxylog},
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

// cmdEncode saves a file of the script in another encoding, as Windows
// tools save YAML: "encode utf-16le|utf-16be|utf-32le|utf-32be FILE"
// rewrites FILE in place, with a byte order mark.
func cmdEncode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: encode utf-16le|utf-16be|utf-32le|utf-32be FILE")
	}
	encs := map[string]encoding.Encoding{
		"utf-16le": unicode.UTF16(unicode.LittleEndian, unicode.UseBOM),
		"utf-16be": unicode.UTF16(unicode.BigEndian, unicode.UseBOM),
		"utf-32le": utf32.UTF32(utf32.LittleEndian, utf32.UseBOM),
		"utf-32be": utf32.UTF32(utf32.BigEndian, utf32.UseBOM),
	}
	enc, ok := encs[args[0]]
	if !ok {
		ts.Fatalf("encode: unknown encoding %q", args[0])
	}
	p := ts.MkAbs(args[1])
	data, err := os.ReadFile(p)
	ts.Check(err)
	out, err := enc.NewEncoder().Bytes(data)
	ts.Check(err)
	ts.Check(os.WriteFile(p, out, 0o644))
}
