package source

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"keyhole.dev/keyhole/diag"
)

// loadKustomize loads paths with the working directory at
// testdata/kustomize, failing on any error or diagnostic.
func loadKustomize(t *testing.T, paths ...string) []*Document {
	t.Helper()
	docs, ds, err := testLoad(paths, Options{Dir: filepath.Join("testdata", "kustomize")})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(ds) > 0 {
		t.Fatalf("unexpected diagnostics:\n%v", ds)
	}
	return docs
}

// find returns the document of the given kind and name.
func find(t *testing.T, docs []*Document, kind, name string) *Document {
	t.Helper()
	for i := range docs {
		if o := docs[i].Object(); o.Kind == kind && o.Name == name {
			return docs[i]
		}
	}
	t.Fatalf("no %s %s in %q", kind, name, docIDs(docs))
	return nil
}

// nodeAt walks a field path of string keys and decimal indices; a key
// element prefixed with "key:" returns the key node instead of its value.
func nodeAt(t *testing.T, n *yaml.Node, elems ...string) *yaml.Node {
	t.Helper()
	for _, e := range elems {
		if k, ok := strings.CutPrefix(e, "key:"); ok {
			for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					return n.Content[i]
				}
			}
			t.Fatalf("no key %q", k)
		}
		switch n.Kind {
		case yaml.MappingNode:
			n = Lookup(n, e)
		case yaml.SequenceNode:
			i := 0
			for _, c := range e {
				i = i*10 + int(c-'0')
			}
			n = n.Content[i]
		}
		if n == nil {
			t.Fatalf("no field %q", e)
		}
	}
	return n
}

func TestKustomizeOverlayPositions(t *testing.T) {
	docs := loadKustomize(t, "tree/overlays/prod")
	conn := find(t, docs, "Connection", "prod-github-acme")
	if conn.File != "tree/base/objects.yaml" || conn.Index != 1 || conn.Pos != (diag.Pos{File: "tree/base/objects.yaml", Line: 10, Column: 1}) {
		t.Errorf("Connection document = %s#%d at %v; want tree/base/objects.yaml#1 at 10:1", conn.File, conn.Index, conn.Pos)
	}
	const setByOverlay = " (value set by tree/overlays/prod/kustomization.yaml)"
	tests := map[string]struct {
		path []string
		want string // file:line:col
		note string
	}{
		"untouched scalar keeps its exact position": {
			path: []string{"spec", "credential", "secretRef", "name"},
			want: "tree/base/objects.yaml:22:13",
		},
		"untouched key keeps its exact position": {
			path: []string{"spec", "credential", "key:secretRef"},
			want: "tree/base/objects.yaml:21:5",
		},
		"untouched flow sequence element": {
			path: []string{"spec", "hosts", "2"},
			want: "tree/base/objects.yaml:18:39",
		},
		"user annotation kept at its position": {
			path: []string{"metadata", "annotations", "team"},
			want: "tree/base/objects.yaml:16:11",
		},
		"namePrefix: the source field, with a note": {
			path: []string{"metadata", "name"},
			want: "tree/base/objects.yaml:13:9",
			note: setByOverlay,
		},
		"namespace transformer: the source field, with a note": {
			path: []string{"metadata", "namespace"},
			want: "tree/base/objects.yaml:14:14",
			note: setByOverlay,
		},
		"strategic-merge patch file: the patch's node": {
			path: []string{"spec", "placement", "inject", "0", "value"},
			want: "tree/overlays/prod/inject.yaml:11:16",
		},
		"field only a patch file has: the patch's key": {
			path: []string{"spec", "placement", "inject", "0", "key:placeholderEnv"},
			want: "tree/overlays/prod/inject.yaml:12:9",
		},
		"field only a patch file has: the patch's value": {
			path: []string{"spec", "placement", "inject", "0", "placeholderEnv", "0"},
			want: "tree/overlays/prod/inject.yaml:12:26",
		},
		"JSON 6902 patch file: the operation's value": {
			path: []string{"spec", "hosts", "0"},
			want: "tree/overlays/prod/hosts.json6902.yaml:3:10",
		},
		"inline patch: the source field, with a note": {
			path: []string{"spec", "hosts", "1"},
			want: "tree/base/objects.yaml:18:27",
			note: setByOverlay,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pos, note := conn.Where(nodeAt(t, conn.Node, tc.path...))
			if pos.String() != tc.want || note != tc.note {
				t.Errorf("Where = %s %q; want %s %q", pos, note, tc.want, tc.note)
			}
		})
	}
}

