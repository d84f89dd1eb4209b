package source

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// docIDs renders documents as file#index kind/name for compact comparison.
func docIDs(docs []*Document) []string {
	var out []string
	for _, d := range docs {
		o := d.Object()
		out = append(out, d.File+"#"+strconv.Itoa(d.Index)+" "+o.Kind+"/"+o.Name)
	}
	return out
}

const connection = `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: github-acme
  namespace: agents
spec:
  hosts: [api.github.com, github.com]
  credential:
    kind: secret
    secretRef:
      name: acme-github-token
  placement:
    inject:
      - hosts: [api.github.com]
        header: Authorization
        value: "Bearer {{ .token }}"
        placeholderEnv: [GH_TOKEN]
`

const secretAndClass = `apiVersion: v1
kind: Secret
metadata:
  name: acme-github-token
  namespace: agents
stringData:
  user: x-access-token
  token: placeholder-not-a-token
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: SandboxClass
metadata:
  name: workspace
`

const agent = `name: support
mode: text
llm: llm-fast
sandbox: daytona
connectors:
  - name: github
    connection: company
    sandbox: true
`

func TestLoadTree(t *testing.T) {
	tests := map[string]struct {
		files   map[string]string
		paths   []string
		want    []string
		ignored []string
		// unbuilt are the files said to be left out of the build of the
		// kustomization root they lie under (InputNotDeployed).
		unbuilt []string
	}{
		"directory walked in lexical order of paths": {
			files: map[string]string{
				"repo/b.yaml":                      connection,
				"repo/a.yml":                       secretAndClass,
				"repo/a/z.json":                    `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "j"}}`,
				"repo/agents/support/agent.yaml":   agent,
				"repo/README.md":                   "not yaml: [",
				"repo/notes.txt":                   "ignored",
				"repo/.hidden.yaml":                "kind: [",
				"repo/.github/workflows/ci.yaml":   "on: [",
				"repo/sub/.hiddendir/x.yaml":       "kind: [",
				"repo/sub/empty.yaml":              "",
				"repo/sub/only-separators.yaml":    "---\n---\n",
				"repo/sub/comments.yaml":           "# nothing here\n",
				"repo/sub/ended.yaml":              "---\n" + connection + "...\n",
				"repo/sub/UPPER.YAML":              connection,
				"repo/agents/support/other.yml":    connection,
				"repo/agents/support/agent.yml.md": "x",
				"repo/overlay/kustomization.yaml":  "resources: [secret.yaml]\n",
				"repo/overlay/secret.yaml":         "apiVersion: v1\nkind: Secret\nmetadata: {name: overlaid}\n",
				"repo/overlay/unlisted.yaml":       connection,
			},
			paths:   []string{"repo"},
			unbuilt: []string{"repo/overlay/unlisted.yaml"},
			want: []string{
				"repo/a.yml#0 Secret/acme-github-token",
				"repo/a.yml#1 SandboxClass/workspace",
				"repo/a/z.json#0 Secret/j",
				"repo/agents/support/agent.yaml#0 Agent/support",
				"repo/agents/support/other.yml#0 Connection/github-acme",
				"repo/b.yaml#0 Connection/github-acme",
				"repo/overlay/secret.yaml#0 Secret/overlaid",
				"repo/sub/UPPER.YAML#0 Connection/github-acme",
				"repo/sub/ended.yaml#0 Connection/github-acme",
			},
		},
		"objects in a file named agent.yaml are objects; an agent beside a kustomization is the unit's, an object there only if listed": {
			files: map[string]string{
				"repo/agents/github/agent.yaml": connection,
				"repo/agents/support/agent.yml": agent,
				"repo/k/kustomization.yaml":     "resources: [agent.yaml]\n",
				"repo/k/agent.yaml":             secretAndClass,
				"repo/l/kustomization.yaml":     "resources: [s.yaml]\n",
				"repo/l/s.yaml":                 "apiVersion: v1\nkind: Secret\nmetadata: {name: listed}\n",
				"repo/l/agent.yaml":             connection,
			},
			paths: []string{"repo"},
			want: []string{
				"repo/agents/github/agent.yaml#0 Connection/github-acme",
				"repo/agents/support/agent.yml#0 Agent/support",
				"repo/k/agent.yaml#0 Secret/acme-github-token",
				"repo/k/agent.yaml#1 SandboxClass/workspace",
				"repo/l/s.yaml#0 Secret/listed",
			},
		},
		"gitignore at root, nested, negated and in the enclosing repository": {
			files: map[string]string{
				".git/HEAD":                           "ref: refs/heads/main\n",
				".gitignore":                          "*.generated.yaml\nbuild/\n",
				"deploy/.gitignore":                   "secret*.yaml\n!secret-keep.yaml\n",
				"deploy/a.yaml":                       connection,
				"deploy/x.generated.yaml":             connection,
				"deploy/secret-real.yaml":             connection,
				"deploy/secret-keep.yaml":             connection,
				"deploy/build/out.yaml":               connection,
				"deploy/nested/.gitignore":            "/only-here.yaml\n",
				"deploy/nested/only-here.yaml":        connection,
				"deploy/nested/deeper/only-here.yaml": connection,
			},
			paths: []string{"deploy"},
			want: []string{
				"deploy/a.yaml#0 Connection/github-acme",
				"deploy/nested/deeper/only-here.yaml#0 Connection/github-acme",
				"deploy/secret-keep.yaml#0 Connection/github-acme",
			},
			// The ignored files that name keyhole's kinds are said
			// (not those under an ignored directory, never walked).
			ignored: []string{"deploy/nested/only-here.yaml", "deploy/secret-real.yaml", "deploy/x.generated.yaml"},
		},
		"a directory the enclosing .gitignore ignores is still read when named": {
			files: map[string]string{
				".git/HEAD":        "ref: refs/heads/main\n",
				".gitignore":       "build/\n",
				"build/out/a.yaml": connection,
			},
			paths: []string{"build/out"},
			want:  []string{"build/out/a.yaml#0 Connection/github-acme"},
		},
		"explicit files are read whatever their name, once": {
			files: map[string]string{
				"dir/.hidden.yaml": connection,
				"dir/conn.txt":     connection,
			},
			paths: []string{"dir/.hidden.yaml", "./dir/conn.txt", "dir", "dir/../dir/conn.txt"},
			want: []string{
				"dir/.hidden.yaml#0 Connection/github-acme",
				"dir/conn.txt#0 Connection/github-acme",
			},
		},
		"dot names the working directory": {
			files: map[string]string{"x/a.yaml": connection, "b.yaml": connection},
			paths: []string{"."},
			want:  []string{"b.yaml#0 Connection/github-acme", "x/a.yaml#0 Connection/github-acme"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			docs, ds, err := testLoad(tc.paths, Options{Dir: dir})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := Ignored(ds); !slices.Equal(got, tc.ignored) {
				t.Errorf("ignored files said: %q, want %q", got, tc.ignored)
			}
			var unbuilt []string
			for _, d := range ds {
				if d.Code == CodeInputNotDeployed {
					unbuilt = append(unbuilt, d.Pos.File)
				}
			}
			if !slices.Equal(unbuilt, tc.unbuilt) {
				t.Errorf("files said left out of a build: %q, want %q", unbuilt, tc.unbuilt)
			}
			if len(ds) != len(tc.ignored)+len(tc.unbuilt) {
				t.Fatalf("unexpected diagnostics:\n%v", ds)
			}
			if got := docIDs(docs); !slices.Equal(got, tc.want) {
				t.Errorf("documents:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestLoadPathsOutsideTheWorkingDirectory(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"wd/x": "", "other/a.yaml": connection, "other/sub/b.yaml": connection})
	docs, ds, err := testLoad([]string{"../other", "../other/a.yaml", filepath.Join(root, "other", "sub", "b.yaml")}, Options{Dir: filepath.Join(root, "wd")})
	if err != nil || len(ds) > 0 {
		t.Fatalf("Load: %v %v", err, ds)
	}
	want := []string{"../other/a.yaml#0 Connection/github-acme", "../other/sub/b.yaml#0 Connection/github-acme"}
	if got := docIDs(docs); !slices.Equal(got, want) {
		t.Errorf("documents:\n got %q\nwant %q", got, want)
	}
}

func TestLoadStdinAndAbsolutePaths(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"in/a.yaml": connection})
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"b.yaml": connection})
	docs, ds, err := testLoad(
		[]string{filepath.Join(dir, "in", "a.yaml"), "-", filepath.Join(outside, "b.yaml"), "-"},
		Options{Dir: dir, Stdin: strings.NewReader(secretAndClass)},
	)
	if err != nil || len(ds) > 0 {
		t.Fatalf("Load: %v %v", err, ds)
	}
	want := []string{
		"in/a.yaml#0 Connection/github-acme",
		"-#0 Secret/acme-github-token",
		"-#1 SandboxClass/workspace",
		filepath.ToSlash(filepath.Join(outside, "b.yaml")) + "#0 Connection/github-acme",
	}
	if got := docIDs(docs); !slices.Equal(got, want) {
		t.Errorf("documents:\n got %q\nwant %q", got, want)
	}
}

func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"ok.yaml": connection})
	docs, _, err := testLoad([]string{"missing.yaml", "ok.yaml", "nodir/"}, Options{Dir: dir})
	if !errors.Is(err, ErrUnreadable) {
		t.Fatalf("err = %v, want ErrUnreadable", err)
	}
	for _, want := range []string{"missing.yaml", "nodir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if len(docs) != 1 {
		t.Errorf("the readable file's documents were not returned: %v", docIDs(docs))
	}
	_, _, err = testLoad([]string{"-"}, Options{Dir: dir})
	if !errors.Is(err, ErrUnreadable) {
		t.Errorf("stdin without a reader: err = %v, want ErrUnreadable", err)
	}
}

