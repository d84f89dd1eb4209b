package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// releaseAll is a Digest that releases every document and remembers its
// position, so tests can tell the digest came back.
func releaseAll(d *Document) (any, bool) { return "digest of " + d.Pos.String(), true }

// releaseFiles are inputs whose trees are worth reading back: several
// documents a file, a List, anchors and merge keys, JSON, an agent.yaml,
// comments and an empty document.
var releaseFiles = map[string]string{
	"multi.yaml": `# leading comment
apiVersion: v1
kind: ConfigMap
metadata: {name: one}
data: {a: "1"}
---
---
base: &base {x: 1, y: [a, b]}
apiVersion: v1
kind: ConfigMap
metadata: {name: two}
data:
  <<: *base
  z: *base
`,
	"list.yaml": `apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: b}
`,
	"obj.json":                `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}}`,
	"agents/x/agent.yaml":     "name: x\nsandbox: s\n",
	"kust/kustomization.yaml": "resources: [cm.yaml]\nnamePrefix: p-\n",
	"kust/cm.yaml":            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {token: t}\n",
}

// TestReleaseReadsTreesBack loads the same inputs with and without a
// Digest that releases everything, from disk and from a commit: the
// documents are the same, a released one has no Node but the same Object,
// and Tree reads back a tree with the same content and positions. What
// kustomize built keeps its tree (its positions are tied to its nodes).
func TestReleaseReadsTreesBack(t *testing.T) {
	dir, r := gitRepo(t)
	writeFiles(t, dir, releaseFiles)
	commitAll(t, r, "inputs")
	tree := headTree(t, dir)
	for name, base := range map[string]Options{"disk": {Dir: dir}, "commit": {Dir: dir, Tree: tree}} {
		t.Run(name, func(t *testing.T) {
			kept, keptDiags, err := testLoad([]string{"."}, base)
			if err != nil {
				t.Fatal(err)
			}
			opts := base
			opts.Digest = releaseAll
			released, diags, err := testLoad([]string{"."}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(diags) != len(keptDiags) || len(released) != len(kept) || len(kept) < 7 {
				t.Fatalf("%d documents and %d diagnostics with Digest, %d and %d without", len(released), len(diags), len(kept), len(keptDiags))
			}
			nReleased := 0
			for i := range kept {
				k, d := kept[i], released[i]
				if d.Pos != k.Pos || d.Index != k.Index || d.Unit().ID != k.Unit().ID || d.Walked() != k.Walked() || d.Object() != k.Object() {
					t.Errorf("document %d: %s %+v, want %s %+v", i, d.Pos, d.Object(), k.Pos, k.Object())
				}
				if !d.Unit().Loose() {
					if d.Released() || d.Node == nil || d.Digested() != nil {
						t.Errorf("%s: a document kustomize built was digested or released", d.Pos)
					}
					continue
				}
				if d.Digested() != "digest of "+d.Pos.String() {
					t.Errorf("%s: Digested() = %v", d.Pos, d.Digested())
				}
				if !d.Released() || d.Node != nil {
					t.Errorf("%s: not released", d.Pos)
					continue
				}
				nReleased++
				n, err := d.Tree()
				if err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
				if got, want := dump(n), dump(k.Node); got != want {
					t.Errorf("%s: tree read back:\n%s\nwant:\n%s", d.Pos, got, want)
				}
			}
			if nReleased < 6 {
				t.Errorf("%d documents released, want every file's", nReleased)
			}
		})
	}
}

// dump prints a tree with every node's position, so two trees compare by
// content and place.
func dump(n *yaml.Node) string {
	var b strings.Builder
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		b.WriteString(strings.Repeat(" ", depth))
		fmt.Fprintf(&b, "%s %q @%d:%d\n", n.ShortTag(), n.Value, n.Line, n.Column)
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return b.String()
}

// TestReleaseStdinKeepsTrees: standard input cannot be read again, so its
// documents keep their trees whatever the Digest says.
func TestReleaseStdinKeepsTrees(t *testing.T) {
	docs, _, err := testLoad([]string{"-"}, Options{Stdin: strings.NewReader(releaseFiles["multi.yaml"]), Digest: releaseAll})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("%d documents, want 2", len(docs))
	}
	for _, d := range docs {
		if d.Released() || d.Node == nil || d.Digested() == nil {
			t.Errorf("%s: released %t, node %v, digest %v", d.Pos, d.Released(), d.Node != nil, d.Digested())
		}
	}
}