func TestKustomizeBuiltObjects(t *testing.T) {
	docs := loadKustomize(t, "tree/overlays/prod")
	want := []string{
		"tree/base/objects.yaml#0 Secret/prod-token",
		"tree/base/objects.yaml#1 Connection/prod-github-acme",
		"tree/overlays/prod/kustomization.yaml#0 Secret/prod-generated-55ff4k8ggt",
	}
	if got := docIDs(docs); !slices.Equal(got, want) {
		t.Fatalf("documents:\n got %q\nwant %q", got, want)
	}
	conn := find(t, docs, "Connection", "prod-github-acme")
	if ns := conn.Object().Namespace; ns != "agents-prod" {
		t.Errorf("namespace = %q; want the overlay's agents-prod", ns)
	}
	ann := Lookup(Lookup(conn.Node, "metadata"), "annotations")
	if ann == nil || len(ann.Content) != 2 || ann.Content[0].Value != "team" {
		t.Errorf("annotations: want only the user's team annotation, kustomize's stripped; got %v", ann)
	}
	if Lookup(Lookup(find(t, docs, "Secret", "prod-token").Node, "metadata"), "annotations") != nil {
		t.Error("a Secret with no annotations of its own kept kustomize's annotations mapping")
	}
	gen := find(t, docs, "Secret", "prod-generated-55ff4k8ggt")
	pos, note := gen.Where(nodeAt(t, gen.Node, "data", "key"))
	if pos.String() != "tree/overlays/prod/kustomization.yaml:15:5" || note != " (generated by tree/overlays/prod/kustomization.yaml)" {
		t.Errorf("generated Secret's data.key at %s %q; want its secretGenerator entry, with a note", pos, note)
	}
}

