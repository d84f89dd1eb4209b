package source

import (
	"slices"
	"strings"
	"testing"
)

// argoApp is an Application ns/name building path into namespace dest of
// the in-cluster destination.
func argoApp(name, path, dest string) string {
	return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\n" +
		"spec:\n  project: default\n  source: {repoURL: 'https://git.example.com/r.git', path: " + path + "}\n" +
		"  destination: {server: 'https://kubernetes.default.svc', namespace: " + dest + "}\n"
}

// twoInstances is a repository of two clusters' Argo CD bootstraps, each
// making the Application argocd/platform; b's deploys the Secret a's
// Connection names.
var twoInstances = map[string]string{
	"clusters/a/bootstrap.yaml": argoApp("root", "clusters/a/apps", "argocd"),
	"clusters/a/apps/app.yaml":  argoApp("platform", "platform/a", "agents"),
	"clusters/b/bootstrap.yaml": argoApp("root", "clusters/b/apps", "argocd"),
	"clusters/b/apps/app.yaml":  argoApp("platform", "platform/b", "agents"),
	"platform/a/conn.yaml":      argoConn("gh"),
	"platform/b/secret.yaml":    "apiVersion: v1\nkind: Secret\nmetadata: {name: gh-token}\nstringData: {token: x}\n",
	"examples/demo/app.yaml":    argoApp("demo", "platform/a", "demo"),
}

// unitClusters is "UNIT CLUSTER" of each Argo CD unit of what dir reads.
func unitClusters(t *testing.T, dir string) ([]string, string) {
	t.Helper()
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		if u := d.Unit(); u.Argo != nil {
			got = append(got, u.Name+" "+u.Cluster)
		}
	}
	slices.Sort(got)
	return slices.Compact(got), ds.Error()
}

// TestArgoInstances: two bootstraps that each make argocd/platform are
// two Argo CD instances, two clusters, whose units share no Secret;
// keyhole.yaml's argocd.roots may name them.
func TestArgoInstances(t *testing.T) {
	dir, _ := gitRepo(t)
	writeFiles(t, dir, twoInstances)
	got, ds := unitClusters(t, dir)
	want := []string{
		"argocd:argocd/demo ", // an example: the cluster keyhole's caller means
		"argocd:argocd/platform@clusters/a/apps argocd clusters/a/bootstrap.yaml",
		"argocd:argocd/platform@clusters/b/apps argocd clusters/b/bootstrap.yaml",
	}
	if !slices.Equal(got, want) {
		t.Errorf("units and clusters %q, want %q\n%s", got, want, ds)
	}
	writeFiles(t, dir, map[string]string{"keyhole.yaml": "apiVersion: keyhole.dev/v1alpha1\nkind: Config\nargocd:\n  roots:\n" +
		"    - {path: clusters/a/bootstrap.yaml, instance: prod}\n    - {path: clusters/b, instance: staging}\n"})
	got, ds = unitClusters(t, dir)
	want = []string{
		"argocd:argocd/platform@clusters/a/apps argocd prod",
		"argocd:argocd/platform@clusters/b/apps argocd staging",
	}
	if !slices.Equal(got, want) {
		t.Errorf("units and clusters %q, want %q\n%s", got, want, ds)
	}
	// The example no root reaches is no unit, and is said so.
	if !strings.Contains(ds, "Argo CD Application argocd/demo is reached by no root keyhole.yaml's argocd.roots names (clusters/a/bootstrap.yaml, clusters/b)") {
		t.Errorf("the example is not said to be unreached:\n%s", ds)
	}
}

// TestArgoRoots: where keyhole.yaml names the roots, what they do not
// reach is no unit; the roots of one instance are one cluster.
func TestArgoRoots(t *testing.T) {
	dir, _ := gitRepo(t)
	writeFiles(t, dir, twoInstances)
	writeFiles(t, dir, map[string]string{"keyhole.yaml": "apiVersion: keyhole.dev/v1alpha1\nkind: Config\nargocd:\n  roots: [{path: clusters/a}]\n"})
	got, ds := unitClusters(t, dir)
	if want := []string{"argocd:argocd/platform "}; !slices.Equal(got, want) {
		t.Errorf("units and clusters %q, want %q\n%s", got, want, ds)
	}
	for _, w := range []string{"Argo CD Application argocd/root is reached by no root", "Argo CD Application argocd/platform is reached by no root", "Argo CD Application argocd/demo is reached by no root"} {
		if strings.Count(ds, w) != 1 {
			t.Errorf("want %q said once:\n%s", w, ds)
		}
	}
}
