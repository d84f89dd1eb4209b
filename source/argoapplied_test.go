package source

import (
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
)

// TestArgoAppliedFailedOnce: Applications whose paths hold one another
// (three directory applications of the repository's root, each with
// kustomize options that may change what it applies) are read again as
// each applying one builds them, which makes several units of one
// Application; an applying build that fails is still said once per
// Application.
func TestArgoAppliedFailedOnce(t *testing.T) {
	app := func(name string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\n" +
			"spec:\n  source:\n    repoURL: https://example.com/acme/apps\n    path: .\n    directory: {recurse: true}\n" +
			"    kustomize: {namePrefix: " + name + "-}\n  destination: {server: https://kubernetes.default.svc, namespace: " + name + "}\n"
	}
	dir, _ := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"a.yaml":            app("a"),
		"b.yaml":            app("b"),
		"c.yaml":            app("c"),
		"chart/values.yaml": "replicas: 1\n", // no object: kustomize refuses the directory's build
	})
	_, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	said := map[string]int{}
	for _, d := range ds {
		if d.Code == CodeKustomizeBuildFailed && strings.Contains(d.Message, "cannot be built") {
			said[d.Pos.String()]++
		}
	}
	if len(said) == 0 {
		t.Fatalf("no applying build is said to fail:\n%s", ds)
	}
	for at, n := range said {
		if n != 1 {
			t.Errorf("%s: the failed applying build said %d times, want once:\n%s", at, n, ds)
		}
	}
}

// TestArgoAppliedSameObjectOnce: Applications whose paths hold one
// another with nothing renaming them apply the same objects: the cluster
// holds one Application of each name, however many Applications apply
// it, so each is one unit, not one per applier (which multiplied with
// every Application and built the repository's root thousands of times).
func TestArgoAppliedSameObjectOnce(t *testing.T) {
	app := func(name string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\n" +
			"spec:\n  source:\n    repoURL: https://example.com/acme/apps\n    path: .\n    directory: {recurse: true}\n" +
			"  destination: {server: https://kubernetes.default.svc, namespace: " + name + "}\n"
	}
	dir, _ := gitRepo(t)
	files := map[string]string{}
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		files["apps/"+n+".yaml"] = app(n)
	}
	files["apps/conn.yaml"] = argoConn("gh")
	writeFiles(t, dir, files)
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{} // units holding the Connection
	for _, d := range docs {
		if u := d.Unit(); u != nil && u.Source == UnitArgoCD && d.Object().Kind == "Connection" {
			got[u.Name]++
		}
	}
	for _, n := range names {
		if got["argocd:argocd/"+n] != 1 {
			t.Errorf("unit argocd:argocd/%s %d times, want once", n, got["argocd:argocd/"+n])
		}
	}
	if len(got) != len(names) {
		t.Errorf("%d Argo CD units, want one per Application (%d):\n%s", len(got), len(names), ds)
	}
}

// TestArgoNoRepoURLSkipped: an Application whose source names no repoURL
// is refused by the API server (Argo CD's schema requires the field), so
// it deploys nothing: it makes no unit, and says so once.
func TestArgoNoRepoURLSkipped(t *testing.T) {
	dir, _ := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"assert.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a, namespace: argocd}\n" +
			"spec:\n  source:\n    kustomize: {images: [example.com/app:1.0.2]}\n",
		"conn.yaml": argoConn("gh"),
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if u := d.Unit(); u != nil && u.Source == UnitArgoCD {
			t.Errorf("%s is read in the Argo CD unit %s, which the API server refuses", d.File, u.Name)
		}
	}
	said := 0
	for _, d := range ds {
		if strings.Contains(d.Message, "names no repoURL") {
			said++
			if d.Severity != diag.Info {
				t.Errorf("said as %v, want info: %s", d.Severity, d)
			}
		}
	}
	if said != 1 {
		t.Errorf("the missing repoURL said %d times, want once:\n%s", said, ds)
	}
}
