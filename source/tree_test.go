package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/bench/gen/synth"
	"keyhole.dev/keyhole/internal/gitfs"
	"keyhole.dev/keyhole/internal/testrepo"
)

// Loading a commit (Options.Tree, a gitfs.Tree) reads as loading the same
// files from disk.

var testSig = testrepo.Signature()

// gitRepo makes a repository in a new directory and returns its path.
func gitRepo(t *testing.T) (string, *git.Repository) {
	t.Helper()
	return testrepo.Init(t)
}

// commitAll stages everything in the working tree (deletions too) and
// commits it.
func commitAll(t *testing.T, r *git.Repository, msg string) plumbing.Hash {
	t.Helper()
	return testrepo.CommitAll(t, r, msg)
}

// headTree opens the repository at dir and returns its HEAD commit's tree.
func headTree(t testing.TB, dir string) *gitfs.Tree { return treeAt(t, dir, "HEAD") }

// treeAt opens the repository at dir and returns the tree of the commit
// rev names.
func treeAt(t testing.TB, dir, rev string) *gitfs.Tree {
	t.Helper()
	repo, err := gitfs.OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := repo.Tree(rev)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// writeFiles creates files (slash-separated names → contents) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	testrepo.WriteFiles(t, dir, files)
}

// loaded is what a Load returned, as comparable text.
func loaded(t *testing.T, paths []string, opts Options) (docs []string, diags []string, errText string) {
	t.Helper()
	ds, dl, err := testLoad(paths, opts)
	for _, d := range ds {
		b, merr := yaml.Marshal(d.Node)
		if merr != nil {
			t.Fatal(merr)
		}
		docs = append(docs, d.File+" #"+string(rune('0'+d.Index))+" @"+d.Pos.String()+"\n"+string(b))
	}
	for _, d := range dl {
		diags = append(diags, d.String())
	}
	if err != nil {
		errText = err.Error()
	}
	return docs, diags, errText
}

