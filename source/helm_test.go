package source

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source/internal/sourcetest"
)

// The chart's Connection template and Chart.yaml, shared with
// source/helm's tests.
const (
	helmConn  = sourcetest.HelmConn
	helmChart = sourcetest.HelmChart
)

// nodeText is d as YAML.
func nodeText(t *testing.T, d *Document) string {
	t.Helper()
	out, err := yaml.Marshal(d.Node)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func helmObjects(t *testing.T, docs []*Document) map[string]*Document {
	t.Helper()
	out := map[string]*Document{}
	for _, d := range docs {
		o := d.Object()
		out[o.Kind+" "+o.Namespace+"/"+o.Name] = d
	}
	return out
}

// A chart a walk finds, which no engine object deploys, is rendered with
// its default values as helm template renders it, as one deploy unit.
func TestHelmWalkedChart(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"charts/agents/Chart.yaml":                   helmChart,
		"charts/agents/values.yaml":                  "name: github\nsecret: gh-token\ntier: 1\n",
		"charts/agents/templates/connection.yaml":    helmConn,
		"charts/agents/templates/_helpers.tpl":       "{{ define \"x\" }}y{{ end }}\n",
		"charts/agents/templates/NOTES.txt":          "Installed {{ .Release.Name }}.\n",
		"charts/agents/charts/sub/Chart.yaml":        "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"charts/agents/charts/sub/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-sub}\n",
		"charts/agents/crds/crd.yaml":                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: things.example.com}\n",
		"charts/web/Chart.yaml":                      "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"charts/web/templates/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Values.missing.field }}}\n",
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	objs := helmObjects(t, docs)
	c := objs["Connection default/github"]
	if c == nil {
		t.Fatalf("the chart's Connection was not rendered: %q", docIDs(docs))
	}
	if c.File != "charts/agents/templates/connection.yaml" {
		t.Errorf("Connection reported in %s", c.File)
	}
	if u := c.Unit(); u.Name != "charts/agents" || u.Source != UnitHelm || u.Helm == nil {
		t.Errorf("unit %+v", u)
	}
	for _, want := range []string{"release: release-name", `tier: "1"`, "name: gh-token", "Bearer {{ .token }}"} {
		if !strings.Contains(nodeText(t, c), want) {
			t.Errorf("rendered Connection lacks %q:\n%s", want, nodeText(t, c))
		}
	}
	if objs["ConfigMap /release-name-sub"] == nil || objs["CustomResourceDefinition /things.example.com"] == nil {
		t.Errorf("subchart or CRD not rendered: %q", docIDs(docs))
	}
	if objs["ConfigMap /release-name-sub"].File != "charts/agents/charts/sub/templates/cm.yaml" {
		t.Errorf("subchart object reported in %s", objs["ConfigMap /release-name-sub"].File)
	}
	// The other chart names nothing of keyhole's: said once, not rendered
	// (its template would fail).
	var skip bool
	for _, d := range ds {
		if d.Code == CodeInputSkipped && d.Pos.File == "charts/web/Chart.yaml" {
			skip = true
		} else if d.Severity.String() != "info" {
			t.Errorf("unexpected %v", d)
		}
	}
	if !skip {
		t.Errorf("charts/web not said skipped: %v", ds)
	}
}

