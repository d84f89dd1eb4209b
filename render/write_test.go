package render

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// snapshot reads every file and directory under dir, so a test can assert
// that a failed write left it exactly as it was.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel+"/"] = info.Mode().String()
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = info.Mode().String() + " " + string(data)
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return out
}

func equalSnapshots(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// siblings lists the entries next to dir, to catch staging leftovers.
func siblings(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestWriteDir: a render lands as exactly its files plus the marker, and
// replaces a previous render completely.
func TestWriteDir(t *testing.T) {
	tests := map[string]struct {
		setup func(t *testing.T, dir string)
	}{
		"absent": {setup: func(t *testing.T, dir string) {}},
		"empty": {setup: func(t *testing.T, dir string) {
			if err := os.Mkdir(dir, 0o750); err != nil {
				t.Fatal(err)
			}
		}},
		"previous render": {setup: func(t *testing.T, dir string) {
			old := []File{{Path: "stale/old.yaml", Data: []byte("old\n")}, {Path: "kustomization.yaml", Data: []byte("old\n")}}
			if err := WriteDir(dir, old); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			tc.setup(t, dir)
			files := mustRender(t, testPlan(), Options{})
			if err := WriteDir(dir, files); err != nil {
				t.Fatalf("WriteDir: %v", err)
			}
			got := snapshot(t, dir)
			want := map[string]bool{MarkerFile: true}
			for _, f := range files {
				want[filepath.FromSlash(f.Path)] = true
				if data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path))); err != nil || !bytes.Equal(data, f.Data) {
					t.Errorf("%s: %v, content differs", f.Path, err)
				}
			}
			for p := range got {
				if !strings.HasSuffix(p, "/") && !want[p] {
					t.Errorf("unexpected file %s", p)
				}
			}
			if s := siblings(t, dir); len(s) != 1 {
				t.Errorf("staging left siblings behind: %v", s)
			}
		})
	}
}