func TestKustomizeWalk(t *testing.T) {
	tests := map[string]struct {
		paths []string
		want  []string
	}{
		"a tree builds each overlay once and its shared base on its own never": {
			paths: []string{"tree"},
			want: []string{
				"tree/base/objects.yaml#0 Secret/token-dev",
				"tree/base/objects.yaml#1 Connection/github-acme-dev",
				"tree/base/objects.yaml#0 Secret/prod-token",
				"tree/base/objects.yaml#1 Connection/prod-github-acme",
				"tree/overlays/prod/kustomization.yaml#0 Secret/prod-generated-55ff4k8ggt",
				"tree/plain/connection.yaml#0 Connection/plain",
			},
		},
		"a base named on its own is built, and unlisted files are not read": {
			paths: []string{"tree/base"},
			want: []string{
				"tree/base/objects.yaml#0 Secret/token",
				"tree/base/objects.yaml#1 Connection/github-acme",
			},
		},
		"a kustomization file named is its directory built": {
			paths: []string{"tree/overlays/dev/kustomization.yaml", "tree/overlays/dev"},
			want: []string{
				"tree/base/objects.yaml#0 Secret/token-dev",
				"tree/base/objects.yaml#1 Connection/github-acme-dev",
			},
		},
		"a directory named twice is built once": {
			paths: []string{"tree/overlays/dev", "./tree/overlays/dev/", "tree/overlays/../overlays/dev"},
			want: []string{
				"tree/base/objects.yaml#0 Secret/token-dev",
				"tree/base/objects.yaml#1 Connection/github-acme-dev",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := docIDs(loadKustomize(t, tc.paths...)); !slices.Equal(got, tc.want) {
				t.Errorf("documents:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestKustomizeBuildFailed checks that a directory kustomize cannot build
// is one diagnostic at its kustomization file, never a crash, a hang or
// a partial set of documents.
func TestKustomizeBuildFailed(t *testing.T) {
	const resource = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
	bomb := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for _, c := range "bcdefgh" {
		prev := string(c - 1)
		bomb += "  " + string(c) + ": &" + string(c) + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
	}
	tests := map[string]struct {
		files map[string]string
		want  string // position of the diagnostic
		msg   string // a part of its message
		code  string // KustomizeBuildFailed when empty
	}{
		"missing resource points at its entry": {
			files: map[string]string{"k/kustomization.yaml": "resources:\n  - there.yaml\n  - missing.yaml\n", "k/there.yaml": resource},
			want:  "k/kustomization.yaml:3:5",
			msg:   "missing.yaml",
		},
		"unknown field": {
			files: map[string]string{"k/kustomization.yaml": "resources: [r.yaml]\nresorces: [r.yaml]\n", "k/r.yaml": resource},
			want:  "k/kustomization.yaml:2:1",
			msg:   `unknown field "resorces"`,
		},
		"not a mapping": {
			files: map[string]string{"k/kustomization.yaml": "- a\n- b\n"},
			want:  "k/kustomization.yaml:1:1",
			msg:   "invalid Kustomization",
		},
		"invalid YAML": {
			files: map[string]string{"k/kustomization.yaml": "resources: [\n"},
			want:  "k/kustomization.yaml:1:1",
			msg:   "invalid Kustomization",
		},
		"invalid YAML on a later line": {
			files: map[string]string{"k/kustomization.yaml": "resources:\n  - r.yaml\nnamespace: [\n", "k/r.yaml": resource},
			want:  "k/kustomization.yaml:3:1",
			msg:   "line 3",
		},
		"a key indented short in the kustomization points at that key": {
			files: map[string]string{"k/kustomization.yaml": "resources:\n  - r.yaml\n namespace: x\n", "k/r.yaml": resource},
			want:  "k/kustomization.yaml:3:1",
			msg:   "did not find expected key",
		},
		"a list item among keys of the kustomization points at it": {
			files: map[string]string{"k/kustomization.yaml": "resources:\n- r.yaml\ncommonAnnotations:\n  a: b\n  - c\n", "k/r.yaml": resource},
			want:  "k/kustomization.yaml:5:1",
			msg:   "did not find expected key",
		},
		"helmCharts point at the field and say how to check the chart": {
			files: map[string]string{"k/kustomization.yaml": "resources: [r.yaml]\nhelmCharts:\n  - name: podinfo\n    repo: https://charts.example.com\n    version: 6.5.0\n", "k/r.yaml": resource},
			want:  "k/kustomization.yaml:2:1",
			msg:   "must specify --enable-helm; keyhole runs no helm, as kubectl kustomize by default: check what the chart deploys with kustomize build --enable-helm k | keyhole check -",
		},
		"an exec generator points at generators and says how to check it": {
			files: map[string]string{
				"k/kustomization.yaml": "resources: [r.yaml]\ngenerators:\n  - gen.yaml\n",
				"k/r.yaml":             resource,
				"k/gen.yaml":           "apiVersion: example.com/v1\nkind: Nginx\nmetadata:\n  name: x\n  annotations:\n    config.kubernetes.io/function: |\n      exec:\n        path: ./run.sh\n",
			},
			want: "k/kustomization.yaml:2:1",
			msg:  "unable to load external plugin 'Nginx'; keyhole runs no plugins or KRM functions, as kubectl kustomize by default: check what the build makes with kustomize build --enable-alpha-plugins --enable-exec k | keyhole check -",
		},
		"missing configurations entry": {
			files: map[string]string{"k/kustomization.yaml": "resources: [r.yaml]\nconfigurations:\n  - kustomizeconfig.yaml\n", "k/r.yaml": resource},
			want:  "k/kustomization.yaml:3:5",
			msg:   "kustomizeconfig.yaml",
		},
		"missing generator file": {
			files: map[string]string{"k/kustomization.yaml": "configMapGenerator:\n  - name: c\n    files: [missing.txt]\n"},
			want:  "k/kustomization.yaml:3:13",
			msg:   "missing.txt",
		},
		"missing component": {
			files: map[string]string{"k/kustomization.yaml": "resources: [r.yaml]\ncomponents: [../nocomp]\n", "k/r.yaml": resource},
			want:  "k/kustomization.yaml:2:14",
			msg:   "nocomp",
		},
		"legacy string patches entry": {
			files: map[string]string{"k/kustomization.yaml": "resources: [r.yaml]\npatches:\n  - patch.yaml\n", "k/r.yaml": resource},
			want:  "k/kustomization.yaml:3:5",
			msg:   "Kustomization.patches",
		},
		"a list where a string belongs": {
			files: map[string]string{"k/kustomization.yaml": "resources: [r.yaml]\nnamePrefix: [a]\n", "k/r.yaml": resource},
			want:  "k/kustomization.yaml:2:1",
			msg:   "Kustomization.namePrefix",
		},
		"a list where a string belongs, in a base": {
			files: map[string]string{
				"k/kustomization.yaml":    "resources: [../base]\n",
				"base/kustomization.yaml": "resources: [r.yaml]\nnamespace: [a]\n",
				"base/r.yaml":             resource,
			},
			want: "base/kustomization.yaml:2:1",
			msg:  "Kustomization.namespace",
		},
		"duplicate object": {
			files: map[string]string{"k/kustomization.yaml": "resources: [r.yaml, r2.yaml]\n", "k/r.yaml": resource, "k/r2.yaml": resource},
			want:  "k/kustomization.yaml:1:21",
			msg:   "already registered id",
		},
		"strategic-merge patch matching nothing points at its name": {
			files: map[string]string{
				"k/kustomization.yaml": "resources: [r.yaml]\npatches:\n  - path: p.yaml\n",
				"k/r.yaml":             resource,
				"k/p.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata: {a: b}\n",
			},
			want: "k/p.yaml:4:9",
			msg:  "ConfigMap.v1.[noGrp]/y",
		},
		"inline strategic-merge patch matching nothing points at its name": {
			files: map[string]string{
				"k/kustomization.yaml": "resources: [r.yaml]\npatches:\n  - patch: |-\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: y\n      data: {a: b}\n",
				"k/r.yaml":             resource,
			},
			want: "k/kustomization.yaml:7:15",
			msg:  "ConfigMap.v1.[noGrp]/y",
		},
		"inline patch with CRLF line ends points at its name": {
			files: map[string]string{
				"k/kustomization.yaml": "resources: [r.yaml]\r\npatches:\r\n- patch: |\r\n    apiVersion: v1\r\n    kind: ConfigMap\r\n    metadata:\r\n      name: y\r\n",
				"k/r.yaml":             resource,
			},
			want: "k/kustomization.yaml:7:13",
			msg:  "ConfigMap.v1.[noGrp]/y",
		},
		"inline patchesStrategicMerge entry points at its name": {
			files: map[string]string{
				"k/kustomization.yaml": "resources: [r.yaml]\npatchesStrategicMerge:\n  - |-\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: y}\n",
				"k/r.yaml":             resource,
			},
			want: "k/kustomization.yaml:6:22",
			msg:  "ConfigMap.v1.[noGrp]/y",
		},
		"inline patch in flow style points at the patch": {
			files: map[string]string{
				"k/kustomization.yaml": "resources: [r.yaml]\npatches:\n  - patch: '{apiVersion: v1, kind: ConfigMap, metadata: {name: y}}'\n",
				"k/r.yaml":             resource,
			},
			want: "k/kustomization.yaml:3:12",
			msg:  "ConfigMap.v1.[noGrp]/y",
		},
		"folded inline patch points at the patch": {
			files: map[string]string{
				"k/kustomization.yaml": "resources: [r.yaml]\npatches:\n  - patch: >\n      {apiVersion: v1, kind: ConfigMap,\n      metadata: {name: y}}\n",
				"k/r.yaml":             resource,
			},
			want: "k/kustomization.yaml:3:12",
			msg:  "ConfigMap.v1.[noGrp]/y",
		},
		"malformed resource in a base points at its line": {
			files: map[string]string{
				"k/kustomization.yaml":    "resources: [../base]\n",
				"base/kustomization.yaml": "resources: [r.yaml]\n",
				"base/r.yaml":             resource + "data:\n  a: [\n",
			},
			want: "base/r.yaml:5:1",
			msg:  "invalid YAML",
			code: CodeYAMLInvalid,
		},
		"unclosed flow in a resource points at its line": {
			files: map[string]string{
				"k/kustomization.yaml": "resources: [r.yaml]\n",
				"k/r.yaml":             resource + "data:\n  a: [1, 2\n  b: c\n",
			},
			want: "k/r.yaml:5:1",
			msg:  "did not find expected ',' or ']'",
			code: CodeYAMLInvalid,
		},
		"missing resource in a base points at the base's entry": {
			files: map[string]string{
				"k/kustomization.yaml":    "resources: [../base]\n",
				"base/kustomization.yaml": "resources:\n  - r.yaml\n  - gone.yaml\n",
				"base/r.yaml":             resource,
			},
			want: "base/kustomization.yaml:3:5",
			msg:  "gone.yaml",
		},
		"binary": {
			files: map[string]string{"k/kustomization.yaml": "resources: []\n\x00\x01\x02"},
			want:  "k/kustomization.yaml:1:1",
			msg:   "kustomize cannot build k",
		},
		"resource outside the kustomization's root": {
			files: map[string]string{"k/kustomization.yaml": "resources: [../r.yaml]\n", "r.yaml": resource},
			want:  "k/kustomization.yaml:1:13",
			msg:   "is not in or below",
		},
		"patch file missing": {
			files: map[string]string{"k/kustomization.yaml": "resources: [r.yaml]\npatches:\n  - path: nowhere.yaml\n", "k/r.yaml": resource},
			want:  "k/kustomization.yaml:3:11",
			msg:   "nowhere.yaml",
		},
		"alias bomb in a resource is refused before kustomize expands it": {
			files: map[string]string{"k/kustomization.yaml": "resources: [bomb.yaml]\n", "k/bomb.yaml": bomb},
			want:  "k/kustomization.yaml:1:13",
			msg:   "aliases expand past keyhole's limit",
		},
		"resource over the size limit": {
			files: map[string]string{"k/kustomization.yaml": "resources: [big.yaml]\n", "k/big.yaml": resource + "data:\n  big: " + strings.Repeat("x", 4096) + "\n"},
			code:  CodeInputInvalid,
			want:  "k/big.yaml:1:1",
			msg:   "file too large: 4161 bytes, over the 2048 bytes limit",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			docs, ds, err := testLoad([]string{"k"}, Options{Dir: dir, MaxFileSize: 2048})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if len(docs) != 0 {
				t.Errorf("a failed build returned documents: %q", docIDs(docs))
			}
			code := cmp.Or(tc.code, CodeKustomizeBuildFailed)
			if len(ds) != 1 || ds[0].Code != code || ds[0].Severity != diag.Error {
				t.Fatalf("want one %s error, got:\n%v", code, ds)
			}
			d := ds[0]
			if d.Pos.String() != tc.want || !strings.Contains(d.Message, tc.msg) {
				t.Errorf("got %s\nwant at %s, mentioning %q", d, tc.want, tc.msg)
			}
			if strings.Contains(d.Message, dir) {
				t.Errorf("message holds the absolute temporary path: %s", d.Message)
			}
		})
	}
}

// TestDocumentAtSharedPositions checks that a position a base file and a
// patch file share resolves by field path, as schema violations need.
func TestDocumentAtSharedPositions(t *testing.T) {
	docs := loadKustomize(t, "tree/overlays/prod")
	conn := find(t, docs, "Connection", "prod-github-acme")
	value := nodeAt(t, conn.Node, "spec", "placement", "inject", "0", "value")
	tests := map[string]struct {
		line, col int
		path      string
		want      string
		note      string
	}{
		"a patched node by its path": {
			line: value.Line, col: value.Column, path: "spec.placement.inject[0].value",
			want: "tree/overlays/prod/inject.yaml:11:16",
		},
		"an untouched node": {
			line: 22, col: 13, path: "spec.credential.secretRef.name",
			want: "tree/base/objects.yaml:22:13",
		},
		"a node changed by a transformer": {
			line: 13, col: 9, path: "metadata.name",
			want: "tree/base/objects.yaml:13:9",
			note: " (value set by tree/overlays/prod/kustomization.yaml)",
		},
		"a quoted annotation key path": {
			line: 16, col: 11, path: "metadata.annotations.team",
			want: "tree/base/objects.yaml:16:11",
		},
		"a position no node has": {
			line: 99, col: 1, path: "",
			want: "tree/base/objects.yaml:99:1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pos, note := conn.At(tc.line, tc.col, tc.path)
			if pos.String() != tc.want || note != tc.note {
				t.Errorf("At = %s %q; want %s %q", pos, note, tc.want, tc.note)
			}
		})
	}
}

// TestKustomizeSourceUntouched checks that building never writes into the
// user's files: buildMetadata is added to what kustomize reads, not to disk.
func TestKustomizeSourceUntouched(t *testing.T) {
	dir := t.TempDir()
	const k = "resources: [r.yaml]\n"
	writeFiles(t, dir, map[string]string{"k/kustomization.yaml": k, "k/r.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
	if _, ds, err := testLoad([]string{"k"}, Options{Dir: dir}); err != nil || len(ds) > 0 {
		t.Fatalf("Load: %v %v", err, ds)
	}
	got, err := os.ReadFile(filepath.Join(dir, "k", "kustomization.yaml"))
	if err != nil || string(got) != k {
		t.Errorf("kustomization.yaml changed on disk: %q, %v", got, err)
	}
}

// TestKustomizeFlowNulls builds kustomizations that leave a field null,
// as kubectl kustomize accepts them: adding buildMetadata must not turn
// the null into an empty string kustomize refuses.
func TestKustomizeFlowNulls(t *testing.T) {
	tests := map[string]string{
		"flow key without value":  "{resources: [r.yaml], components}\n",
		"block key without value": "resources: [r.yaml]\ncomponents:\n",
		"explicit null":           "resources: [r.yaml]\ncomponents: ~\n",
	}
	for name, k := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"k/kustomization.yaml": k, "k/r.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
			docs, ds, err := testLoad([]string{"k"}, Options{Dir: dir})
			if err != nil || len(ds) > 0 || len(docs) != 1 {
				t.Fatalf("Load = %d documents, %v, %v; want the one ConfigMap", len(docs), ds, err)
			}
		})
	}
}

// TestKustomizeErrorsNeverQuoteSecrets plants a canary wherever a
// kustomize error could quote a Secret value; no diagnostic may hold it.
func TestKustomizeErrorsNeverQuoteSecrets(t *testing.T) {
	const canary = "CANARY-5d1e-do-not-print"
	b64 := base64.StdEncoding.EncodeToString([]byte(canary))
	tests := map[string]map[string]string{
		"literal without a key": {
			"k/kustomization.yaml": "secretGenerator:\n  - name: g\n    literals: [" + canary + "]\n",
		},
		"literal with an empty key": {
			"k/kustomization.yaml": "secretGenerator:\n  - name: g\n    literals: [\"=" + canary + "\"]\n",
		},
		"env file line without a key": {
			"k/kustomization.yaml": "secretGenerator:\n  - name: g\n    envs: [e.env]\n    literals: [x]\n",
			"k/e.env":              "=" + canary + "\n",
		},
		"env file line that is not UTF-8 (printed as bytes)": {
			"k/kustomization.yaml": "secretGenerator:\n  - name: g\n    envs: [e.env]\n",
			"k/e.env":              "token=" + canary + "\xff\n",
		},
		"literal with a quote, in a component (quoted again by %q)": {
			"k/kustomization.yaml": "components: [../c]\n",
			"c/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nsecretGenerator:\n  - name: g\n    literals: ['say\"" + canary + "']\n",
		},
		"multi-line value printed as a node's contents": {
			"k/kustomization.yaml": "resources: [s.yaml]\nreplacements:\n  - source: {kind: Secret, name: s, fieldPath: metadata.name}\n" +
				"    targets:\n      - select: {kind: Secret}\n        fieldPaths: [stringData.pem.sub]\n",
			"k/s.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  pem: |\n    -----BEGIN KEY-----\n    " + canary + "\n    -----END KEY-----\n",
		},
		"generator file source that is a YAML mapping, printed in base64": {
			"k/kustomization.yaml": "secretGenerator:\n  - name: g\n    options: {disableNameSuffixHash: true}\n    files: [creds=creds.yaml]\n" +
				"replacements:\n  - source: {kind: Secret, name: g, fieldPath: metadata.name}\n    targets:\n      - select: {kind: Secret}\n        fieldPaths: [data.creds.sub]\n",
			"k/creds.yaml": "password: " + canary + "\n",
		},
		"quoted literal, printed unquoted in base64": {
			"k/kustomization.yaml": "secretGenerator:\n  - name: g\n    options: {disableNameSuffixHash: true}\n    literals: ['creds=\"" + canary + "\"']\n" +
				"replacements:\n  - source: {kind: Secret, name: g, fieldPath: metadata.name}\n    targets:\n      - select: {kind: Secret}\n        fieldPaths: [data.creds.sub]\n",
		},
		"resource without a name holding data": {
			"k/kustomization.yaml": "resources: [s.yaml]\n",
			"k/s.yaml":             "apiVersion: v1\nkind: Secret\nmetadata: {labels: {a: b}}\ndata: {token: " + b64 + "}\nstringData: {other: " + canary + "}\n",
		},
	}
	for name, files := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, files)
			_, ds, err := testLoad([]string{"k"}, Options{Dir: dir})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if len(ds) == 0 {
				t.Fatal("the build was expected to fail")
			}
			for _, d := range ds {
				for _, form := range []string{canary, b64, canary[:12], strings.Trim(fmt.Sprint([]byte(canary[:12])), "[]"),
					base64.StdEncoding.EncodeToString([]byte("password: " + canary + "\n"))} {
					if strings.Contains(d.String(), form) {
						t.Errorf("diagnostic quotes the canary (%q): %s", form, d)
					}
				}
			}
		})
	}
}

