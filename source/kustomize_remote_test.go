package source

import (
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"keyhole.dev/keyhole/diag"
)

// TestRemoteBases checks that a remote base is refused at its entry, in
// every field and in a base of a base, without a single request leaving
// keyhole; and that with AllowRemoteBases kustomize fetches it (from a
// loopback HTTP server) and its objects are checked.
func TestRemoteBases(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/cm.yaml" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fetched}\ndata: {a: b}\n"))
	}))
	defer srv.Close()
	url := srv.URL + "/cm.yaml"
	local := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\n"
	tests := map[string]struct {
		files map[string]string
		want  string // the refusal's position
	}{
		"resource URL": {
			files: map[string]string{"k/kustomization.yaml": "resources:\n  - cm.yaml\n  - " + url + "\n", "k/cm.yaml": local},
			want:  "k/kustomization.yaml:3:5",
		},
		"in a base of a base": {
			files: map[string]string{
				"k/kustomization.yaml":      "resources: [cm.yaml, ../mid]\n",
				"k/cm.yaml":                 local,
				"mid/kustomization.yaml":    "resources: [../deep]\n",
				"deep/kustomization.yaml":   "resources:\n- " + url + "\n",
				"unrelated/kustomization.x": "",
			},
			want: "deep/kustomization.yaml:2:3",
		},
		"patch path": {
			files: map[string]string{"k/kustomization.yaml": "resources: [cm.yaml]\npatches:\n  - path: " + url + "\n", "k/cm.yaml": local},
			want:  "k/kustomization.yaml:3:11",
		},
		"component": {
			files: map[string]string{"k/kustomization.yaml": "resources: [cm.yaml]\ncomponents: [" + url + "]\n", "k/cm.yaml": local},
			want:  "k/kustomization.yaml:2:14",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			hits.Store(0)
			docs, diags, _ := testLoad([]string{"k"}, Options{Dir: dir, Stdin: strings.NewReader("")})
			if hits.Load() != 0 {
				t.Fatalf("%d requests reached the remote with remote bases not allowed", hits.Load())
			}
			if len(docs) != 0 {
				t.Errorf("a refused kustomization yielded %d documents", len(docs))
			}
			var got []string
			for _, d := range diags {
				got = append(got, d.Pos.String()+" "+d.Code)
			}
			if len(got) != 1 || got[0] != tc.want+" "+CodeKustomizeRemoteBase {
				t.Fatalf("diagnostics %q, want one %s at %s", got, CodeKustomizeRemoteBase, tc.want)
			}
			if !strings.Contains(diags[0].Message, "--allow-remote-bases") || !strings.Contains(diags[0].Message, url) {
				t.Errorf("message does not say what and how: %s", diags[0].Message)
			}
		})
	}
	t.Run("allowed, fetched and checked", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"k/kustomization.yaml": "resources:\n  - cm.yaml\n  - " + url + "\n", "k/cm.yaml": local})
		hits.Store(0)
		docs, diags, err := testLoad([]string{"k"}, Options{Dir: dir, AllowRemoteBases: true})
		if err != nil || len(diags) != 0 {
			t.Fatalf("Load: %v, %v", err, diags)
		}
		if hits.Load() == 0 {
			t.Fatal("kustomize did not fetch the allowed remote resource")
		}
		var names []string
		for _, d := range docs {
			names = append(names, d.Object().Name)
		}
		if strings.Join(names, ",") != "local,fetched" {
			t.Fatalf("built objects %v, want local and fetched", names)
		}
	})
}

