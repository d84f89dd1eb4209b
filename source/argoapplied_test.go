package source

import (
	"strings"
	"testing"
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
	_, ds, err := Load([]string{"."}, Options{Dir: dir})
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
