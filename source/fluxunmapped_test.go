package source

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/config"

	"keyhole.dev/keyhole/diag"
)

// TestFluxUnmappedAdvice: a Flux Kustomization building from a source
// keyhole does not read is one FluxSourceUnmapped warning whose advice
// is a way that works for what the source is: another project's OCI
// artifact is out of reach (no directory of this repository is Flux's
// release manifests); an artifact named after this repository may be
// its push, mapped to the directory pushed; a tenant's GitRepository of
// another branch of this repository is that branch's tree, checked on a
// checkout of it; one of the branch keyhole reads is the repository's
// root; one of another repository is a copy of that repository.
func TestFluxUnmappedAdvice(t *testing.T) {
	own := "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: flux-system, namespace: flux-system}\n" +
		"spec:\n  interval: 30m\n  url: ssh://git@github.com/acme/fleet\n  ref: {branch: main}\n---\n" +
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: flux-system, namespace: flux-system}\n" +
		"spec:\n  interval: 10m\n  path: ./clusters/staging\n  prune: true\n  sourceRef: {kind: GitRepository, name: flux-system}\n---\n" +
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: tenants, namespace: flux-system}\n" +
		"spec:\n  interval: 1m\n  path: ./tenants\n  prune: true\n  sourceRef: {kind: GitRepository, name: flux-system}\n"
	tenant := func(url, branch string) string {
		return "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: dev-team, namespace: dev-team}\n" +
			"spec:\n  interval: 1m\n  url: " + url + "\n  ref: {branch: " + branch + "}\n---\n" +
			"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: dev-team, namespace: dev-team}\n" +
			"spec:\n  serviceAccountName: gitops-reconciler\n  interval: 1m\n  path: ./\n  prune: true\n  sourceRef: {kind: GitRepository, name: dev-team}\n"
	}
	oci := func(url string) string {
		return "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata: {name: flux-manifests, namespace: flux-system}\n" +
			"spec:\n  interval: 10m\n  url: " + url + "\n  ref: {tag: v2.9.3}\n"
	}
	ociKs := "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: flux, namespace: flux-system}\n" +
		"spec:\n  interval: 10m\n  path: ./\n  prune: true\n  sourceRef: {kind: OCIRepository, name: flux-manifests}\n"
	for name, tc := range map[string]struct {
		files map[string]string
		want  []string // in the one warning's message
		not   string   // nowhere in it
	}{
		"another project's OCI artifact": {
			files: map[string]string{"tenants/flux.yaml": oci("oci://ghcr.io/fluxcd/flux-manifests") + "---\n" + ociKs},
			want:  []string{"(oci://ghcr.io/fluxcd/flux-manifests) is another project's", "out of reach", "only where a directory of this repository is what is pushed there"},
			not:   "the directory of this repository that is its root",
		},
		"another project's OCI artifact, declared after": {
			files: map[string]string{"tenants/a.yaml": ociKs, "tenants/b.yaml": oci("oci://ghcr.io/fluxcd/flux-manifests")},
			want:  []string{"is another project's", "out of reach"},
		},
		"an OCI artifact named after this repository": {
			files: map[string]string{"tenants/flux.yaml": oci("oci://ghcr.io/acme/fleet/manifests") + "---\n" + ociKs},
			want:  []string{"map the source to the directory of this repository that is its root in keyhole.yaml's flux.sources (kind: OCIRepository, namespace: flux-system, name: flux-manifests, path: DIR)"},
			not:   "another project's",
		},
		"a tenant's branch of this repository": {
			files: map[string]string{"tenants/dev-team/sync.yaml": tenant("https://github.com/acme/fleet.git", "dev-team")},
			want: []string{"this repository (https://github.com/acme/fleet.git) at dev-team, not the revision keyhole reads", "run keyhole on a checkout of dev-team",
				"a directory holding that revision's tree (a git worktree of it) in keyhole.yaml's flux.sources (kind: GitRepository, namespace: dev-team, name: dev-team, path: DIR)"},
			not: "the directory of this repository that is its root",
		},
		"a tenant's GitRepository of the branch keyhole reads": {
			files: map[string]string{"tenants/dev-team/sync.yaml": tenant("git@github.com:acme/fleet.git", "main")},
			want:  []string{"at main, the revision keyhole reads", "map the source to the repository's root directory"},
		},
		"a tenant's own repository": {
			files: map[string]string{"tenants/dev-team/sync.yaml": tenant("https://github.com/acme/dev-team.git", "main")},
			want:  []string{"another repository (https://github.com/acme/dev-team.git)", "a copy of that repository's tree"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, r := gitRepo(t)
			if _, err := r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{"https://github.com/acme/fleet.git"}}); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, dir, map[string]string{"clusters/staging/flux-system/gotk-sync.yaml": own})
			writeFiles(t, dir, tc.files)
			commitAll(t, r, "first")
			_, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			var said []diag.Diagnostic
			for _, d := range ds {
				if d.Code == CodeFluxSourceUnmapped {
					said = append(said, d)
				}
			}
			if len(said) != 1 || said[0].Severity != diag.Warning || ds.HasErrors() {
				t.Fatalf("want one FluxSourceUnmapped warning and no error:\n%s", ds)
			}
			for _, w := range tc.want {
				if !strings.Contains(said[0].Message, w) {
					t.Errorf("the warning does not say %q: %s", w, said[0].Message)
				}
			}
			if tc.not != "" && strings.Contains(said[0].Message, tc.not) {
				t.Errorf("the warning says %q: %s", tc.not, said[0].Message)
			}
		})
	}
}