// An Argo CD Application's Helm source is rendered with what its helm
// options give, in helm template's order: the chart's values, then each
// value file, then the inline values, then the parameters.
func TestHelmArgoApplication(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"chart/Chart.yaml":              helmChart,
		"chart/values.yaml":             "name: base\nsecret: base-token\ntier: base\n",
		"chart/values-prod.yaml":        "name: prod\nsecret: prod-token\n",
		"envs/prod/values.yaml":         "secret: env-token\n",
		"chart/templates/conn.yaml":     helmConn,
		"chart/templates/extra.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: {{ .Release.Namespace }}}\ndata: {file: {{ .Values.file | quote }}}\n",
		"chart/templates/test-pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: test\n  annotations: {helm.sh/hook: test}\n",
		"chart/motd.txt":                "hello",
		"argocd/app.yaml": `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: agents, namespace: argocd}
spec:
  destination: {server: https://kubernetes.default.svc, namespace: team-a}
  sources:
    - repoURL: https://git.example.com/repo.git
      path: chart
      helm:
        releaseName: rel
        skipTests: true
        valueFiles: [values-prod.yaml, $values/envs/prod/values.yaml, missing.yaml]
        ignoreMissingValueFiles: true
        values: |
          tier: inline
        parameters:
          - {name: name, value: from-param}
          - {name: tier, value: "2", forceString: true}
        fileParameters:
          - {name: file, path: motd.txt}
    - repoURL: https://git.example.com/repo.git
      ref: values
`,
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// Rendered without keyhole's plugin, the chart's Connection is
	// applied as written: said once, at the Application.
	var unrendered int
	for _, d := range ds {
		switch {
		case d.Code == CodeArgoCDUnrendered && d.Pos.File == "argocd/app.yaml" && strings.Contains(d.Message, "(Connection)"):
			unrendered++
		case d.Severity.String() != "info":
			t.Errorf("unexpected %v", d)
		}
	}
	if unrendered != 1 {
		t.Errorf("%d ArgoCDUnrendered warnings at the Application, want 1: %v", unrendered, ds)
	}
	objs := helmObjects(t, docs)
	c := objs["Connection team-a/from-param"]
	if c == nil {
		t.Fatalf("Connection not rendered with the Application's values: %q", docIDs(docs))
	}
	text := nodeText(t, c)
	for _, want := range []string{"release: rel", `tier: "2"`, "name: env-token"} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered Connection lacks %q:\n%s", want, text)
		}
	}
	if u := c.Unit(); u.Name != "argocd:argocd/agents#1" || u.Source != UnitArgoCD || u.Helm == nil {
		t.Errorf("unit %+v", u)
	}
	if cm := objs["ConfigMap team-a/extra"]; cm == nil || !strings.Contains(nodeText(t, cm), "hello") {
		t.Errorf("file parameter not applied: %q", docIDs(docs))
	}
	if objs["Pod /test"] != nil {
		t.Error("a test hook was rendered though skipTests is set")
	}
	// The chart is the Application's: not rendered a second time as a
	// walked chart with its defaults.
	if objs["Connection default/base"] != nil {
		t.Errorf("the chart was also rendered on its own: %q", docIDs(docs))
	}
}

// What Argo CD would refuse in a Helm source is an error at the source.
func TestHelmArgoRefused(t *testing.T) {
	app := func(helm string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a, namespace: argocd}\n" +
			"spec:\n  destination: {namespace: x}\n  source:\n    repoURL: https://git.example.com/acme/apps.git\n    path: chart\n    helm: " + helm + "\n"
	}
	for name, tc := range map[string]struct{ helm, want string }{
		"missing value file": {"{valueFiles: [gone.yaml]}", "value file gone.yaml is not a file of this repository"},
		"value file outside": {"{valueFiles: [../../../etc/passwd]}", "leaves the repository"},
		"unknown ref":        {"{valueFiles: [$other/v.yaml]}", "names the source $other"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"chart/Chart.yaml":          helmChart,
				"chart/values.yaml":         "name: a\nsecret: s\n",
				"chart/templates/conn.yaml": helmConn,
				"app.yaml":                  app(tc.helm),
			})
			_, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(ds, func(d diag.Diagnostic) bool {
				return d.Severity.String() == "error" && strings.Contains(d.Message, tc.want)
			}) {
				t.Errorf("no error saying %q: %v", tc.want, ds)
			}
		})
	}
}

// A dependency Chart.yaml lists and charts/ lacks is fetched by the
// engine and not by keyhole: the chart is rendered without it, and that
// is a warning, never silence.
func TestHelmMissingDependency(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"c/Chart.yaml":          helmChart + "dependencies:\n  - {name: redis, version: 1.0.0, repository: https://charts.example.com}\n",
		"c/values.yaml":         "name: a\nsecret: s\n",
		"c/templates/conn.yaml": helmConn,
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if helmObjects(t, docs)["Connection default/a"] == nil {
		t.Errorf("the chart's own templates were not rendered: %q", docIDs(docs))
	}
	if len(ds) != 1 || ds[0].Code != CodeHelmDependencyMissing || ds[0].Severity.String() != "warning" || !strings.Contains(ds[0].Message, `"redis"`) {
		t.Errorf("diagnostics %v", ds)
	}
}

