package source

import (
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
)

// TestKustomizeHelmNotRun: a kustomization whose helmCharts need helm is
// Argo CD's to build where the repository's argocd-cm gives kustomize
// --enable-helm (here as a patch of the installation, as repositories
// keep it): one warning at its helmCharts, not an error the engine does
// not make. Without that ConfigMap, or in a Flux unit, whose controller
// runs no helm, the build's failure stays an error.
func TestKustomizeHelmNotRun(t *testing.T) {
	app := map[string]string{
		"apps/agents/kustomization.yaml": "namespace: agents\nresources: [connection.yaml]\nhelmCharts:\n  - name: app-template\n    repo: https://charts.example.com\n    version: 3.7.3\n",
		"apps/agents/connection.yaml":    connection,
	}
	install := map[string]string{
		"argo-cd/kustomization.yaml": "namespace: argocd\nresources: [install.yaml]\npatches:\n  - path: cm.yaml\n",
		"argo-cd/install.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\n",
		"argo-cd/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\ndata:\n  kustomize.buildOptions: --enable-alpha-plugins --enable-helm\n",
	}
	noHelm := map[string]string{
		"argo-cd/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\ndata:\n  kustomize.buildOptions: --enable-alpha-plugins\n",
	}
	flux := map[string]string{
		"clusters/main/agents.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: agents\n  namespace: flux-system\nspec:\n  path: ./apps/agents\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
	}
	argo := map[string]string{
		"argocd/agents.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: agents\n  namespace: argocd\nspec:\n  project: default\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: agents\n  source:\n    repoURL: https://example.com/r.git\n    path: apps/agents\n",
	}
	with := func(sets ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, s := range sets {
			for k, v := range s {
				out[k] = v
			}
		}
		return out
	}
	tests := map[string]struct {
		files map[string]string
		code  string
		sev   diag.Severity
		msg   string
	}{
		"a kustomization root, the repository's Argo CD running helm": {
			files: with(app, install), code: CodeKustomizeHelmNotRun, sev: diag.Warning,
			msg: "kustomization apps/agents inflates Helm charts (helmCharts), which Argo CD builds with --enable-helm, as Argo CD's kustomize build options (argo-cd/cm.yaml:6) say; keyhole runs no helm, so nothing this build makes is read or checked: check it with kustomize build --enable-helm apps/agents | keyhole check -",
		},
		"an Argo CD Application's path, the repository's Argo CD running helm": {
			files: with(app, install, argo), code: CodeKustomizeHelmNotRun, sev: diag.Warning,
			msg: "(argo-cd/cm.yaml:6) say",
		},
		"the argo-cd chart's values, configs.cm": {
			files: with(app, map[string]string{"bootstrap/argocd-values.yaml": "configs:\n  cm:\n    url: https://argocd.example.com\n    kustomize.buildOptions: --enable-helm --load-restrictor LoadRestrictionsNone\n"}),
			code:  CodeKustomizeHelmNotRun, sev: diag.Warning,
			msg: "(bootstrap/argocd-values.yaml:4) say",
		},
		"the older argo-cd chart's values, server.config": {
			files: with(app, map[string]string{"argocd/values.yaml": "server:\n  config:\n    kustomize.buildOptions.v4.5.7: --enable-helm\n"}),
			code:  CodeKustomizeHelmNotRun, sev: diag.Warning,
			msg: "(argocd/values.yaml:3) say",
		},
		"the values of a chart wrapping argo-cd": {
			files: with(app, map[string]string{
				"system/argocd/Chart.yaml":  "apiVersion: v2\nname: argocd\nversion: 0.1.0\ndependencies:\n  - name: argo-cd\n    version: 7.0.0\n    repository: https://argoproj.github.io/argo-helm\n",
				"system/argocd/values.yaml": "argo-cd:\n  configs:\n    cm:\n      kustomize.buildOptions: --enable-helm\n",
			}),
			code: CodeKustomizeHelmNotRun, sev: diag.Warning,
			msg: "(system/argocd/values.yaml:4) say",
		},
		"a buildOptions key elsewhere is not Argo CD's": {
			files: with(app, map[string]string{"notes.yaml": "kustomize.buildOptions: --enable-helm\n"}),
			code:  CodeKustomizeBuildFailed, sev: diag.Error,
			msg: "must specify --enable-helm",
		},
		"no argocd-cm in the repository": {
			files: with(app), code: CodeKustomizeBuildFailed, sev: diag.Error,
			msg: "must specify --enable-helm",
		},
		"an argocd-cm without --enable-helm": {
			files: with(app, install, noHelm), code: CodeKustomizeBuildFailed, sev: diag.Error,
			msg: "must specify --enable-helm",
		},
		"a Flux Kustomization's path: kustomize-controller runs no helm": {
			files: with(app, install, flux), code: CodeKustomizeBuildFailed, sev: diag.Error,
			msg: "must specify --enable-helm",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			_, ds, err := testLoad([]string{"."}, Options{Dir: dir, MaxFileSize: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			var hits []diag.Diagnostic
			for _, d := range ds {
				if d.Code == CodeKustomizeHelmNotRun || d.Code == CodeKustomizeBuildFailed {
					hits = append(hits, d)
				}
			}
			if len(hits) != 1 {
				t.Fatalf("want one diagnostic of the build; got %v", ds)
			}
			d := hits[0]
			if d.Code != tc.code || d.Severity != tc.sev || d.Pos.String() != "apps/agents/kustomization.yaml:3:1" || !strings.Contains(d.Message, tc.msg) {
				t.Errorf("got %s %s at %s: %s\nwant %s %s at apps/agents/kustomization.yaml:3:1, saying %q", d.Severity, d.Code, d.Pos, d.Message, tc.sev, tc.code, tc.msg)
			}
			if tc.sev == diag.Warning && slices.ContainsFunc(ds, func(d diag.Diagnostic) bool { return d.Severity == diag.Error }) {
				t.Errorf("an error where Argo CD builds the kustomization: %v", ds)
			}
		})
	}
}
