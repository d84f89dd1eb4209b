package source

import (
	"slices"
	"strings"
	"testing"
)

// TestFluxRevisionPinned: a Flux unit building from the repository's own
// GitRepository is read at the revision its spec.ref names: the working
// tree for the branch checked out, the tag's commit from git, or nothing,
// said once, for a tag the repository does not hold.
func TestFluxRevisionPinned(t *testing.T) {
	sync := func(ref string) string {
		return "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: flux-system, namespace: flux-system}\n" +
			"spec: {interval: 1m, url: 'https://git.example.com/r.git', ref: {" + ref + "}}\n---\n" +
			"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\n" +
			"spec: {interval: 10m, path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}\n"
	}
	dir, r := gitRepo(t)
	writeFiles(t, dir, map[string]string{"apps/conn.yaml": argoConn("first")})
	first := commitAll(t, r, "first")
	if _, err := r.CreateTag("v1.0.0", first, nil); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"apps/more.yaml": argoConn("second")})
	commitAll(t, r, "second")
	for _, c := range []struct{ ref, read, said string }{
		{"branch: master", "first second", ""},
		{"tag: v1.0.0", "first", "info FluxRevision: Flux Kustomization flux-system/apps builds its path from GitRepository flux-system/flux-system at v1.0.0 (commit " + first.String()[:12] + ")"},
		{"commit: " + first.String(), "first", "info FluxRevision"},
		{"name: refs/tags/v1.0.0", "first", "info FluxRevision"},
		{"tag: v9.0.0", "", "warning FluxRevision: Flux Kustomization flux-system/apps builds from GitRepository flux-system/flux-system at v9.0.0, other than the revision keyhole reads, and no tag, branch or commit of the repository is v9.0.0"},
		{"semver: '>=1.0.0'", "", "warning FluxRevision: Flux Kustomization flux-system/apps builds from GitRepository flux-system/flux-system at >=1.0.0, other than the revision keyhole reads, and a semver range"},
	} {
		t.Run(c.ref, func(t *testing.T) {
			assertPinRead(t, dir, "clusters/prod/sync.yaml", sync(c.ref), "FluxRevision", c.read, c.said)
		})
	}
}

// assertPinRead writes body to file under dir, loads the repository and
// asserts that the Connections read are read (names, space-separated) and
// that code is said once, holding said, or never when said is empty.
func assertPinRead(t *testing.T, dir, file, body, code, read, said string) {
	t.Helper()
	writeFiles(t, dir, map[string]string{file: body})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range docs {
		if o := d.Object(); o.Kind == "Connection" {
			names = append(names, o.Name)
		}
	}
	slices.Sort(names)
	if got := strings.Join(names, " "); got != read {
		t.Errorf("read %q, want %q\n%s", got, read, ds)
	}
	n := strings.Count(ds.Error(), code)
	switch {
	case said == "" && n != 0:
		t.Errorf("said %s of a revision keyhole reads as checked out:\n%s", code, ds)
	case said != "" && (n != 1 || !strings.Contains(ds.Error(), said)):
		t.Errorf("want %q, once; said:\n%s", said, ds)
	}
}

// TestRevisionBeforeFirstCommit: in a repository with no commit yet (git
// init, files not committed), a branch name is what the working tree
// will be committed to: read as written, not said unreadable; a tag is
// still said, once, and not read.
func TestRevisionBeforeFirstCommit(t *testing.T) {
	dir, _ := gitRepo(t)
	app := func(rev string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: agent, namespace: argocd}\n" +
			"spec:\n  project: default\n  source: {repoURL: 'https://git.example.com/acme/agents.git', path: envs/dev, targetRevision: '" + rev + "'}\n  destination: {name: in-cluster, namespace: agents}\n"
	}
	writeFiles(t, dir, map[string]string{"envs/dev/gh.yaml": argoConn("gh")})
	for _, c := range []struct{ rev, read, said string }{
		{"main", "gh", ""},
		{"master", "gh", ""},
		{"v1.0.0", "", "no commit checked out"},
	} {
		t.Run(c.rev, func(t *testing.T) {
			assertPinRead(t, dir, "argo/app.yaml", app(c.rev), "ArgoCDRevision", c.read, c.said)
		})
	}
}