// TestPositions checks that nodes keep exact 1-based line and column,
// in later documents of a stream, with CRLF line ends and after a BOM.
func TestPositions(t *testing.T) {
	type want struct {
		path      []string
		line, col int
	}
	tests := map[string]struct {
		input string
		doc   int
		start diag.Pos
		nodes []want
	}{
		"second document of a stream": {
			input: secretAndClass + "---\n" + connection,
			doc:   2,
			start: diag.Pos{File: "f.yaml", Line: 15, Column: 1},
			nodes: []want{
				{path: []string{"metadata", "name"}, line: 18, col: 9},
				{path: []string{"spec", "placement", "inject"}, line: 28, col: 7},
				{path: []string{"spec", "hosts"}, line: 21, col: 10},
			},
		},
		"CRLF line ends": {
			input: strings.ReplaceAll(connection, "\n", "\r\n"),
			start: diag.Pos{File: "f.yaml", Line: 1, Column: 1},
			nodes: []want{{path: []string{"spec", "credential", "secretRef", "name"}, line: 11, col: 13}},
		},
		"CR line ends": {
			input: "apiVersion: v1\rkind: Secret\rmetadata:\r  name: x\r",
			start: diag.Pos{File: "f.yaml", Line: 1, Column: 1},
			nodes: []want{{path: []string{"metadata", "name"}, line: 4, col: 9}},
		},
		"byte order mark": {
			input: "\uFEFF" + connection,
			start: diag.Pos{File: "f.yaml", Line: 1, Column: 1},
			nodes: []want{{path: []string{"metadata", "namespace"}, line: 5, col: 14}},
		},
		"JSON on one line": {
			input: `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "é-x", "namespace": "n"}}`,
			start: diag.Pos{File: "f.yaml", Line: 1, Column: 1},
			nodes: []want{{path: []string{"metadata", "namespace"}, line: 1, col: 81}},
		},
		"indented document after a comment": {
			input: "# header\n\n  apiVersion: v1\n  kind: Secret\n  data:\n    k: dg==\n",
			start: diag.Pos{File: "f.yaml", Line: 3, Column: 3},
			nodes: []want{{path: []string{"data", "k"}, line: 6, col: 8}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			docs, ds := Parse("f.yaml", []byte(tc.input))
			if len(ds) > 0 {
				t.Fatalf("diagnostics: %v", ds)
			}
			var doc *Document
			for i := range docs {
				if docs[i].Index == tc.doc {
					doc = docs[i]
				}
			}
			if doc == nil {
				t.Fatalf("no document %d in %v", tc.doc, docIDs(docs))
			}
			if doc.Pos != tc.start {
				t.Errorf("Pos = %v, want %v", doc.Pos, tc.start)
			}
			for _, w := range tc.nodes {
				n := doc.Node
				for _, k := range w.path {
					n = Lookup(n, k)
				}
				if n == nil {
					t.Fatalf("%v: not found", w.path)
				}
				if n.Line != w.line || n.Column != w.col {
					t.Errorf("%v at %d:%d, want %d:%d", w.path, n.Line, n.Column, w.line, w.col)
				}
			}
		})
	}
}