// TestTreeLoadsAsDisk commits each example (and a few trees that exercise
// the walk) and checks that loading the commit gives exactly what loading
// the same files from disk gives: documents, positions, diagnostics and
// errors, with paths relative to the working directory.
func TestTreeLoadsAsDisk(t *testing.T) {
	examples, err := os.ReadDir("../examples")
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		repo     string            // a cli/testdata/repos directory copied in whole
		copyFrom string            // an examples/ directory copied in as cfg/
		files    map[string]string // or these files
		links    map[string]string // symbolic links to make: name → target
		wd       string            // working directory inside the repository
		paths    []string
	}
	cases := map[string]tc{}
	for _, e := range examples {
		cases["example "+e.Name()] = tc{copyFrom: e.Name(), paths: []string{"cfg"}}
	}
	cases["gitignore, hidden files and a subdirectory as working directory"] = tc{
		files: map[string]string{
			".gitignore":           "ignored/\n*.tmp.yaml\n",
			"sub/ok.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n",
			"sub/x.tmp.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tmp}\n",
			"sub/ignored/a.yaml":   "kind: [\n",
			"sub/.hidden/b.yaml":   "kind: [\n",
			"sub/deeper/bad.yaml":  "kind: [\n",
			"sub/deeper/notes.txt": "not an input\n",
		},
		wd:    "sub",
		paths: []string{"."},
	}
	cases["symbolic links: to a file followed, to a directory not, broken skipped"] = tc{
		files: map[string]string{
			"d/real.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: real}\n",
			"other/x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		},
		links: map[string]string{
			"d/link.yaml":   "real.yaml",
			"d/dirlink":     "../other",
			"d/broken.yaml": "nowhere.yaml",
		},
		paths: []string{"d"},
	}
	cases["kustomize: any file name git allows, a linked base, a failing build"] = tc{
		files: map[string]string{
			"notes (draft).md":                   "# not an input\n",
			"base/kustomization.yaml":            "resources:\n  - connection (draft).yaml\n  - klasse-ü.yaml\n",
			"base/connection (draft).yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: draft}\n",
			"base/klasse-ü.yaml":                 "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: SandboxClass\nmetadata: {name: ü}\nspec: {image: a}\n",
			"overlays/prod/kustomization.yaml":   "resources: [../../linked]\nnamePrefix: prod-\n",
			"overlays/broken/kustomization.yaml": "resources:\n  - ../../base\n  - gone (too).yaml\n",
			"helm/chart/Chart.yaml":              "apiVersion: v2\nname: c\n",
			"helm/chart/templates/t.yaml":        "a: {{ .Values.a }}\n",
		},
		links: map[string]string{"linked": "base"},
		paths: []string{"overlays", "helm", "notes (draft).md"},
	}
	for _, repo := range []string{"flux-home-ops", "flux-monorepo"} {
		cases["repository "+repo] = tc{repo: repo, paths: []string{"."}}
	}
	conn := func(name string) string {
		return "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: " + name + "}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: " + name + "-token}}\n"
	}
	ks := func(name, path, extra string) string {
		return "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: " + name + ", namespace: flux-system}\n" +
			"spec:\n  path: " + path + "\n  sourceRef: {kind: GitRepository, name: flux-system}\n" + extra
	}
	cases["helm: a walked chart with a vendored subchart, and an Argo CD Application's chart with value files"] = tc{
		files: map[string]string{
			"charts/agents/Chart.yaml":                   "apiVersion: v2\nname: agents\nversion: 0.1.0\n",
			"charts/agents/values.yaml":                  "name: walked\n",
			"charts/agents/.helmignore":                  "ignored.yaml\n",
			"charts/agents/templates/conn.yaml":          "{{- if .Values.name }}\n" + conn("{{ .Values.name }}") + "{{- end }}\n",
			"charts/agents/templates/ignored.yaml":       "{{ broken\n",
			"charts/agents/charts/sub/Chart.yaml":        "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
			"charts/agents/charts/sub/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-sub}\n",
			"deploy/Chart.yaml":                          "apiVersion: v2\nname: deploy\nversion: 0.1.0\n",
			"deploy/values.yaml":                         "name: default\n",
			"deploy/values-prod.yaml":                    "name: prod\n",
			"deploy/templates/conn.yaml":                 conn("{{ .Values.name }}-{{ .Release.Namespace }}"),
			"argocd/app.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: deploy, namespace: argocd}\n" +
				"spec:\n  destination: {namespace: agents}\n  source:\n    path: deploy\n    helm: {valueFiles: [values-prod.yaml]}\n",
		},
		paths: []string{"."},
	}
	cases["flux: a generated kustomization, a kustomization.yml, components that may be missing, inside the path or not"] = tc{
		files: map[string]string{
			"flux/ks.yaml": ks("gen", "./apps/gen", "") + ks("yml", "./apps/yml", "  targetNamespace: yml\n") +
				ks("comp", "./apps/comp", "  components: [./present, ./absent]\n  ignoreMissingComponents: true\n") +
				ks("strict", "./apps/strict", "  components: [./present]\n") +
				ks("outside", "./apps/outside", "  components: [../../components/shared, ../../components/gone]\n  ignoreMissingComponents: true\n"),
			"apps/gen/conn.yaml":                     conn("gen"),
			"apps/gen/sub/more.yaml":                 conn("gen-more"),
			"apps/gen/sub/notes.txt":                 "not an input\n",
			"apps/gen/nested/kustomization.yaml":     "resources: [listed.yaml]\n",
			"apps/gen/nested/listed.yaml":            conn("gen-listed"),
			"apps/gen/nested/unlisted.yaml":          conn("gen-unlisted"),
			"apps/gen/nested/deeper/more.yaml":       conn("gen-deeper"),
			"apps/yml/kustomization.yml":             "resources: [conn.yaml]\n",
			"apps/yml/conn.yaml":                     conn("yml"),
			"apps/yml/unlisted.yaml":                 conn("unlisted"),
			"apps/comp/kustomization.yaml":           "resources: [conn.yaml]\n",
			"apps/comp/conn.yaml":                    conn("comp"),
			"apps/comp/present/kustomization.yaml":   "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonLabels: {component: present}\n",
			"apps/strict/kustomization.yaml":         "resources: [conn.yaml]\n",
			"apps/strict/conn.yaml":                  conn("strict"),
			"apps/strict/present/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonLabels: {component: strict}\n",
			"apps/outside/kustomization.yaml":        "resources: [conn.yaml]\n",
			"apps/outside/conn.yaml":                 conn("outside"),
			"components/shared/kustomization.yaml":   "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonLabels: {component: shared}\n",
		},
		paths: []string{"."},
	}
	cases["flux: Kustomizations as the one applying them writes them, patched and substituted"] = tc{
		files: map[string]string{
			"flux/apps.yaml": ks("apps", "./apps", "  postBuild:\n    substitute: {CLUSTER: prod}\n  patches:\n"+
				"    - target: {kind: Kustomization}\n      patch: |\n        apiVersion: kustomize.toolkit.fluxcd.io/v1\n"+
				"        kind: Kustomization\n        metadata: {name: _}\n        spec: {targetNamespace: patched}\n"),
			"apps/kustomization.yaml":   "resources: [agent/ks.yaml]\n",
			"apps/agent/ks.yaml":        ks("agent", "./apps/agent/${CLUSTER}", ""),
			"apps/agent/prod/c.yaml":    conn("prod"),
			"apps/agent/staging/c.yaml": conn("staging"),
		},
		paths: []string{"."},
	}
	cases["a missing path and a path outside the repository"] = tc{
		files: map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"},
		paths: []string{"a.yaml", "missing.yaml"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir, r := gitRepo(t)
			if c.repo != "" {
				if err := os.CopyFS(dir, os.DirFS(filepath.Join("../cli/testdata/repos", c.repo))); err != nil {
					t.Fatal(err)
				}
			}
			if c.copyFrom != "" {
				if err := os.CopyFS(filepath.Join(dir, "cfg"), os.DirFS(filepath.Join("../examples", c.copyFrom))); err != nil {
					t.Fatal(err)
				}
			}
			writeFiles(t, dir, c.files)
			for name, target := range c.links {
				if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
					t.Fatal(err)
				}
			}
			commitAll(t, r, "files")
			wd := filepath.Join(dir, filepath.FromSlash(c.wd))
			wantDocs, wantDiags, wantErr := loaded(t, c.paths, Options{Dir: wd})
			repo, err := gitfs.OpenRepo(wd)
			if err != nil {
				t.Fatal(err)
			}
			tree, err := repo.Tree("HEAD")
			if err != nil {
				t.Fatal(err)
			}
			emptyWorkTree(t, dir)
			if err := os.MkdirAll(wd, 0o755); err != nil {
				t.Fatal(err)
			}
			gotDocs, gotDiags, gotErr := loaded(t, c.paths, Options{Dir: wd, Tree: tree})
			if len(wantDocs)+len(wantDiags) == 0 {
				t.Fatal("the disk load found no documents: the case tests nothing")
			}
			if strings.Join(gotDocs, "\n---\n") != strings.Join(wantDocs, "\n---\n") {
				t.Errorf("documents differ\ncommit:\n%s\ndisk:\n%s", strings.Join(gotDocs, "\n---\n"), strings.Join(wantDocs, "\n---\n"))
			}
			if strings.Join(gotDiags, "\n") != strings.Join(wantDiags, "\n") {
				t.Errorf("diagnostics differ\ncommit:\n%s\ndisk:\n%s", strings.Join(gotDiags, "\n"), strings.Join(wantDiags, "\n"))
			}
			if gotErr != wantErr {
				t.Errorf("errors differ\ncommit: %s\ndisk:   %s", gotErr, wantErr)
			}
		})
	}
}