// A chart that names keyhole's kinds and does not render is an error,
// and its message holds no value the chart was given: a render error
// may quote one, and a Secret's value may come from one.
func TestHelmRenderFailsWithoutValues(t *testing.T) {
	const canary = "ghp_CANARYcanaryCANARYcanary0123456789"
	for name, tmpl := range map[string]string{
		"fail":       "{{ fail (printf \"bad token %s\" .Values.token) }}",
		"schema":     "{{ .Values.token }}",
		"yaml":       "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  token: {{ .Values.token }}\n  : {{ .Values.token }}\n",
		"parse":      "{{ if .Values.token }}",
		"conversion": "{{ .Values.token | int | required (printf \"%s\" .Values.token) }}",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{
				"c/Chart.yaml":          helmChart,
				"c/values.yaml":         "token: " + canary + "\nname: a\nsecret: s\n",
				"c/templates/conn.yaml": helmConn,
				"c/templates/bad.yaml":  tmpl,
			}
			if name == "schema" {
				files["c/values.schema.json"] = `{"type": "object", "properties": {"token": {"type": "string", "pattern": "^[0-9]+$"}}}`
			}
			writeFiles(t, dir, files)
			docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) != 0 || len(ds) != 1 || ds[0].Code != CodeHelmRenderFailed || ds[0].Pos.String() != "c/Chart.yaml:1:1" {
				t.Fatalf("got %q, %v", docIDs(docs), ds)
			}
			if strings.Contains(ds[0].Message, canary) || strings.Contains(ds[0].Message, "CANARY") {
				t.Errorf("the message quotes a value: %s", ds[0].Message)
			}
		})
	}
}

// A chart's file that is a link out of the repository is never read.
func TestHelmLinkOutside(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(outside, []byte("token: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"c/Chart.yaml":          helmChart,
		"c/values.yaml":         "name: a\nsecret: s\n",
		"c/templates/conn.yaml": helmConn,
	})
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "c", "templates", "leak.yaml")); err != nil {
		t.Fatal(err)
	}
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 0 || len(ds) != 1 || ds[0].Code != CodeHelmRenderFailed || !strings.Contains(ds[0].Message, "outside the repository") {
		t.Errorf("got %q, %v", docIDs(docs), ds)
	}
}

// An app of apps written as a Helm chart declares its Applications in
// templates: rendered with its defaults, they are read as if written
// out, and each makes its deploy unit.
func TestHelmAppOfApps(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"apps/Chart.yaml":  "apiVersion: v2\nname: apps\nversion: 0.1.0\n",
		"apps/values.yaml": "apps: [agents, web]\nprefix: team\n",
		"apps/templates/apps.yaml": `{{- range .Values.apps }}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: {{ $.Values.prefix }}-{{ . }}, namespace: argocd}
spec:
  destination: {namespace: {{ . }}}
  source: {repoURL: https://git.example.com/acme/apps.git, path: {{ . }}}
{{- end }}
`,
		"agents/conn.yaml": connection,
		"web/cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c := helmObjects(t, docs)["Connection agents/github-acme"]
	if c == nil {
		t.Fatalf("the Application's path was not built: %q %v", docIDs(docs), ds)
	}
	if u := c.Unit(); u.Name != "argocd:argocd/team-agents" || u.Namespace != "agents" || u.Decl.File != "apps/templates/apps.yaml" {
		t.Errorf("unit %+v", u)
	}
	var said bool
	for _, d := range ds {
		if d.Pos.File == "apps/Chart.yaml" && strings.Contains(d.Message, "rendered only for the GitOps engine objects") {
			said = true
		}
	}
	if !said {
		t.Errorf("the chart is not said rendered for its Applications: %v", ds)
	}
}

// A chart whose templates only annotate objects for Argo CD names the
// group but declares no Application: it is not rendered to look for
// them, and a render that would fail is not reported.
func TestHelmAnnotationIsNoApplication(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"c/Chart.yaml":        "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"c/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.sub.name }}\n  annotations: {argocd.argoproj.io/sync-wave: \"1\"}\n",
	})
	_, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Code == CodeHelmRenderFailed {
			t.Errorf("unexpected %v", d)
		}
	}
}

// A Flux HelmRelease whose chart is a directory of the repository is
// rendered as helm-controller renders it: valuesFiles in place of the
// chart's values.yaml, then each valuesFrom the repository holds in the
// clear, then spec.values; the release named [targetNamespace-]name, in
// the namespace the Flux Kustomization applying it sets.
func TestHelmRelease(t *testing.T) {
	const hr = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: agents, namespace: flux-system}