// TestWriteDirRefuses: every refusal and every failure leaves the
// directory exactly as it was and no staging directory behind.
func TestWriteDirRefuses(t *testing.T) {
	good := []File{{Path: "a/b.yaml", Data: []byte("b\n")}}
	tests := map[string]struct {
		setup func(t *testing.T, dir string)
		files []File
		want  error // nil: any error
	}{
		"foreign directory": {
			setup: func(t *testing.T, dir string) {
				mkfile(t, filepath.Join(dir, "precious.txt"), "mine\n")
			},
			files: good,
			want:  ErrNotOwned,
		},
		"marker is a directory": {
			setup: func(t *testing.T, dir string) {
				if err := os.MkdirAll(filepath.Join(dir, MarkerFile), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			files: good,
			want:  ErrNotOwned,
		},
		"output is a file": {
			setup: func(t *testing.T, dir string) { mkfile(t, dir, "not a dir\n") },
			files: good,
		},
		"no files":       {setup: writePrevious, files: nil, want: ErrEmpty},
		"absolute path":  {setup: writePrevious, files: []File{{Path: "/etc/x", Data: nil}}, want: ErrInvalidFile},
		"escaping path":  {setup: writePrevious, files: []File{{Path: "../x", Data: nil}}, want: ErrInvalidFile},
		"unclean path":   {setup: writePrevious, files: []File{{Path: "a//b", Data: nil}}, want: ErrInvalidFile},
		"backslash path": {setup: writePrevious, files: []File{{Path: `a\b`, Data: nil}}, want: ErrInvalidFile},
		"duplicate path": {setup: writePrevious, files: []File{{Path: "a"}, {Path: "a"}}, want: ErrInvalidFile},
		"file and dir":   {setup: writePrevious, files: []File{{Path: "a"}, {Path: "a/b"}}, want: ErrInvalidFile},
		"marker path":    {setup: writePrevious, files: []File{{Path: MarkerFile}}, want: ErrInvalidFile},
		// The OS refuses a name longer than 255 bytes while staging, after
		// other files were written: the failure comes mid-write.
		"failure while staging": {
			setup: writePrevious,
			files: []File{{Path: "a.yaml", Data: []byte("a\n")}, {Path: "z/" + strings.Repeat("n", 300), Data: []byte("x")}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			tc.setup(t, dir)
			before := snapshot(t, dir)
			err := WriteDir(dir, tc.files)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("WriteDir = %v, want %v", err, tc.want)
			}
			if after := snapshot(t, dir); !equalSnapshots(before, after) {
				t.Errorf("directory changed:\nbefore %v\nafter  %v", before, after)
			}
			if s := siblings(t, dir); len(s) != 1 {
				t.Errorf("staging left siblings behind: %v", s)
			}
		})
	}
}

// TestWriteDirMissingParent: missing parents are made, as mkdir -p
// would, and the tree is written below them.
func TestWriteDirMissingParent(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "no", "such", "out")
	if err := WriteDir(out, []File{{Path: "a", Data: []byte("a")}}); err != nil {
		t.Fatalf("WriteDir into a missing parent: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "a")); err != nil || string(b) != "a" {
		t.Errorf("out/a = %q, %v; want \"a\"", b, err)
	}
}

func writePrevious(t *testing.T, dir string) {
	t.Helper()
	if err := WriteDir(dir, mustRender(t, testPlan(), Options{})); err != nil {
		t.Fatal(err)
	}
}

func mkfile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStream: the stream holds every object once, in path order, and
// nothing else; an empty one is an error.
func TestStream(t *testing.T) {
	files := mustRender(t, twoSandboxPlan(), Options{ProxyMode: ModeDeployment, DefaultSandboxImage: "img:1"})
	stream, err := Stream(files)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(stream, []byte("---\n")) {
		t.Errorf("stream does not start with a document marker")
	}
	var got []string
	for _, o := range streamObjects(t, stream) {
		if o["kind"] == "Kustomization" {
			t.Errorf("stream holds the kustomization")
		}
		got = append(got, manifestName(o))
	}
	objs := objects(t, files)
	if len(got) != len(objs) {
		t.Errorf("stream holds %d objects, want %d", len(got), len(objs))
	}

	empty := map[string][]File{
		"no files":               {},
		"only the kustomization": {{Path: "kustomization.yaml", Data: []byte("kind: Kustomization\n")}},
		"only data files":        {{Path: "a/env.json", Data: []byte("{}\n")}, {Path: "a/.env", Data: nil}},
		"only blank manifest":    {{Path: "a/x.yaml", Data: []byte("\n")}},
	}
	for name, fs := range empty {
		t.Run(name, func(t *testing.T) {
			if out, err := Stream(fs); !errors.Is(err, ErrEmpty) || out != nil {
				t.Errorf("Stream = %q, %v; want ErrEmpty", out, err)
			}
			var w bytes.Buffer
			if err := WriteStream(&w, fs); !errors.Is(err, ErrEmpty) || w.Len() != 0 {
				t.Errorf("WriteStream wrote %q, %v; want nothing and ErrEmpty", w.String(), err)
			}
		})
	}
}

// TestWriteStream: WriteStream writes what Stream returns, byte for byte,
// including for a file without a final newline and a stream larger than
// its write buffer; a failing writer's error is returned.
func TestWriteStream(t *testing.T) {
	big := bytes.Repeat([]byte("a: b\n"), 100_000)
	tests := map[string][]File{
		"rendered": mustRender(t, twoSandboxPlan(), Options{ProxyMode: ModeDeployment, DefaultSandboxImage: "img:1"}),
		"no final newline": {
			{Path: "b.yaml", Data: []byte("kind: B")},
			{Path: "a.yaml", Data: []byte("kind: A\n")},
		},
		"larger than the buffer": {{Path: "a.yaml", Data: big}, {Path: "b.yaml", Data: big}},
	}
	for name, files := range tests {
		t.Run(name, func(t *testing.T) {
			want, err := Stream(files)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := WriteStream(&got, files); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("WriteStream wrote %d bytes that differ from Stream's %d", got.Len(), len(want))
			}
			if err := WriteStream(failingWriter{}, files); !errors.Is(err, errWrite) {
				t.Errorf("WriteStream to a failing writer = %v, want %v", err, errWrite)
			}
		})
	}
}

var errWrite = errors.New("write refused")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