// BenchmarkKustomizeOverlay measures building the test overlay (a base of
// two objects, three patches, a generator) and mapping it back to files,
// against BenchmarkKustomizeBaseWalked, the same base read as plain files.
func BenchmarkKustomizeOverlay(b *testing.B) {
	opts := Options{Dir: filepath.Join("testdata", "kustomize")}
	for b.Loop() {
		if _, ds, err := testLoad([]string{"tree/overlays/prod"}, opts); err != nil || len(ds) > 0 {
			b.Fatal(err, ds)
		}
	}
}

func BenchmarkKustomizeBaseWalked(b *testing.B) {
	opts := Options{Dir: filepath.Join("testdata", "kustomize")}
	for b.Loop() {
		if _, ds, err := testLoad([]string{"tree/base/objects.yaml"}, opts); err != nil || len(ds) > 0 {
			b.Fatal(err, ds)
		}
	}
}

// Load given no kustomize engine says so at each kustomization it would
// build, as a build that failed: an embedding program's mistake is a
// diagnostic, not a panic, and nothing of the build is taken as read.
func TestKustomizeWithoutEngine(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"app/kustomization.yaml": "resources: [conn.yaml]\n",
		"app/conn.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh, namespace: agents}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n",
	})
	docs, ds, err := testLoad([]string{"app"}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || len(ds) != 0 {
		t.Fatalf("with the engines: %d documents, %v; want the Connection and nothing said", len(docs), ds)
	}
	docs, ds, err = Load([]string{"app"}, Options{Dir: dir, Engines: Engines{Helm: testEngines.Helm, Flux: testEngines.Flux}})
	if err != nil {
		t.Fatal(err)
	}
	want := diag.Pos{File: "app/kustomization.yaml", Line: 1, Column: 1}
	if len(docs) != 0 || len(ds) != 1 || ds[0].Code != CodeKustomizeBuildFailed || ds[0].Severity != diag.Error ||
		ds[0].Pos != want || !strings.Contains(ds[0].Message, "without its kustomize engine") {
		t.Errorf("got %d documents, %v; want one KustomizeBuildFailed at %s", len(docs), ds, want)
	}
}