spec:
  targetNamespace: team-a
  chart:
    spec:
      chart: ./charts/agents
      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
      valuesFiles: [charts/agents/values.yaml, charts/agents/values-prod.yaml]
  valuesFrom:
    - {kind: ConfigMap, name: agent-values}
    - {kind: ConfigMap, name: agent-values, valuesKey: tier, targetPath: tier}
    - {kind: Secret, name: agent-secrets}
    - {kind: Secret, name: optional-secrets, optional: true}
  values:
    name: from-spec
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: remote, namespace: flux-system}
spec:
  chart:
    spec:
      chart: podinfo
      sourceRef: {kind: HelmRepository, name: podinfo}
`
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"clusters/prod/flux-system/sync.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: flux-system, namespace: flux-system}\n" +
			"spec:\n  path: ./clusters/prod\n  sourceRef: {kind: GitRepository, name: flux-system}\n",
		"clusters/prod/apps.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\n" +
			"spec:\n  path: ./apps\n  targetNamespace: apps\n  sourceRef: {kind: GitRepository, name: flux-system}\n",
		"apps/kustomization.yaml":         "resources: [helmrelease.yaml, values.yaml]\npatches:\n  - path: patch.yaml\n",
		"apps/patch.yaml":                 "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: agents, namespace: flux-system}\nspec:\n  values: {tier: patched}\n",
		"apps/helmrelease.yaml":           hr,
		"apps/values.yaml":                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: agent-values, namespace: flux-system}\ndata:\n  values.yaml: |\n    secret: cm-token\n  tier: gold\n",
		"charts/agents/Chart.yaml":        helmChart,
		"charts/agents/values.yaml":       "name: base\nsecret: base-token\ntier: base\n",
		"charts/agents/values-prod.yaml":  "name: prod\n",
		"charts/agents/templates/c.yaml":  helmConn,
		"charts/agents/templates/nm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: release, namespace: {{ .Release.Namespace }}}\ndata: {name: {{ .Release.Name }}}\n",
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	objs := helmObjects(t, docs)
	c := objs["Connection team-a/from-spec"]
	if c == nil {
		t.Fatalf("Connection not rendered with the HelmRelease's values: %q %v", docIDs(docs), ds)
	}
	text := nodeText(t, c)
	// The apps Kustomization applies the release with its
	// kustomization's patch: spec.values, merged last, sets the tier.
	for _, want := range []string{"release: team-a-agents", `tier: "patched"`, "name: cm-token"} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered Connection lacks %q:\n%s", want, text)
		}
	}
	if u := c.Unit(); u.Name != "helmrelease:apps/agents" || u.Source != UnitHelmRelease || u.Cluster != "flux clusters/prod" {
		t.Errorf("unit %+v", u)
	}
	// A kustomize patch of the release is a fragment, not a release of
	// its own, and applied: no word of it.
	var warned, skipped bool
	for _, d := range ds {
		switch {
		case d.Code == CodeHelmValuesUnread && strings.Contains(d.Message, "Secret agent-secrets") && !strings.Contains(d.Message, "optional-secrets") &&
			!strings.Contains(d.Message, "patch"):
			warned = true
		case d.Code == CodeInputSkipped && strings.Contains(d.Message, "HelmRelease apps/remote renders the chart podinfo of HelmRepository"):
			skipped = true
		case d.Severity.String() != "info":
			t.Errorf("unexpected %v", d)
		}
	}
	if !warned || !skipped {
		t.Errorf("warned %v, skipped %v: %v", warned, skipped, ds)
	}
}

// A HelmRelease that no Flux Kustomization's path holds, patched by the
// kustomization listing it, is rendered as written, and the warning
// names the patch.
func TestHelmReleasePatchedUnapplied(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"apps/kustomization.yaml": "resources: [hr.yaml]\npatches:\n  - path: patch.yaml\n",
		"apps/patch.yaml":         "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: agents}\nspec:\n  values: {tier: patched}\n",
		"apps/hr.yaml": "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: agents, namespace: team}\n" +
			"spec:\n  chart:\n    spec: {chart: ./charts/agents, sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}}\n" +
			"  values: {name: agent, secret: s, tier: written}\n",
		"charts/agents/Chart.yaml":       helmChart,
		"charts/agents/templates/c.yaml": helmConn,
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c := helmObjects(t, docs)["Connection team/agent"]
	if c == nil || !strings.Contains(nodeText(t, c), `tier: "written"`) {
		t.Fatalf("Connection not rendered as written: %q %v", docIDs(docs), ds)
	}
	if !strings.Contains(ds.Error(), "the kustomize patch apps/patch.yaml, which keyhole does not apply to the HelmRelease") {
		t.Errorf("no warning names the patch:\n%s", ds.Error())
	}
}

// A HelmRelease's values hold the Flux Kustomization's variables, which
// kustomize-controller substitutes before helm-controller sees them.
func TestHelmReleaseSubstituted(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"flux/apps.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\n" +
			"spec:\n  path: ./apps\n  sourceRef: {kind: GitRepository, name: flux-system}\n  postBuild: {substitute: {AGENT: substituted}}\n",
		"apps/hr.yaml": "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: agents, namespace: team}\n" +
			"spec:\n  chart:\n    spec: {chart: ./charts/agents, sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}}\n" +
			"  values: {name: '${AGENT}', secret: s, tier: t}\n",
		"charts/agents/Chart.yaml":       helmChart,
		"charts/agents/templates/c.yaml": helmConn,
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if helmObjects(t, docs)["Connection team/substituted"] == nil {
		t.Fatalf("Connection not rendered with the substituted value: %q %v", docIDs(docs), ds)
	}
}

// A parameter or inline value that does not merge is not quoted in the
// message that says so.
func TestHelmBadParameterNotQuoted(t *testing.T) {
	const canary = "ghp_CANARYparamCANARYparam0123456789"
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"chart/Chart.yaml":          helmChart,
		"chart/values.yaml":         "name: a\nsecret: s\n",
		"chart/templates/conn.yaml": helmConn,
		"app.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a, namespace: argocd}\n" +
			"spec:\n  destination: {namespace: x}\n  source:\n    path: chart\n    helm:\n      parameters: [{name: 'a[x]', value: " + canary + "}]\n",
	})
	_, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) == 0 {
		t.Fatal("no diagnostic for a parameter that does not parse")
	}
	for _, d := range ds {
		if strings.Contains(d.Message, canary) {
			t.Errorf("a message quotes the parameter's value: %s", d.Message)
		}
	}
}

// A value file Helm fetches or a plugin decrypts (helm-secrets'
// secrets://) is not read: the chart renders without it, with a
// warning. A value file that is not there is an error only where the
// chart holds something of keyhole's.
func TestHelmArgoValueFilesOutOfReach(t *testing.T) {
	app := func(name, path, files string) string {
		return "---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\n" +
			"spec:\n  destination: {namespace: x}\n  source:\n    repoURL: https://git.example.com/acme/apps.git\n    path: " + path + "\n    helm: {valueFiles: [" + files + "]}\n"
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"chart/Chart.yaml":          helmChart,
		"chart/values.yaml":         "name: a\nsecret: s\n",
		"chart/templates/conn.yaml": helmConn,
		"web/Chart.yaml":            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"web/templates/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
		"apps.yaml": app("agents", "chart", "'secrets+age-import:///keys/key.txt?values-secret.yaml'") +
			app("web", "web", "gone.yaml"),
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if helmObjects(t, docs)["Connection x/a"] == nil {
		t.Errorf("the chart was not rendered: %q", docIDs(docs))
	}
	var warned bool
	for _, d := range ds {
		switch {
		case d.Code == CodeHelmValuesUnread && strings.Contains(d.Message, "secrets+age-import"):
			warned = true
		case d.Code == CodeArgoCDUnrendered && strings.Contains(d.Message, "argocd/agents applies"):
			// its chart's Connection, applied as written
		case d.Severity.String() != "info":
			t.Errorf("unexpected %v", d)
		}
	}
	if !warned {
		t.Errorf("no warning for the encrypted value file: %v", ds)
	}
}

// Load given no Helm engine says so at each chart it would render, as a
// chart Helm cannot render: an embedding program's mistake is a
// diagnostic, not a panic, and nothing of the chart is taken as checked.
func TestHelmWithoutEngine(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"c/Chart.yaml":          helmChart,
		"c/values.yaml":         "name: a\nsecret: s\n",
		"c/templates/conn.yaml": helmConn,
	})
	docs, ds, err := Load([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 0 || len(ds) != 1 || ds[0].Code != CodeHelmRenderFailed || ds[0].Severity != diag.Error ||
		!strings.Contains(ds[0].Message, "without its Helm engine") {
		t.Errorf("got %q, %v", docIDs(docs), ds)
	}
}