func TestObject(t *testing.T) {
	tests := map[string]struct {
		file  string
		input string
		want  diag.Object
		agent bool
	}{
		"kubernetes object": {
			file:  "c.yaml",
			input: connection,
			want:  diag.Object{APIVersion: "omnia.altairalabs.ai/v1alpha1", Kind: "Connection", Namespace: "agents", Name: "github-acme"},
		},
		"agent file": {
			file:  "agents/support/agent.yaml",
			input: agent,
			want:  diag.Object{Kind: "Agent", Name: "support"},
			agent: true,
		},
		"agent.yml counts too": {
			file:  "agent.yml",
			input: "name: x\n",
			want:  diag.Object{Kind: "Agent", Name: "x"},
			agent: true,
		},
		"non-string fields are not reported": {
			file:  "c.yaml",
			input: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: [a]\n  namespace: 7\n",
			want:  diag.Object{APIVersion: "v1", Kind: "Secret"},
		},
		"metadata that is not a mapping": {
			file:  "c.yaml",
			input: "apiVersion: v1\nkind: Secret\nmetadata: x\n",
			want:  diag.Object{APIVersion: "v1", Kind: "Secret"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			docs, ds := Parse(tc.file, []byte(tc.input))
			if len(ds) > 0 || len(docs) != 1 {
				t.Fatalf("Parse: %d docs, %v", len(docs), ds)
			}
			if got := docs[0].Object(); got != tc.want {
				t.Errorf("Object() = %+v, want %+v", got, tc.want)
			}
			if got := docs[0].IsAgent(); got != tc.agent {
				t.Errorf("IsAgent() = %v, want %v", got, tc.agent)
			}
			if docs[0].Node.Kind != yaml.MappingNode {
				t.Errorf("Node kind %v, want a mapping", docs[0].Node.Kind)
			}
		})
	}
}