// TestReleaseFileGoneOrChanged: a released document's file edited,
// truncated or removed after the load gives ErrChanged or the read error,
// never another file's tree and never a panic.
func TestReleaseFileGoneOrChanged(t *testing.T) {
	tests := map[string]func(path string) error{
		"same length, other bytes": func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, []byte(strings.Replace(string(b), "one", "uno", 1)), 0o644)
		},
		"emptied": func(p string) error { return os.WriteFile(p, nil, 0o644) },
		"removed": os.Remove,
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "multi.yaml")
			if err := os.WriteFile(path, []byte(releaseFiles["multi.yaml"]), 0o644); err != nil {
				t.Fatal(err)
			}
			docs, _, err := testLoad([]string{path}, Options{Digest: releaseAll})
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) != 2 || !docs[0].Released() {
				t.Fatalf("want 2 released documents, got %d", len(docs))
			}
			if err := change(path); err != nil {
				t.Fatal(err)
			}
			for _, d := range docs {
				n, err := d.Tree()
				if err == nil || n != nil {
					t.Fatalf("%s: Tree() = %v, %v after the file changed", d.Pos, n, err)
				}
				if name != "removed" && !errors.Is(err, ErrChanged) {
					t.Errorf("%s: %v, want ErrChanged", d.Pos, err)
				}
				if !strings.Contains(err.Error(), "multi.yaml") {
					t.Errorf("%s: %v does not name the file", d.Pos, err)
				}
			}
		})
	}
}

