package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzEngineUnits: whatever a file of GitOps engine objects holds (a Flux
// Kustomization, an Argo CD Application or ApplicationSet, with any
// path, template, generator or overlay), Load finds its units and builds
// them without a panic or a hang, and never reads outside the tree: the
// units' roots stay under it.
func FuzzEngineUnits(f *testing.F) {
	seeds := []string{
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: a}\nspec:\n  path: ./app\n  sourceRef: {kind: GitRepository, name: flux-system}\n  targetNamespace: x\n  postBuild: {substitute: {A: b}, substituteFrom: [{kind: ConfigMap, name: c}, {kind: Secret, name: s, optional: true}]}\n  patches: [{patch: 'x', target: {kind: Connection}}]\n  images: [{name: a, newTag: '1'}]\n  components: [../c]\n",
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: a}\nspec: {path: ../../../../etc, sourceRef: {name: flux-system}}\n",
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: a}\nspec: {path: './${A}', sourceRef: {name: flux-system}}\n",
		"apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: r, namespace: flux-system}\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: a, namespace: flux-system}\nspec: {path: ., sourceRef: {name: r}}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a}\nspec:\n  source: {path: app, kustomize: {namePrefix: p-, images: ['a=b:1'], patches: [{patch: x}]}}\n  destination: {name: d, namespace: n}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a}\nspec:\n  sources: [{path: app, directory: {recurse: true, include: '{*.yaml,*.json}'}}, {ref: values}]\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: a}\nspec:\n  goTemplate: true\n  generators: [{git: {directories: [{path: '**'}, {path: app, exclude: true}]}}, {list: {}}]\n  template: {metadata: {name: '{{.path.basename}}'}, spec: {source: {path: '{{.path.path}}'}}}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a}\nspec:\n  sources: [{path: chart, helm: {releaseName: r, valueFiles: [v.yaml, $values/values.json, ../../x], values: 'a: b', parameters: [{name: 'x[0].y', value: z, forceString: true}], fileParameters: [{name: f, path: ../values.json}], apiVersions: [a/v1], kubeVersion: '1.30'}}, {ref: values}]\n",
		"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: a, namespace: flux-system}\nspec:\n  targetNamespace: t\n  chart: {spec: {chart: ./chart, sourceRef: {kind: GitRepository, name: flux-system}, valuesFiles: [chart/v.yaml, ../x]}}\n  valuesFrom: [{kind: ConfigMap, name: c, targetPath: 'a.b[0]'}, {kind: Secret, name: s}]\n  values: {name: n}\n  postRenderers: [{kustomize: {patches: []}}]\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: a}\nspec:\n  generators: [{git: {files: [{path: '*.json'}]}}]\n  template: {metadata: {name: '{{name}}'}, spec: {source: {path: '{{path}}'}}}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: a}\nspec:\n  generators: [{matrix: {generators: [{git: {directories: [{path: '*'}], values: {v: '{{path}}'}}}, {list: {elements: [{ns: 'n-{{path.basename}}', values: {a: b}}], elementsYaml: '[{ns: x}]'}}]}}]\n  template: {metadata: {name: '{{path.basename}}-{{ns}}'}, spec: {source: {path: '{{path}}'}, destination: {namespace: '{{values.v}}'}}}\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		files := map[string]string{
			"engine.yaml": string(data),
			// The same objects, applied by a Flux Kustomization that
			// patches and substitutes them (fluxApplied).
			"apps/engine.yaml":        string(data),
			"apps/kustomization.yaml": "resources: [engine.yaml]\n",
			"flux.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\n" +
				"spec:\n  path: ./apps\n  sourceRef: {kind: GitRepository, name: flux-system}\n  postBuild: {substitute: {A: app}}\n" +
				"  patches: [{target: {kind: Kustomization}, patch: '{apiVersion: kustomize.toolkit.fluxcd.io/v1, kind: Kustomization, metadata: {name: _}, spec: {targetNamespace: p}}'}]\n",
			// And from a base that two clusters' overlays list from
			// outside their paths, one renaming, one moving it.
			"base/engine.yaml":              string(data),
			"clusters/a/kustomization.yaml": "resources: [../../base/engine.yaml]\nnamePrefix: a-\n",
			"clusters/b/kustomization.yaml": "resources: [../../base/engine.yaml]\n",
			"fleet.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: a, namespace: flux-system}\n" +
				"spec: {path: ./clusters/a, sourceRef: {kind: GitRepository, name: flux-system}}\n---\n" +
				"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: b, namespace: flux-system}\n" +
				"spec: {path: ./clusters/b, targetNamespace: b, sourceRef: {kind: GitRepository, name: flux-system}}\n",
			// And applied by an Argo CD Application that renames and
			// patches what it builds (argoApplied).
			"argo/engine.yaml":        string(data),
			"argo/kustomization.yaml": "resources: [engine.yaml]\nnamePrefix: p-\n",
			"argo.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: root, namespace: argocd}\n" +
				"spec:\n  destination: {namespace: argocd}\n  source:\n    path: argo\n    kustomize: {namespace: argocd, patches: [{target: {kind: Application}, patch: '[{op: add, path: /spec/destination/namespace, value: x}]'}]}\n",
			"app/kustomization.yaml": "resources: [c.yaml]\n",
			"app/c.yaml":             "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c}\nspec: {hosts: [a.example.com]}\n",
			"values.json":            `{"name": "x", "path": "app"}`,
			"chart/Chart.yaml":       "apiVersion: v2\nname: c\nversion: 0.1.0\n",
			"chart/v.yaml":           "name: c\n",
			"chart/templates/c.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: {{ .Values.name }}}\nspec: {hosts: [a.example.com]}\n",
		}
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		docs, _, _ := testLoad([]string{dir}, Options{Dir: dir})
		ids := map[string]*Unit{}
		for _, d := range docs {
			u := d.Unit()
			if u.Root != "" && !within(dir, u.Root) {
				t.Fatalf("unit %s builds %s, outside the tree", u.Name, u.Root)
			}
			if v := ids[u.ID]; v != nil && v != u {
				t.Fatalf("two units have the ID %q", u.ID)
			}
			ids[u.ID] = u
		}
	})
}

