package source

import (
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/config"
)

// TestKargoRenderedBranch: an Argo CD Application deploying a branch a
// Kargo Stage renders to (its kargo.akuity.io/authorized-stage annotation
// names the Stage), which the clone does not hold, is said once and
// claims none of the repository's files: the overlays the Stage renders
// from are read as kustomization roots, each in the namespace it sets.
// Without the annotation, the branch is any branch not fetched: said,
// its path claimed, nothing read.
func TestKargoRenderedBranch(t *testing.T) {
	appSet := func(annotations, path string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: guestbook, namespace: argocd}\nspec:\n" +
			"  generators:\n  - git:\n      repoURL: https://git.example.com/acme/guestbook.git\n      revision: HEAD\n      directories: [{path: env/*}]\n" +
			"  template:\n    metadata:\n      name: guestbook-{{path.basename}}\n" + annotations +
			"    spec:\n      project: default\n      destination: {server: https://kubernetes.default.svc, namespace: 'guestbook-{{path.basename}}'}\n" +
			"      source: {repoURL: https://git.example.com/acme/guestbook.git, path: " + path + ", targetRevision: 'env/{{path.basename}}'}\n"
	}
	overlay := func(env string) string {
		return "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: guestbook-" + env + "\nresources: [../../base]\n"
	}
	files := map[string]string{
		"base/kustomization.yaml":     "resources: [connection.yaml, secret.yaml]\n",
		"base/connection.yaml":        argoConn("api"),
		"base/secret.yaml":            "apiVersion: v1\nkind: Secret\nmetadata: {name: gh-token}\nstringData: {token: canary-kargo-branch}\n",
		"env/dev/kustomization.yaml":  overlay("dev"),
		"env/prod/kustomization.yaml": overlay("prod"),
	}
	const stage = "      annotations: {kargo.akuity.io/authorized-stage: 'guestbook:{{path.basename}}'}\n"
	const kargoSaid = "warning ArgoCDRevision: Argo CD Application argocd/guestbook-dev builds its path at targetRevision env/dev, and the Kargo Stage guestbook:dev updates it (kargo.akuity.io/authorized-stage): " +
		"Kargo's promotion writes to that branch what it renders from this repository"
	cases := map[string]struct {
		annotations, path string
		read              []string
		said              string
	}{
		"a branch a Kargo Stage renders": {
			annotations: stage,
			path:        "./",
			read:        []string{"env/dev guestbook-dev", "env/prod guestbook-prod"},
			said:        kargoSaid,
		},
		"a directory of a branch a Kargo Stage renders, which main does not hold": {
			annotations: stage,
			path:        "manifests",
			read:        []string{"env/dev guestbook-dev", "env/prod guestbook-prod"},
			said:        kargoSaid,
		},
		"a branch no Stage renders": {
			path: "./",
			said: "warning ArgoCDRevision: Argo CD Application argocd/guestbook-dev builds its path at targetRevision env/dev, other than the one keyhole reads, and the repository holds no tag or branch env/dev",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir, r := gitRepo(t)
			if _, err := r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{"https://git.example.com/acme/guestbook.git"}}); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, dir, files)
			writeFiles(t, dir, map[string]string{"argocd/appset.yaml": appSet(c.annotations, c.path)})
			commitAll(t, r, "main")
			docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			got := connectionsAs(docs, func(d *Document, u *Unit) string { return u.Name + " " + d.Object().Namespace })
			if !slices.Equal(got, c.read) {
				t.Errorf("Connections read in %q, want %q\n%s", got, c.read, ds)
			}
			if n := strings.Count(ds.Error(), "warning ArgoCDRevision: Argo CD Application argocd/guestbook-dev "); n != 1 || !strings.Contains(ds.Error(), c.said) {
				t.Errorf("want %q, once; said:\n%s", c.said, ds)
			}
			if strings.Contains(ds.Error(), "canary-kargo-branch") {
				t.Errorf("a Secret's value is in a diagnostic:\n%s", ds)
			}
		})
	}
}