// FuzzReleaseReadsBack writes any input to a file, loads it keeping the
// trees and releasing them, and requires the same documents, and from
// Tree the same content at the same positions: reading a file again
// must give back exactly what the first parse gave, or an error.
func FuzzReleaseReadsBack(f *testing.F) {
	for _, seed := range []string{
		releaseFiles["multi.yaml"],
		releaseFiles["list.yaml"],
		releaseFiles["obj.json"],
		"apiVersion: v1\nkind: A\nx: &x {a: [1, 2]}\ny: *x\nz: {<<: *x, b: 3}\n",
		"---\n---\napiVersion: v1\nkind: A\n...\n---\napiVersion: v1\nkind: B\n",
		"apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: List\n    items: [{apiVersion: v1, kind: X}]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "in.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		opts := Options{Dir: dir, MaxFileSize: 1 << 20}
		kept, keptDiags, err := testLoad([]string{"in.yaml"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.Digest = releaseAll
		released, diags, err := testLoad([]string{"in.yaml"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(released) != len(kept) || len(diags) != len(keptDiags) {
			t.Fatalf("%d documents, %d diagnostics released; %d, %d kept", len(released), len(diags), len(kept), len(keptDiags))
		}
		for i := range kept {
			d := released[i]
			if !d.Released() || d.Pos != kept[i].Pos || d.Object() != kept[i].Object() {
				t.Fatalf("document %d: released %t at %s %+v, kept at %s %+v", i, d.Released(), d.Pos, d.Object(), kept[i].Pos, kept[i].Object())
			}
			n, err := d.Tree()
			if err != nil {
				t.Fatalf("%s: %v", d.Pos, err)
			}
			if got, want := dump(n), dump(kept[i].Node); got != want {
				t.Fatalf("%s: read back\n%s\nwant\n%s", d.Pos, got, want)
			}
		}
		// Digests that say what their document is, rightly for one
		// document in two: Object is the tree's either way.
		opts.Digest = func(d *Document) (any, bool) {
			o := d.Object()
			if d.Index%2 == 1 {
				o.Name += "?"
			}
			return &objDigest{o: o, ok: true}, true
		}
		said, _, err := testLoad([]string{"in.yaml"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range kept {
			if d := said[i]; d.Object() != kept[i].Object() {
				t.Fatalf("document %d: a digest's Object %+v, the tree's %+v", i, d.Object(), kept[i].Object())
			}
		}
	})
}

// objDigest is a digest that says what its document is: right, wrong,
// or that it cannot.
type objDigest struct {
	o  diag.Object
	ok bool
}

func (o *objDigest) DigestObject() (diag.Object, bool) { return o.o, o.ok }

// TestReleaseObjectFromDigest: a released document answers Object from a
// digest that says what it is, and from the loader's own copy when the
// digest cannot or says otherwise than the tree; Digested returns the
// digest as Options.Digest gave it either way.
func TestReleaseObjectFromDigest(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, releaseFiles)
	kept, _, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]func(d *Document) *objDigest{
		"right":  func(d *Document) *objDigest { return &objDigest{o: d.Object(), ok: true} },
		"wrong":  func(d *Document) *objDigest { o := d.Object(); o.Name += "-not"; return &objDigest{o: o, ok: true} },
		"cannot": func(d *Document) *objDigest { return &objDigest{o: d.Object(), ok: false} },
	}
	for name, digest := range tests {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex // Digest runs on the loader's workers
			given := map[diag.Pos]any{}
			released, _, err := testLoad([]string{"."}, Options{Dir: dir, Digest: func(d *Document) (any, bool) {
				dg := digest(d)
				mu.Lock()
				defer mu.Unlock()
				given[d.Pos] = dg
				return dg, true
			}})
			if err != nil {
				t.Fatal(err)
			}
			if len(released) != len(kept) {
				t.Fatalf("%d documents, want %d", len(released), len(kept))
			}
			n := 0
			for i := range kept {
				d := released[i]
				if d.Released() {
					n++
				}
				if got, want := d.Object(), kept[i].Object(); got != want {
					t.Errorf("%s: Object() = %+v, want %+v", d.Pos, got, want)
				}
				if dg, ok := given[d.Pos]; ok && d.Digested() != dg {
					t.Errorf("%s: Digested() = %#v, want the digest given, %#v", d.Pos, d.Digested(), dg)
				}
			}
			if n < 5 {
				t.Errorf("%d documents released, want at least 5", n)
			}
		})
	}
}

// TestReleaseAsParsed: a file's documents are given to the Digest as each
// is parsed, so that a released tree is garbage before the next one is
// built: a file of thousands of documents (an install manifest) costs the
// memory of one tree, not of all of them. When the Digest meets the first
// document, the heap holds no more objects than one document's tree and
// the loader's own; had the file been parsed whole first, it would hold
// every document's tree.
func TestReleaseAsParsed(t *testing.T) {
	const docs = 2000
	var b strings.Builder
	for i := range docs {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, namespace: ns}\ndata: {a: '1', b: '2', c: '3'}\n---\n", i)
	}
	path := filepath.Join(t.TempDir(), "all.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	objects := func() uint64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/heap/objects:objects"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := objects()
	var first uint64
	got, _, err := testLoad([]string{path}, Options{Digest: func(d *Document) (any, bool) {
		if d.Index == 0 {
			first = objects()
		}
		return nil, true
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != docs {
		t.Fatalf("%d documents, want %d", len(got), docs)
	}
	// A document here is some 25 nodes; all of them would be 50,000.
	if grown := int64(first) - int64(before); grown > 5000 {
		t.Fatalf("%d more objects on the heap at the first document's digest: the file's trees were all built first", grown)
	}
}

// TestLoadKeepsNoStatAnswers: released documents keep the disk's file
// system to read their files again, and with it nothing of what the walks asked of it,
// which grows with the directories and files a repository has.
func TestLoadKeepsNoStatAnswers(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for i := range 20 {
		files[filepath.Join("ns-"+strconv.Itoa(i), "connection.yaml")] = connection
	}
	writeFiles(t, dir, files)
	docs, diags, err := testLoad([]string{dir}, Options{Digest: releaseAll})
	if err != nil || len(diags) > 0 {
		t.Fatalf("Load: %v %v", err, diags)
	}
	if len(docs) != 20 || docs[0].from == nil || docs[0].from.origin == nil {
		t.Fatalf("want 20 documents read from files, got %v", docIDs(docs))
	}
	o, ok := docs[0].from.origin.files.fsys.(*osFS)
	if !ok {
		t.Fatalf("the documents read again from %T, want the disk", docs[0].from.origin.files.fsys)
	}
	kept := 0
	for range o.stats.Range {
		kept++
	}
	for range o.lstats.Range {
		kept++
	}
	if kept > 0 {
		t.Errorf("the file system the documents keep holds %d stat answers", kept)
	}
}
