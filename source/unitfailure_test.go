package source

import (
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
)

// TestFailedUnitHoldingNothingOfKeyholes: a deploy unit that does not
// build, or whose chart does not render, is an error only when it holds
// something keyhole checks (its files name keyhole's kinds, or it may
// declare a Secret a Connection reads that no other unit holds); else one
// UnitNotBuilt warning names it and says why (docs/inputs.md, "Scope").
func TestFailedUnitHoldingNothingOfKeyholes(t *testing.T) {
	const connection = `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: gh, namespace: agents}
spec:
  hosts: [api.github.com]
  credential: {kind: secret, secretRef: {name: gh-token}}
`
	const ghSecret = "apiVersion: v1\nkind: Secret\nmetadata: {name: gh-token, namespace: agents}\nstringData: {token: t}\n"
	argo := func(name, path string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\nspec:\n  source: {repoURL: https://example.com/r.git, path: " + path +
			"}\n  destination: {server: https://kubernetes.default.svc, namespace: web}\n---\n"
	}
	const dupKey = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  labels:\n    a: b\n    a: c\n"
	const missingBase = "resources: [secret.yaml, ../gone]\n"
	chartApp := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: chart, namespace: argocd}\nspec:\n  source:\n    repoURL: https://example.com/r.git\n    path: chart\n    helm: {valueFiles: [missing.yaml]}\n  destination: {server: https://kubernetes.default.svc, namespace: web}\n"
	chart := map[string]string{
		"chart/Chart.yaml":            "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
		"chart/templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: '{{ .Release.Name }}-token'}\nstringData: {a: b}\n",
	}
	tests := map[string]struct {
		files    map[string]string
		wantCode string
		wantSev  diag.Severity
	}{
		"duplicate key, Secret no Connection reads": {
			files: map[string]string{
				"agents/connection.yaml": connection, "agents/secret.yaml": ghSecret,
				"argocd/app.yaml":        argo("web", "web"),
				"web/kustomization.yaml": "resources: [cm.yaml, secret.yaml]\n", "web/cm.yaml": dupKey,
				"web/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: other}\nstringData: {k: v}\n",
			},
			wantCode: CodeUnitNotBuilt, wantSev: diag.Warning,
		},
		"duplicate key, the only Secret a Connection reads": {
			files: map[string]string{
				"agents/connection.yaml": connection,
				"argocd/app.yaml":        argo("web", "web"),
				"web/kustomization.yaml": "resources: [cm.yaml, secret.yaml]\n", "web/cm.yaml": dupKey,
				"web/secret.yaml": ghSecret,
			},
			wantCode: CodeYAMLInvalid, wantSev: diag.Error,
		},
		"duplicate annotations key, which kustomize merges": {
			files: map[string]string{
				"agents/secret.yaml":     ghSecret,
				"argocd/app.yaml":        argo("web", "web"),
				"web/kustomization.yaml": "resources: [cm.yaml, connection.yaml]\n", "web/connection.yaml": connection,
				"web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  annotations:\n    a: \"1\"\n  annotations:\n    b: \"2\"\n",
			},
		},
		"duplicate key in a file of keyhole's kinds": {
			files: map[string]string{
				"agents/secret.yaml":     ghSecret,
				"argocd/app.yaml":        argo("web", "web"),
				"web/kustomization.yaml": "resources: [connection.yaml]\n",
				"web/connection.yaml":    strings.Replace(connection, "  hosts:", "  annotations: {a: b}\n  annotations: {c: d}\n  hosts:", 1),
			},
			wantCode: CodeYAMLInvalid, wantSev: diag.Error,
		},
		"build fails, Secret another unit holds": {
			files: map[string]string{
				"agents/connection.yaml": connection, "agents/secret.yaml": ghSecret,
				"argocd/app.yaml":        argo("web", "web"),
				"web/kustomization.yaml": missingBase, "web/secret.yaml": ghSecret,
			},
			wantCode: CodeUnitNotBuilt, wantSev: diag.Warning,
		},
		"build fails, keyhole's kinds in it": {
			files: map[string]string{
				"agents/secret.yaml":     ghSecret,
				"argocd/app.yaml":        argo("web", "web"),
				"web/kustomization.yaml": "resources: [connection.yaml, ../gone]\n", "web/connection.yaml": connection,
			},
			wantCode: CodeKustomizeBuildFailed, wantSev: diag.Error,
		},
		"chart value file missing, Secret no Connection reads": {
			files: merged(chart, map[string]string{
				"agents/connection.yaml": connection, "agents/secret.yaml": ghSecret, "argocd/app.yaml": chartApp,
			}),
			wantCode: CodeUnitNotBuilt, wantSev: diag.Warning,
		},
		"chart value file missing, Secret a Connection may read": {
			files: merged(chart, map[string]string{
				"agents/connection.yaml": connection, "argocd/app.yaml": chartApp,
			}),
			wantCode: CodeHelmRenderFailed, wantSev: diag.Error,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			_, diags, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, d := range diags {
				if d.Severity == diag.Error && d.Code != tc.wantCode {
					t.Errorf("unexpected error: %s", d)
				}
				if d.Code == tc.wantCode && d.Severity == tc.wantSev {
					found = true
					if d.Code == CodeUnitNotBuilt && (!strings.Contains(d.Message, "is not read") || len(d.Units) != 1) {
						t.Errorf("the warning does not name the unit and say it is not read: %s (units %v)", d, d.Units)
					}
				}
			}
			if !found && tc.wantCode != "" {
				t.Errorf("no %s %s among:\n%v", tc.wantSev, tc.wantCode, diags)
			}
		})
	}
}

func merged(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestComponentIsNoRoot: a kustomize Component that a walk finds, and
// that a Flux Kustomization adds with spec.components, is checked only
// in that unit, with its substitution, never alone (where ${APP} would
// be read as written).
func TestComponentIsNoRoot(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"clusters/main/agent.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: agent, namespace: flux-system}
spec:
  path: ./apps/agent
  sourceRef: {kind: GitRepository, name: flux-system}
  components: [../../components/llm]
  postBuild: {substitute: {APP: agent}}
`,
		"apps/agent/kustomization.yaml":     "resources: [secret.yaml]\n",
		"apps/agent/secret.yaml":            "apiVersion: v1\nkind: Secret\nmetadata: {name: agent-llm-secret, namespace: agents}\nstringData: {token: t}\n",
		"components/llm/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [connection.yaml]\n",
		"components/llm/connection.yaml": `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: "${APP}-llm", namespace: agents}
spec:
  hosts: [api.openai.com]
  credential: {kind: secret, secretRef: {name: "${APP}-llm-secret"}}
`,
	})
	docs, diags, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range docs {
		if o := d.Object(); o.Kind == "Connection" {
			names = append(names, o.Name+" in "+d.Unit().Name)
		}
	}
	if want := []string{"agent-llm in flux:flux-system/agent"}; !slices.Equal(names, want) {
		t.Errorf("Connections read: %q, want %q", names, want)
	}
	i := slices.IndexFunc(diags, func(d diag.Diagnostic) bool {
		return d.Code == CodeInputSkipped && strings.Contains(d.Message, "Component not built on its own")
	})
	if i < 0 {
		t.Errorf("no note says the Component is no root of its own: %v", diags)
	}
}
