package source

import (
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
)

// A Flux Kustomization or HelmRelease that builds from flux-system, which
// the repository does not declare, and names a path the repository does
// not hold is written for another repository (a project's documentation
// snippet, copied into its users' fleet repositories): keyhole says once
// that it does not read it, and is not red. Where the repository declares
// flux-system, in a file read before or after, the same path is the
// build failure kustomize-controller meets.
func TestFluxUndeclaredOwnSource(t *testing.T) {
	ks := "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: operator-crs, namespace: flux-system}\n" +
		"spec:\n  path: ./infrastructure/operator/crs\n  sourceRef: {kind: GitRepository, name: flux-system}\n"
	hr := "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: operator, namespace: flux-system}\n" +
		"spec:\n  chart:\n    spec:\n      chart: ./charts/operator\n      sourceRef: {kind: GitRepository, name: flux-system}\n"
	snippet := map[string]string{
		"docs/snippets/gitops/kustomization.yaml": "resources: [repositories.yaml, deployment-crs.yaml, release.yaml]\n",
		"docs/snippets/gitops/repositories.yaml": "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: operator, namespace: flux-system}\n" +
			"spec:\n  ref: {tag: v1.3.1}\n  url: https://github.com/acme/operator\n",
		"docs/snippets/gitops/deployment-crs.yaml": ks,
		"docs/snippets/gitops/release.yaml":        hr,
	}
	sync := "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: flux-system, namespace: flux-system}\n" +
		"spec:\n  ref: {branch: main}\n  url: https://github.com/acme/operator\n"
	instance := "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata: {name: flux, namespace: flux-system}\n" +
		"spec:\n  distribution: {version: 2.x}\n  sync: {kind: GitRepository, url: https://github.com/acme/operator, ref: refs/heads/main, path: clusters/prod}\n"
	for _, tc := range []struct {
		name  string
		extra map[string]string
		want  []string // code and severity of each diagnostic about the two objects
	}{
		{name: "snippet", want: []string{"FluxSourceUnmapped warning", "FluxSourceUnmapped warning"}},
		{name: "declared after", extra: map[string]string{"docs/snippets/gitops/zz-sync.yaml": sync},
			want: []string{"KustomizeBuildFailed error", "HelmRenderFailed error"}},
		{name: "declared before", extra: map[string]string{"docs/snippets/gitops/aa-sync.yaml": sync},
			want: []string{"KustomizeBuildFailed error", "HelmRenderFailed error"}},
		// flux-operator's FluxInstance names the source it syncs after
		// its namespace.
		{name: "flux instance", extra: map[string]string{"clusters/prod/flux-instance.yaml": instance},
			want: []string{"KustomizeBuildFailed error", "HelmRenderFailed error"}},
		{name: "flux instance of an OCI artifact", extra: map[string]string{"clusters/prod/flux-instance.yaml": strings.Replace(instance, "GitRepository", "OCIRepository", 1)},
			want: []string{"FluxSourceUnmapped warning", "FluxSourceUnmapped warning"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := gitRepo(t)
			writeFiles(t, dir, snippet)
			writeFiles(t, dir, tc.extra)
			_, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range ds {
				if strings.HasSuffix(d.Pos.File, "deployment-crs.yaml") || strings.HasSuffix(d.Pos.File, "release.yaml") {
					got = append(got, d.Code+" "+d.Severity.String())
				}
			}
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Errorf("got %q, want %q\n%s", got, tc.want, ds)
			}
			for _, d := range ds {
				if d.Code == CodeFluxSourceUnmapped && !strings.Contains(d.Message, "keyhole.yaml's flux.sources (kind: GitRepository, namespace: flux-system, name: flux-system, path: DIR)") {
					t.Errorf("the warning does not say what makes it readable: %s", d)
				}
				if tc.name == "snippet" && d.Severity == diag.Error {
					t.Errorf("a snippet for another repository is red: %s", d)
				}
			}
		})
	}
}