// TestFluxRemoteBase checks that a remote resource in the kustomization
// a Flux Kustomization builds is refused as a plain kustomization root's
// is: KustomizeRemoteBase at the entry, naming --allow-remote-bases and
// no directory kustomize would have fetched into, without a request
// leaving keyhole; and that with AllowRemoteBases it is fetched, as
// kustomize-controller fetches it (unless run with --no-remote-bases),
// and the unit's objects are checked.
func TestFluxRemoteBase(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fetched}\ndata: {a: b}\n"))
	}))
	defer srv.Close()
	url := srv.URL + "/install.yaml"
	sync := "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: flux-system, namespace: flux-system}\n" +
		"spec:\n  interval: 30m\n  url: https://github.com/acme/home-ops.git\n  ref: {branch: main}\n---\n" +
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: flux-system, namespace: flux-system}\n" +
		"spec:\n  interval: 30m\n  path: ./clusters/main\n  prune: true\n  sourceRef: {kind: GitRepository, name: flux-system}\n---\n" +
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: agents, namespace: flux-system}\n" +
		"spec:\n  interval: 30m\n  path: ./apps/agents\n  prune: true\n  targetNamespace: agents\n  sourceRef: {kind: GitRepository, name: flux-system}\n"
	app := map[string]string{
		"apps/agents/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - conn.yaml\n  - " + url + "\n",
		"apps/agents/conn.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n",
	}
	for name, tc := range map[string]struct {
		flux   bool
		runner string // who the message says fetches it
	}{
		"a kustomization root":        {runner: "kubectl kustomize"},
		"a Flux Kustomization's path": {flux: true, runner: "kustomize-controller"},
	} {
		t.Run(name, func(t *testing.T) {
			dir, _ := gitRepo(t)
			writeFiles(t, dir, app)
			if tc.flux {
				writeFiles(t, dir, map[string]string{"clusters/main/flux-system.yaml": sync})
			}
			hits.Store(0)
			ds, got := loadUnfetched(t, []string{"."}, dir, &hits)
			if want := "apps/agents/kustomization.yaml:5:5 " + CodeKustomizeRemoteBase; len(got) != 1 || got[0] != want {
				t.Fatalf("errors %q, want one %s\n%s", got, want, ds)
			}
			for _, d := range ds {
				if d.Code != CodeKustomizeRemoteBase {
					continue
				}
				if !strings.Contains(d.Message, "--allow-remote-bases") || !strings.Contains(d.Message, url) || !strings.Contains(d.Message, tc.runner) {
					t.Errorf("message does not say what, how and who fetches it (%s): %s", tc.runner, d.Message)
				}
				if strings.Contains(d.Message, os.TempDir()) {
					t.Errorf("message names a temporary directory: %s", d.Message)
				}
			}
			hits.Store(0)
			docs, ds, err := testLoad([]string{"."}, Options{Dir: dir, AllowRemoteBases: true})
			if err != nil {
				t.Fatal(err)
			}
			if ds.HasErrors() || hits.Load() == 0 {
				t.Fatalf("allowed, the remote resource was not fetched (%d requests):\n%s", hits.Load(), ds)
			}
			if !slices.ContainsFunc(docs, func(d *Document) bool { return d.Object().Name == "fetched" }) ||
				!slices.ContainsFunc(docs, func(d *Document) bool { return d.Object().Kind == "Connection" }) {
				t.Errorf("allowed, the unit's objects are not all read: %d documents", len(docs))
			}
		})
	}
}

// TestEngineOnlyRemoteBase checks that a remote base only an engine's
// rewrite of the kustomization names (an Argo CD Application's
// kustomize.components) is refused at the Application, the file that
// names it, without a request leaving keyhole.
func TestEngineOnlyRemoteBase(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	dir, _ := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"argo/app.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: agents, namespace: argocd}\n" +
			"spec:\n  destination: {name: in-cluster, namespace: agents}\n  source:\n    repoURL: 'https://git.example.com/r.git'\n    path: agents\n" +
			"    kustomize:\n      components: ['" + srv.URL + "/component']\n",
		"agents/kustomization.yaml": "resources: [conn.yaml]\n",
		"agents/conn.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n",
	})
	ds, got := loadUnfetched(t, []string{"argo", "agents"}, dir, &hits)
	if want := "argo/app.yaml:"; len(got) != 1 || !strings.HasPrefix(got[0], want) || !strings.HasSuffix(got[0], " "+CodeKustomizeRemoteBase) {
		t.Fatalf("errors %q, want one %s at %s\n%s", got, CodeKustomizeRemoteBase, want, ds)
	}
}

// loadUnfetched loads paths of dir with remote bases not allowed, fails
// when a request reached the remote hits counts, and returns what was
// said with the position and code of each error.
func loadUnfetched(t *testing.T, paths []string, dir string, hits *atomic.Int64) (diag.List, []string) {
	t.Helper()
	_, ds, err := testLoad(paths, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 0 {
		t.Fatalf("%d requests reached the remote with remote bases not allowed", hits.Load())
	}
	var got []string
	for _, d := range ds {
		if d.Severity == diag.Error {
			got = append(got, d.Pos.String()+" "+d.Code)
		}
	}
	return ds, got
}