// TestWriteDirRemovesStale: what a killed render left beside the output
// (a staged tree, a set-aside previous render) is removed by the next
// render once it is older than any running render's; a fresh one, which
// may belong to a render running beside this one, and another output's,
// are kept.
func TestWriteDirRemovesStale(t *testing.T) {
	for _, exists := range []bool{false, true} {
		t.Run(fmt.Sprintf("output exists %v", exists), func(t *testing.T) {
			root := t.TempDir()
			out := filepath.Join(root, "out")
			if exists {
				writePrevious(t, out)
			}
			long := time.Now().Add(-staleAfter - time.Minute)
			stale := []string{".out.keyhole-new-111", ".out.keyhole-old-222"}
			kept := []string{".out.keyhole-new-333", ".other.keyhole-new-444"}
			for _, d := range append(slices.Clone(stale), kept...) {
				mkfile(t, filepath.Join(root, d, "out", "proxy.json"), "{}")
			}
			mkfile(t, filepath.Join(root, ".out.keyhole-new-file"), "a file, not a render's tree")
			for _, d := range append(slices.Clone(stale), ".other.keyhole-new-444", ".out.keyhole-new-file") {
				if err := os.Chtimes(filepath.Join(root, d), long, long); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteDir(out, []File{{Path: "a", Data: []byte("a")}}); err != nil {
				t.Fatal(err)
			}
			for _, d := range stale {
				if _, err := os.Lstat(filepath.Join(root, d)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s left in place (%v)", d, err)
				}
			}
			for _, d := range append(kept, ".out.keyhole-new-file") {
				if _, err := os.Lstat(filepath.Join(root, d)); err != nil {
					t.Errorf("%s removed: %v", d, err)
				}
			}
		})
	}
}

// TestWriteDirNoLinks: an output directory reached through a symbolic
// link (a checkout's committed rendered -> /elsewhere) is refused, by a
// relative or an absolute name under the working directory, and nothing
// is written where the link leads.
func TestWriteDirNoLinks(t *testing.T) {
	repo, elsewhere := t.TempDir(), t.TempDir()
	t.Chdir(repo)
	if err := os.Symlink(elsewhere, "rendered"); err != nil {
		t.Fatal(err)
	}
	files := []File{{Path: "a", Data: []byte("a")}}
	for _, dir := range []string{"rendered/out", "rendered/deep/out", filepath.Join(repo, "rendered", "out"), "rendered"} {
		err := WriteDir(dir, files)
		if err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("WriteDir(%q) = %v, want a refusal naming the link", dir, err)
		}
	}
	entries, err := os.ReadDir(elsewhere)
	if err != nil || len(entries) != 0 {
		t.Errorf("the link's target holds %v (%v), want nothing", entries, err)
	}
	// A directory reached without links is written as ever.
	if err := WriteDir("real/out", files); err != nil {
		t.Errorf("WriteDir(real/out) = %v", err)
	}
}