// repeatReader yields n bytes of b without holding them.
type repeatReader struct {
	b byte
	n int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	for i := range p {
		p[i] = r.b
	}
	r.n -= int64(len(p))
	return len(p), nil
}

// TestLoadTooLarge checks that oversized inputs are refused with their size
// and the limit, quickly and without being read whole.
func TestLoadTooLarge(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(50 << 20); err != nil { // 50 MB, sparse
		t.Fatal(err)
	}
	f.Close()

	tests := map[string]struct {
		paths    []string
		stdin    io.Reader
		max      int64
		contains string
		maxAlloc uint64
	}{
		"50 MB file, default limit": {
			paths:    []string{"big.yaml"},
			contains: "file too large: 52428800 bytes, over the 16 MiB limit;",
			maxAlloc: 1 << 20,
		},
		"50 MB on stdin": {
			paths:    []string{"-"},
			stdin:    &repeatReader{b: ' ', n: 50 << 20},
			max:      1 << 20,
			contains: "file too large: over the 1 MiB limit;",
			maxAlloc: 8 << 20,
		},
		"endless device": {
			paths:    []string{"/dev/zero"},
			max:      1 << 20,
			contains: "file too large: over the 1 MiB limit;",
			maxAlloc: 8 << 20,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			docs, ds, err := testLoad(tc.paths, Options{Dir: dir, Stdin: tc.stdin, MaxFileSize: tc.max})
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			t.Logf("refused in %v, %d bytes allocated", elapsed, after.TotalAlloc-before.TotalAlloc)
			if err != nil || len(docs) > 0 {
				t.Fatalf("Load: %v, %d docs", err, len(docs))
			}
			if len(ds) != 1 || ds[0].Code != CodeInputInvalid || ds[0].Pos.Line != 1 || ds[0].Pos.Column != 1 {
				t.Fatalf("diagnostics %v, want one InputInvalid at 1:1", ds)
			}
			if !strings.Contains(ds[0].Message, tc.contains) {
				t.Errorf("message %q does not say %q", ds[0].Message, tc.contains)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > tc.maxAlloc {
				t.Errorf("allocated %d bytes, want at most %d", alloc, tc.maxAlloc)
			}
		})
	}
}