// TestKustomizeFoldedScalar: a folded scalar with a more-indented line
// is read from a kustomize build as the engine applies it, what
// kustomize's build writes (a blank line before that line, which the
// object applied holds), and placed at its own line and column of the
// file, with no note; as is a folded value a patch sets, whatever
// kustomize writes of it.
func TestKustomizeFoldedScalar(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"k/kustomization.yaml": "resources: [policy.yaml]\npatches:\n  - path: patch.yaml\n",
		"k/policy.yaml": `apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicy
metadata:
  name: grafana-image-mirror
spec:
  matchConditions:
    - name: has-docker-io-grafana-image
      expression: >-
        object.spec.template.spec.containers.exists(c,
          c.image.startsWith("docker.io/grafana/")
        )
`,
		"k/patch.yaml": `apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicy
metadata:
  name: grafana-image-mirror
  annotations:
    note: >-
      a
        b
`,
	})
	// What kustomize's build writes, as kustomize build prints it.
	opts := krusty.MakeDefaultOptions()
	opts.AddManagedbyLabel = false
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(dir, "k"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var built struct {
		Metadata struct {
			Annotations struct{ Note string }
		}
		Spec struct {
			MatchConditions []struct{ Expression string } `yaml:"matchConditions"`
		}
	}
	if err := yaml.Unmarshal(out, &built); err != nil || len(built.Spec.MatchConditions) != 1 {
		t.Fatalf("kustomize's build reads %v:\n%s", err, out)
	}
	const expression = "object.spec.template.spec.containers.exists(c,\n\n  c.image.startsWith(\"docker.io/grafana/\")\n)"
	if built.Spec.MatchConditions[0].Expression != expression {
		t.Fatalf("kustomize writes the expression %q, not %q", built.Spec.MatchConditions[0].Expression, expression)
	}
	docs, ds, err := testLoad([]string{"k"}, Options{Dir: dir})
	if err != nil || len(ds) > 0 {
		t.Fatalf("Load: %v %v", err, ds)
	}
	p := find(t, docs, "MutatingAdmissionPolicy", "grafana-image-mirror")
	for what, tc := range map[string]struct {
		n     *yaml.Node
		value string
		pos   string
	}{
		"the resource's": {n: nodeAt(t, p.Node, "spec", "matchConditions", "0", "expression"), value: expression, pos: "k/policy.yaml:8:19"},
		"the patch's":    {n: nodeAt(t, p.Node, "metadata", "annotations", "note"), value: built.Metadata.Annotations.Note, pos: "k/patch.yaml:6:11"},
	} {
		if tc.n.Value != tc.value {
			t.Errorf("%s value %q, want kustomize's %q", what, tc.n.Value, tc.value)
		}
		if pos, note := p.Where(tc.n); pos.String() != tc.pos || note != "" {
			t.Errorf("%s at %s%s, want %s", what, pos, note, tc.pos)
		}
	}
}