// FuzzHelmChart: whatever a chart's template and values hold, Load
// renders it or says why not, without a panic or a hang, and no
// diagnostic quotes a value the chart was given.
func FuzzHelmChart(f *testing.F) {
	f.Add([]byte("{{ .Values.token }}"), []byte("token: x\n"))
	f.Add([]byte("{{ fail .Values.token }}"), []byte("token: [a, b]\n"))
	f.Add([]byte("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {t: {{ .Values.token | quote }}}\n"), []byte("token: {a: 1}\n"))
	f.Add([]byte("{{ range until 5 }}---\n{{ end }}{{ tpl .Values.token . }}"), []byte("token: '{{ .Release.Name }}'\n"))
	f.Add([]byte("{{ include \"x\" . }}{{ define \"x\" }}{{ template \"x\" . }}{{ end }}"), []byte(""))
	const canary = "CANARYfuzzCANARY"
	f.Fuzz(func(t *testing.T, tmpl, values []byte) {
		dir := t.TempDir()
		files := map[string][]byte{
			"c/Chart.yaml":          []byte("apiVersion: v2\nname: c\nversion: 0.1.0\n"),
			"c/values.yaml":         append(append([]byte{}, values...), "\ncanary: "+canary+"\n"...),
			"c/templates/conn.yaml": []byte("apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c}\nspec: {hosts: [a.example.com]}\n"),
			"c/templates/t.yaml":    tmpl,
		}
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, ds, _ := testLoad([]string{"."}, Options{Dir: dir})
		for _, d := range ds {
			if strings.Contains(d.Message, canary) {
				t.Fatalf("a diagnostic quotes a value: %s", d.Message)
			}
		}
	})
}