func TestLoadSymlinksAndPermissions(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"repo/real/a.yaml":      connection,
		"repo/secret.yaml":      secretAndClass,
		"repo/agents/README.md": "agents\n",
	})
	links := map[string]string{
		"repo/loop1.yaml":        "loop2.yaml", // a file link loop: skipped, said once each
		"repo/loop2.yaml":        "loop1.yaml",
		"repo/gone.json":         "nowhere.json", // a dangling link to an input: skipped
		"repo/agents/agent.yaml": "gone.yaml",    // but keyhole's own file name: unreadable
		"repo/real/up":           "..",           // a directory link back up the tree
		"repo/self":              ".",
		"repo/linked.yaml":       "real/a.yaml", // a file link is followed
		"repo/dangling.txt":      "nowhere",     // not an input: ignored
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// A FIFO found by a walk is skipped: opening it would block.
	if err := syscall.Mkfifo(filepath.Join(dir, "repo", "pipe.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(dir, "repo", "secret.yaml")
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	type result struct {
		docs []*Document
		ds   diag.List
		err  error
	}
	done := make(chan result, 1)
	go func() {
		docs, ds, err := testLoad([]string{"repo", "repo/missing.yaml"}, Options{Dir: dir})
		done <- result{docs, ds, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Load hung")
	}
	docs, ds, err := r.docs, r.ds, r.err
	var notes []string
	for _, d := range ds {
		notes = append(notes, d.String())
	}
	slices.Sort(notes)
	wantNotes := []string{
		"repo/gone.json:1:1: info InputSkipped: symbolic link that leads nowhere readable (no such file or directory); skipped",
		"repo/loop1.yaml:1:1: info InputSkipped: symbolic link that leads nowhere readable (too many levels of symbolic links); skipped",
		"repo/loop2.yaml:1:1: info InputSkipped: symbolic link that leads nowhere readable (too many levels of symbolic links); skipped",
	}
	if !slices.Equal(notes, wantNotes) {
		t.Errorf("diagnostics:\n got %q\nwant %q", notes, wantNotes)
	}
	if !errors.Is(err, ErrUnreadable) {
		t.Fatalf("err = %v, want ErrUnreadable", err)
	}
	msg := err.Error()
	for _, w := range []string{"repo/agents/agent.yaml: no such file", "repo/missing.yaml"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error does not name %s:\n%s", w, msg)
		}
	}
	for _, w := range []string{"loop1", "loop2", "gone.json"} {
		if strings.Contains(msg, w) {
			t.Errorf("error names %s, which a walk skips:\n%s", w, msg)
		}
	}
	want := []string{
		"repo/linked.yaml#0 Connection/github-acme",
		"repo/real/a.yaml#0 Connection/github-acme",
	}
	// Root reads a file whatever its mode; anyone else is refused it.
	if os.Geteuid() == 0 {
		want = append(want, "repo/secret.yaml#0 Secret/acme-github-token", "repo/secret.yaml#1 SandboxClass/workspace")
	} else if !strings.Contains(msg, "repo/secret.yaml: permission denied") {
		t.Errorf("error does not report the unreadable file:\n%s", msg)
	}
	if got := docIDs(docs); !slices.Equal(got, want) {
		t.Errorf("documents:\n got %q\nwant %q", got, want)
	}
}