// TestDirWriterUnits: files put unit by unit, from several goroutines,
// land where WriteDir puts the same files laid out as one unit's at the
// top, or several units' each under its directory (the loose files' at
// the top), and Render with Put returns its files without their Data.
func TestDirWriterUnits(t *testing.T) {
	plan := testPlan()
	whole := mustRender(t, plan, Options{})
	tests := map[string]struct {
		dirs  []string // each unit's directory among several
		fixed bool     // put with UnitAt
		want  func(unit int, p string) string
	}{
		"one unit at the top": {dirs: []string{"apps/prod"}, want: func(_ int, p string) string { return p }},
		// A directory an Argo CD Application applies stays where it is
		// when the render holds one unit.
		"one fixed unit under its directory":           {dirs: []string{"apps/prod"}, fixed: true, want: func(_ int, p string) string { return "apps/prod/" + p }},
		"one fixed unit of the loose files at the top": {dirs: []string{""}, fixed: true, want: func(_ int, p string) string { return p }},
		"several under their directories": {dirs: []string{"", "apps/prod", "apps"}, want: func(u int, p string) string {
			return strings.TrimPrefix([]string{"", "apps/prod", "apps"}[u]+"/"+p, "/")
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			viaPut, viaWrite := filepath.Join(base, "put"), filepath.Join(base, "write")
			w := NewDirWriter(viaPut)
			var laidOut []File
			for u, d := range tc.dirs {
				opts := Options{Put: w.Unit(d)}
				if tc.fixed {
					opts.Put = w.UnitAt(d)
				}
				files, err := Render(plan, opts)
				if err != nil {
					t.Fatal(err)
				}
				for i, f := range files {
					if f.Data != nil || f.Path != whole[i].Path {
						t.Fatalf("with Put, Render returned %q with %d bytes; want %q without its Data", f.Path, len(f.Data), whole[i].Path)
					}
					laidOut = append(laidOut, File{Path: tc.want(u, whole[i].Path), Data: whole[i].Data})
				}
			}
			n, err := w.Commit()
			if err != nil {
				t.Fatal(err)
			}
			if n != len(laidOut) {
				t.Errorf("Commit wrote %d files, want %d", n, len(laidOut))
			}
			if err := WriteDir(viaWrite, laidOut); err != nil {
				t.Fatal(err)
			}
			if got, want := snapshot(t, viaPut), snapshot(t, viaWrite); !equalSnapshots(got, want) {
				t.Errorf("the files put differ from the files written:\n%v\n%v", got, want)
			}
			if s := siblings(t, viaPut); len(s) != 2 {
				t.Errorf("staging left siblings behind: %v", s)
			}
		})
	}
}

// TestDirWriterRefuses: an abort, a file both a file and a directory
// once laid out, and a path that leaves the directory all leave the
// previous render as it was and nothing staged behind.
func TestDirWriterRefuses(t *testing.T) {
	tests := map[string]struct {
		put     func(w *DirWriter) error
		abort   bool
		wantErr error
	}{
		"aborted": {put: func(w *DirWriter) error {
			return w.Unit("")(File{Path: "a.yaml", Data: []byte("a\n")})
		}, abort: true},
		"a loose file where a unit's directory goes": {put: func(w *DirWriter) error {
			if err := w.Unit("")(File{Path: "apps", Data: []byte("a\n")}); err != nil {
				return err
			}
			return w.Unit("apps")(File{Path: "b.yaml", Data: []byte("b\n")})
		}, wantErr: ErrInvalidFile},
		"a path out of the directory": {put: func(w *DirWriter) error {
			w.Unit("")(File{Path: "../escape.yaml", Data: []byte("x\n")})
			return nil
		}, wantErr: ErrInvalidFile},
		"nothing put": {put: func(*DirWriter) error { return nil }, wantErr: ErrEmpty},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			writePrevious(t, dir)
			before := snapshot(t, dir)
			w := NewDirWriter(dir)
			if err := tc.put(w); err != nil {
				t.Fatal(err)
			}
			if tc.abort {
				w.Abort()
			}
			_, err := w.Commit()
			switch {
			case err == nil:
				t.Fatal("Commit succeeded")
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("Commit: %v, want %v", err, tc.wantErr)
			}
			if !equalSnapshots(before, snapshot(t, dir)) {
				t.Error("the previous render changed")
			}
			if s := siblings(t, dir); len(s) != 1 {
				t.Errorf("staging left siblings behind: %v", s)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.yaml")); err == nil {
				t.Error("a file was written outside the directory")
			}
		})
	}
}

// TestDirWriterAbortMissingParent: the parents made for a render that is
// aborted or fails are removed again, so a render that writes nothing
// leaves nothing behind.
func TestDirWriterAbortMissingParent(t *testing.T) {
	for _, abort := range []bool{true, false} {
		root := t.TempDir()
		out := filepath.Join(root, "no", "such", "out")
		w := NewDirWriter(out)
		put := w.Unit("")
		if err := put(File{Path: "a", Data: []byte("a")}); err != nil {
			t.Fatal(err)
		}
		if abort {
			w.Abort()
		} else if err := put(File{Path: "a", Data: []byte("again")}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(); err == nil {
			t.Fatal("Commit succeeded")
		}
		if s := siblings(t, filepath.Join(root, "no")); len(s) != 0 {
			t.Errorf("abort %v: left %v in %s", abort, s, root)
		}
	}
}