// emptyWorkTree removes every file of the working tree but .git, so that
// a load can only have read the commit.
func emptyWorkTree(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// BenchmarkLoadTree loads bench/gen's synthetic repository from disk and
// from a commit of it, the two ways keyhole diff reads a side.
func BenchmarkLoadTree(b *testing.B) {
	dir, _ := synth.ForBenchmark(b)
	r, err := git.PlainInit(dir, false)
	if err != nil {
		b.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		b.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		b.Fatal(err)
	}
	if _, err := wt.Commit("synth", &git.CommitOptions{Author: testSig, Committer: testSig}); err != nil {
		b.Fatal(err)
	}
	repo, err := gitfs.OpenRepo(dir)
	if err != nil {
		b.Fatal(err)
	}
	for name, tree := range map[string]func() *gitfs.Tree{
		"disk": func() *gitfs.Tree { return nil },
		"commit": func() *gitfs.Tree {
			t, err := repo.Tree("HEAD")
			if err != nil {
				b.Fatal(err)
			}
			return t
		},
	} {
		b.Run(name, func(b *testing.B) {
			docs := 0
			for b.Loop() {
				ds, _, err := testLoad([]string{"."}, Options{Dir: dir, Tree: tree()})
				if err != nil {
					b.Fatal(err)
				}
				docs = len(ds)
			}
			b.ReportMetric(float64(docs), "docs")
		})
	}
}

// TestTreeBuildReadsOnlyWhatItOpens: a kustomize build of a commit reads
// the blobs of the files it opens, not the whole commit. Before the build,
// the scope pass reads each local file of a kustomization that names
// keyhole's kinds once (their text holds the names of the Secrets a
// Connection reads), so some blobs are read twice.
func TestTreeBuildReadsOnlyWhatItOpens(t *testing.T) {
	dir, r := gitRepo(t)
	files := map[string]string{
		"app/kustomization.yaml": "resources: [class.yaml]\n",
		"app/class.yaml":         "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: SandboxClass\nmetadata: {name: c}\nspec: {image: a}\n",
	}
	for i := range 300 {
		files[fmt.Sprintf("vendor/d%d/f%d.yaml", i%7, i)] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
	}
	writeFiles(t, dir, files)
	commitAll(t, r, "files")
	tree := headTree(t, dir)
	docs, ds, err := testLoad([]string{"app"}, Options{Dir: dir, Tree: tree})
	if err != nil || len(ds) > 0 || len(docs) != 1 {
		t.Fatalf("Load: %d docs, %v, %v", len(docs), ds, err)
	}
	if tree.BlobsRead() > 12 {
		t.Errorf("the build read %d blobs of a commit of %d files; it should read only the few it opens", tree.BlobsRead(), len(files))
	}
}

// TestTreeMissingBlobs: a repository may lack some of a commit's blobs (a
// partial clone, git clone --filter=blob:none, fetches them only when git
// checks them out). A walk never reads a blob it does not need, so a
// missing image is no error; a missing input says what is wrong.
func TestTreeMissingBlobs(t *testing.T) {
	dir, r := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"docs/img/diagram.png": "\x89PNG not needed",
		"docs/notes.md":        "# notes\n",
		"apps/cm.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"other/lost.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lost}\n",
	})
	commitAll(t, r, "first")
	drop := func(name string) {
		t.Helper()
		h := plumbing.ComputeHash(plumbing.BlobObject, []byte(map[string]string{
			"png":  "\x89PNG not needed",
			"lost": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lost}\n",
		}[name]))
		p := filepath.Join(dir, ".git", "objects", h.String()[:2], h.String()[2:])
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	drop("png")
	drop("lost")
	tree := headTree(t, dir)
	tests := map[string]struct {
		paths   []string
		docs    []string
		errText string // a part of the error, "" for none
	}{
		"a missing blob that is not an input is never read": {
			paths: []string{"docs", "apps"},
			docs:  []string{"apps/cm.yaml#0 ConfigMap/a"},
		},
		"a missing input says the clone lacks it": {
			paths:   []string{"other"},
			errText: "other/lost.yaml: object not found (the commit's file is not in the local repository",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			docs, _, err := testLoad(tc.paths, Options{Dir: dir, Tree: tree})
			switch {
			case tc.errText == "" && err != nil:
				t.Fatalf("Load: %v", err)
			case tc.errText != "" && (err == nil || !strings.Contains(err.Error(), tc.errText)):
				t.Fatalf("Load error = %v, want one saying %q", err, tc.errText)
			}
			if got := docIDs(docs); tc.errText == "" && !slices.Equal(got, tc.docs) {
				t.Errorf("documents:\n got %q\nwant %q", got, tc.docs)
			}
		})
	}
}

// TestTreeLoadOutside: a path outside the repository is in no commit, and
// Load says so.
func TestTreeLoadOutside(t *testing.T) {
	dir, r := gitRepo(t)
	writeFiles(t, dir, map[string]string{"a.yaml": "kind: x\n"})
	commitAll(t, r, "first")
	tree := headTree(t, dir)
	_, _, err := testLoad([]string{"../elsewhere.yaml"}, Options{Dir: dir, Tree: tree})
	if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "outside the git repository") {
		t.Fatalf("Load outside = %v, want ErrUnreadable saying why", err)
	}
}
