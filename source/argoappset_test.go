package source

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"

	"keyhole.dev/keyhole/diag"
)

// argoCase is a repository of Argo CD objects, what keyhole reads of it
// and what it says.
type argoCase struct {
	files map[string]string
	// want is "UNIT NAMESPACE NAME" of each Connection read, sorted.
	want []string
	// wantDiag are substrings of diagnostics that must be said; any
	// other error fails the case.
	wantDiag []string
	// noDiag are substrings no diagnostic may hold.
	noDiag []string
	// ignoreLoose leaves the Connections of the loose files out.
	ignoreLoose bool
}

func (c argoCase) run(t *testing.T) {
	t.Helper()
	dir, _ := gitRepo(t)
	writeFiles(t, dir, c.files)
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := connectionsAs(docs, func(d *Document, u *Unit) string {
		name := u.Name
		if u.Loose() {
			if c.ignoreLoose {
				return ""
			}
			name = "(loose)"
		}
		return name + " " + cmp.Or(d.Object().Namespace, u.Namespace) + " " + d.Object().Name
	})
	if !slices.Equal(got, c.want) {
		t.Errorf("Connections read as %q, want %q\n%s", got, c.want, ds)
	}
	all := ds.Error()
	for _, w := range c.wantDiag {
		if !strings.Contains(all, w) {
			t.Errorf("no diagnostic says %q:\n%s", w, ds)
		}
	}
	for _, w := range c.noDiag {
		if strings.Contains(all, w) {
			t.Errorf("a diagnostic says %q:\n%s", w, ds)
		}
	}
	for _, d := range ds {
		if d.Severity == diag.Error && !slices.ContainsFunc(c.wantDiag, func(w string) bool { return strings.Contains(d.String(), w) }) {
			t.Errorf("unexpected error: %s", d)
		}
	}
}

// argoConn is a Connection named name.
func argoConn(name string) string {
	return "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: " + name + "}\n" +
		"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
}

// appSet is an ApplicationSet named name with the spec lines spec (its
// generators, template, ...), indented by two.
func appSet(name, spec string) string {
	return "---\napiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: " + name + ", namespace: argocd}\nspec:\n" + spec
}

// envFiles is a Connection in envs/ENV for each env.
func envFiles(envs ...string) map[string]string {
	fs := map[string]string{}
	for _, e := range envs {
		fs["envs/"+e+"/conn.yaml"] = argoConn("gh-" + e)
	}
	return fs
}

// dirTemplate is an ApplicationSet template of a directory Application
// named name at path, deploying to ns.
func dirTemplate(name, path, ns string) string {
	return "  template:\n    metadata: {name: '" + name + "'}\n    spec:\n      project: default\n" +
		"      source: {repoURL: 'https://git.example.com/r.git', path: '" + path + "'}\n" +
		"      destination: {name: in-cluster, namespace: '" + ns + "'}\n"
}

func withFiles(base map[string]string, more map[string]string) map[string]string {
	fs := maps.Clone(base)
	maps.Copy(fs, more)
	return fs
}

// TestAppSetGoTemplateFuncs: a goTemplate ApplicationSet's template calls
// the functions the controller gives it (Sprig's, and Argo CD's own);
// a missing key is an error only with missingkey=error; a function the
// controller removes does not parse; one whose value changes on every
// run is not evaluated, and said.
func TestAppSetGoTemplateFuncs(t *testing.T) {
	list := "  goTemplate: true\n  generators:\n    - list: {elements: [{env: dev}, {env: Prod, team: core}]}\n"
	cases := map[string]argoCase{
		"Sprig's and Argo CD's functions": {
			files: withFiles(envFiles("dev", "prod"), map[string]string{"argo/set.yaml": appSet("s", list+
				dirTemplate(`a-{{ default "all" .team }}-{{ .env | normalize }}`, `envs/{{ lower .env }}`, `{{ printf "%s-%s" .env "ns" | slugify }}`))}),
			want: []string{"argocd:argocd/a-all-dev dev-ns gh-dev", "argocd:argocd/a-core-prod prod-ns gh-prod"},
		},
		"toYaml and fromYaml": {
			files: withFiles(envFiles("dev", "prod"), map[string]string{"argo/set.yaml": appSet("s", list+
				dirTemplate(`y-{{ (fromYaml (toYaml .)).env | lower }}`, `envs/{{ lower .env }}`, `agents`))}),
			want: []string{"argocd:argocd/y-dev agents gh-dev", "argocd:argocd/y-prod agents gh-prod"},
		},
		"a missing key without missingkey=error": {
			files: withFiles(envFiles("dev", "prod"), map[string]string{"argo/set.yaml": appSet("s", list+
				dirTemplate(`m-{{ lower .env }}`, `envs/{{ lower .env }}`, `t{{ if .team }}-{{ .team }}{{ end }}`))}),
			want: []string{"argocd:argocd/m-dev t gh-dev", "argocd:argocd/m-prod t-core gh-prod"},
		},
		"a missing key with missingkey=error": {
			ignoreLoose: true,
			files: withFiles(envFiles("dev", "prod"), map[string]string{"argo/set.yaml": appSet("s", "  goTemplateOptions: [missingkey=error]\n"+list+
				dirTemplate(`m-{{ .team }}`, `envs/{{ lower .env }}`, `agents`))}),
			wantDiag: []string{`error KustomizeBuildFailed: Argo CD ApplicationSet argocd/s: its template cannot be filled for {env=dev}`, `map has no entry for key "team"`},
		},
		"a function the controller removes": {
			ignoreLoose: true,
			files: withFiles(envFiles("dev"), map[string]string{"argo/set.yaml": appSet("s", list+
				dirTemplate(`e-{{ env "HOME" }}`, `envs/dev`, `agents`))}),
			wantDiag: []string{`function "env" not defined`},
		},
		"a function whose value changes on every run": {
			ignoreLoose: true,
			files: withFiles(envFiles("dev"), map[string]string{"argo/set.yaml": appSet("s", list+
				dirTemplate(`r-{{ randAlpha 5 | lower }}`, `envs/dev`, `agents`))}),
			wantDiag: []string{"warning ArgoCDUnread: Argo CD ApplicationSet argocd/s: its template calls randAlpha, whose value differs on every run"},
		},
		"an option Go templates do not have": {
			ignoreLoose: true,
			files: withFiles(envFiles("dev"), map[string]string{"argo/set.yaml": appSet("s", "  goTemplateOptions: [missingkey=maybe]\n"+list+
				dirTemplate(`o-{{ .env }}`, `envs/dev`, `agents`))}),
			wantDiag: []string{`goTemplateOptions holds "missingkey=maybe"`},
		},
	}
	for name, c := range cases {
		t.Run(name, c.run)
	}
}

// TestAppSetTemplatePatch: an ApplicationSet's templatePatch, filled with
// each parameter set, is merged into its Application: the sources it
// sets (a chart with a value file of another source) are what is
// rendered, into the namespace it sets; spec.project stays the
// template's.
func TestAppSetTemplatePatch(t *testing.T) {
	chart := map[string]string{
		"charts/agent/Chart.yaml":  "apiVersion: v2\nname: agent\nversion: 0.1.0\n",
		"charts/agent/values.yaml": "name: gh-default\n",
		"charts/agent/templates/conn.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: '{{ .Values.name }}', namespace: '{{ .Release.Namespace }}'}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n",
		"envs/dev/values.yaml":  "name: gh-dev\n",
		"envs/prod/values.yaml": "name: gh-prod\n",
	}
	set := func(goTemplate, env, patch string) string {
		return appSet("p", "  goTemplate: "+goTemplate+"\n  generators:\n    - list: {elements: [{env: dev}, {env: prod}]}\n"+
			"  template:\n    metadata: {name: 'agent-"+env+"'}\n    spec:\n      project: default\n"+
			"      source: {repoURL: 'https://git.example.com/r.git', path: charts/agent}\n"+
			"      destination: {name: in-cluster, namespace: default}\n"+
			"  templatePatch: |\n"+patch)
	}
	patch := func(env string) string {
		return "    spec:\n      project: other\n      sources:\n        - repoURL: https://git.example.com/r.git\n          path: charts/agent\n" +
			"          helm: {valueFiles: ['$values/envs/" + env + "/values.yaml']}\n" +
			"        - {repoURL: 'https://git.example.com/r.git', ref: values}\n" +
			"      destination: {namespace: 'agents-" + env + "'}\n"
	}
	cases := map[string]argoCase{
		"goTemplate": {
			files: withFiles(chart, map[string]string{"argo/set.yaml": set("true", "{{ .env }}", patch("{{ .env }}"))}),
			want:  []string{"argocd:argocd/agent-dev#1 agents-dev gh-dev", "argocd:argocd/agent-prod#1 agents-prod gh-prod"},
		},
		"fasttemplate": {
			files: withFiles(chart, map[string]string{"argo/set.yaml": set("false", "{{env}}", patch("{{env}}"))}),
			want:  []string{"argocd:argocd/agent-dev#1 agents-dev gh-dev", "argocd:argocd/agent-prod#1 agents-prod gh-prod"},
		},
		"a patch inside the template's valuesObject": {
			files: withFiles(chart, map[string]string{"argo/set.yaml": strings.Replace(set("true", "{{ .env }}", "    spec:\n      source:\n        helm:\n          valuesObject: {name: 'gh-{{ .env }}'}\n"),
				"path: charts/agent}", "path: charts/agent, helm: {valuesObject: {name: x}}}", 1)}),
			wantDiag: []string{"its templatePatch sets fields inside a valuesObject the template already has, which the controller cannot patch"},
			want:     []string{"charts/agent default gh-default"}, // Argo CD deploys none of it
		},
		"a patch that is not YAML": {
			files:    withFiles(chart, map[string]string{"argo/set.yaml": set("true", "{{ .env }}", "    spec: [\n")}),
			wantDiag: []string{"its templatePatch, filled, is not YAML"},
			want:     []string{"charts/agent default gh-default"}, // Argo CD deploys none of it
		},
	}
	for name, c := range cases {
		t.Run(name, c.run)
	}
}

// TestAppSetSelector: a generator's selector keeps the parameter sets
// whose flattened parameters it matches.
func TestAppSetSelector(t *testing.T) {
	files := envFiles("dev", "prod", "test")
	cases := map[string]argoCase{
		"matchLabels, fasttemplate": {
			files: withFiles(files, map[string]string{"argo/set.yaml": appSet("s",
				"  generators:\n    - list: {elements: [{env: dev, tier: low}, {env: prod, tier: high}, {env: test, tier: low}]}\n      selector: {matchLabels: {tier: low}}\n"+
					dirTemplate("s-{{env}}", "envs/{{env}}", "agents"))}),
			want: []string{"(loose)  gh-prod", "argocd:argocd/s-dev agents gh-dev", "argocd:argocd/s-test agents gh-test"},
		},
		"matchExpressions over nested parameters, goTemplate": {
			files: withFiles(files, map[string]string{"argo/set.yaml": appSet("s",
				"  goTemplate: true\n  generators:\n    - git:\n        repoURL: 'https://git.example.com/r.git'\n        directories: [{path: 'envs/*'}]\n"+
					"      selector:\n        matchExpressions:\n          - {key: path.basename, operator: NotIn, values: [prod]}\n          - {key: path.segments.0, operator: In, values: [envs]}\n"+
					dirTemplate("s-{{.path.basename}}", "{{.path.path}}", "agents"))}),
			want: []string{"(loose)  gh-prod", "argocd:argocd/s-dev agents gh-dev", "argocd:argocd/s-test agents gh-test"},
		},
		"an operator selectors do not have": {
			ignoreLoose: true,
			files: withFiles(files, map[string]string{"argo/set.yaml": appSet("s",
				"  generators:\n    - list: {elements: [{env: dev}]}\n      selector: {matchExpressions: [{key: env, operator: Gt, values: ['1']}]}\n"+
					dirTemplate("s-{{env}}", "envs/{{env}}", "agents"))}),
			wantDiag: []string{`its selector's operator "Gt" is not In, NotIn, Exists or DoesNotExist`},
		},
	}
	for name, c := range cases {
		t.Run(name, c.run)
	}
}

// TestAppSetClusters: a clusters generator makes one Application per
// cluster Secret the repository declares that its selector matches, and
// one for the local cluster when it selects all and no Secret is the
// local one's; where the Secrets are made in a way keyhole does not
// read, or its selector matches none declared, it says so once and
// reads none of its files as anything else.
func TestAppSetClusters(t *testing.T) {
	secret := func(name, server, env string) string {
		return "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\n  namespace: argocd\n  labels: {argocd.argoproj.io/secret-type: cluster, env: " + env + "}\n" +
			"type: Opaque\nstringData:\n  name: " + name + "\n  server: " + server + "\n"
	}
	external := "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: prod, namespace: argocd}\n" +
		"spec:\n  target:\n    template:\n      metadata:\n        labels:\n          argocd.argoproj.io/secret-type: cluster\n"
	set := func(gen string) string {
		return appSet("c", "  goTemplate: true\n  generators:\n    - clusters: "+gen+"\n"+
			"  template:\n    metadata: {name: 'agents-{{.name}}'}\n    spec:\n      project: default\n"+
			"      source: {repoURL: 'https://git.example.com/r.git', path: 'envs/{{.name}}'}\n"+
			"      destination: {server: '{{.server}}', namespace: 'agents-{{ with .metadata }}{{ .labels.env }}{{ else }}local{{ end }}'}\n")
	}
	files := envFiles("prod", "staging", "in-cluster")
	cases := map[string]argoCase{
		"a selector over the declared Secrets": {
			files: withFiles(files, map[string]string{
				"argo/clusters.yaml": secret("prod", "https://prod.example.com", "prod") + secret("staging", "https://staging.example.com", "staging"),
				"argo/set.yaml":      set("{selector: {matchLabels: {env: prod}}}"),
			}),
			want: []string{"(loose)  gh-in-cluster", "(loose)  gh-staging", "argocd:argocd/agents-prod agents-prod gh-prod"},
		},
		"a selector naming the cluster label": {
			files: withFiles(files, map[string]string{
				"argo/clusters.yaml": secret("prod", "https://prod.example.com", "prod"),
				"argo/set.yaml":      set("{selector: {matchLabels: {argocd.argoproj.io/secret-type: cluster, env: prod}}}"),
			}),
			want: []string{"(loose)  gh-in-cluster", "(loose)  gh-staging", "argocd:argocd/agents-prod agents-prod gh-prod"},
		},
		"every cluster, and the local one": {
			files: withFiles(files, map[string]string{
				"argo/clusters.yaml": secret("prod", "https://prod.example.com", "prod") + secret("staging", "https://staging.example.com", "staging"),
				"argo/set.yaml":      set("{}"),
			}),
			want: []string{"argocd:argocd/agents-in-cluster agents-local gh-in-cluster", "argocd:argocd/agents-prod agents-prod gh-prod", "argocd:argocd/agents-staging agents-staging gh-staging"},
		},
		"a Secret for the local cluster replaces it": {
			files: withFiles(files, map[string]string{
				"argo/clusters.yaml": secret("prod", "https://kubernetes.default.svc", "prod"),
				"argo/set.yaml":      set("{}"),
			}),
			want: []string{"(loose)  gh-in-cluster", "(loose)  gh-staging", "argocd:argocd/agents-prod agents-prod gh-prod"},
		},
		"a selector no declared Secret matches": {
			files:    withFiles(files, map[string]string{"argo/set.yaml": set("{selector: {matchLabels: {env: prod}}}")}),
			wantDiag: []string{"warning ArgoCDUnread: Argo CD ApplicationSet argocd/c: its clusters generator's selector matches none of the cluster Secrets the repository declares"},
			// envs/* is the ApplicationSet's to deploy: not loose files.
			want: nil,
		},
		"unknown clusters, for a chart of a chart repository": {
			files: withFiles(files, map[string]string{"argo/set.yaml": strings.Replace(set("{selector: {matchLabels: {env: prod}}}"),
				"path: 'envs/{{.name}}'", "chart: agent", 1)}),
			wantDiag: []string{"info InputSkipped: Argo CD ApplicationSet argocd/c: its clusters generator's selector matches none", "its Applications build from a chart repository or a plugin, out of reach in any case"},
			want:     []string{"(loose)  gh-in-cluster", "(loose)  gh-prod", "(loose)  gh-staging"},
			noDiag:   []string{"warning"},
		},
		"unknown clusters, of directories holding nothing of keyhole's": {
			files: map[string]string{"argo/set.yaml": set("{selector: {matchLabels: {env: prod}}}"),
				"envs/prod/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "other/conn.yaml": argoConn("other")},
			want:     []string{"(loose)  other"},
			wantDiag: []string{"info InputSkipped: Argo CD ApplicationSet argocd/c: its clusters generator's selector matches none", "nothing in the directories its template builds names keyhole's kinds"},
			noDiag:   []string{"warning"},
		},
		"cluster Secrets made by an ExternalSecret": {
			files:    withFiles(files, map[string]string{"argo/external.yaml": external, "argo/set.yaml": set("{}")}),
			wantDiag: []string{"warning ArgoCDUnread: Argo CD ApplicationSet argocd/c: its clusters generator reads the cluster Secrets Argo CD holds, and the ExternalSecret argocd/prod makes one whose values keyhole does not read"},
			// envs/* is the ApplicationSet's to deploy: not loose files.
			want: nil,
		},
	}
	for name, c := range cases {
		t.Run(name, c.run)
	}
}

// TestArgoTypos: a path Argo CD fails on, in the repository the other
// Applications build from, is an error; a git generator path that
// matches nothing there is a warning naming it; in a repository no
// source builds from, both stay notes.
func TestArgoTypos(t *testing.T) {
	app := func(name, repo, path string) string {
		return "---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\n" +
			"spec:\n  project: default\n  source: {repoURL: '" + repo + "', path: " + path + "}\n  destination: {name: in-cluster, namespace: agents}\n"
	}
	gitSet := func(repo, pattern string) string {
		return appSet("g", "  generators:\n    - git: {repoURL: '"+repo+"', revision: HEAD, directories: [{path: '"+pattern+"'}]}\n"+
			dirTemplate("g-{{path.basename}}", "{{path}}", "agents"))
	}
	files := envFiles("dev")
	cases := map[string]argoCase{
		"a path that is not there": {
			files:    withFiles(files, map[string]string{"argo/apps.yaml": app("dev", "https://git.example.com/r.git", "envs/dev") + app("prod", "git@git.example.com:r.git", "envs/prd")}),
			want:     []string{"argocd:argocd/dev agents gh-dev"},
			wantDiag: []string{"argo/apps.yaml:15:11: error KustomizeBuildFailed: Argo CD Application argocd/prod builds envs/prd from git@git.example.com:r.git, this repository"},
		},
		"a path of another repository": {
			files:    withFiles(files, map[string]string{"argo/apps.yaml": app("dev", "https://git.example.com/r.git", "envs/dev") + app("prod", "https://git.example.com/other.git", "envs/prd")}),
			want:     []string{"argocd:argocd/dev agents gh-dev"},
			wantDiag: []string{"info InputSkipped: Argo CD Application argocd/prod builds envs/prd from https://git.example.com/other.git, which is not a directory of this repository"},
		},
		"a path an app of apps' chart names with its defaults": {
			files: withFiles(files, map[string]string{"argo/apps.yaml": app("dev", "https://git.example.com/r.git", "envs/dev"),
				"apps/Chart.yaml":         "apiVersion: v2\nname: apps\nversion: 0.1.0\n",
				"apps/values.yaml":        "env: changeme\n",
				"apps/templates/app.yaml": app("chart-app", "https://git.example.com/r.git", "envs/{{ .Values.env }}")}),
			want:     []string{"argocd:argocd/dev agents gh-dev"},
			wantDiag: []string{"info InputSkipped: Argo CD Application argocd/chart-app builds envs/changeme from https://git.example.com/r.git, which is not a directory of this repository"},
		},
		"a git generator path that matches nothing": {
			files: withFiles(files, map[string]string{"argo/apps.yaml": app("dev", "https://git.example.com/r.git", "envs/dev"),
				"argo/set.yaml": gitSet("https://git.example.com/r.git", "envz/*")}),
			want:     []string{"argocd:argocd/dev agents gh-dev"},
			wantDiag: []string{"warning GeneratorMatchesNothing: Argo CD ApplicationSet argocd/g: its git generator's path envz/* matches nothing in this repository, the one its repoURL https://git.example.com/r.git names"},
		},
		"a git generator path of another repository": {
			files: withFiles(files, map[string]string{"argo/apps.yaml": app("dev", "https://git.example.com/r.git", "envs/dev"),
				"argo/set.yaml": gitSet("https://git.example.com/other.git", "envz/*")}),
			want:     []string{"argocd:argocd/dev agents gh-dev"},
			wantDiag: []string{"info InputSkipped: Argo CD ApplicationSet argocd/g: its git generator's path envz/* matches nothing in this repository, so it makes no Application here"},
			noDiag:   []string{"warning GeneratorMatchesNothing"},
		},
	}
	for name, c := range cases {
		t.Run(name, c.run)
	}
}

// TestArgoDirectoryShallow: a directory Application that does not
// recurse deploys the files at the top of its path only: a
// kustomization below it is read on its own (here no Application
// deploys it), not said to be left out of the directory's; one that
// recurses deploys the files below.
func TestArgoDirectoryShallow(t *testing.T) {
	root := func(directory string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: root, namespace: argocd}\n" +
			"spec:\n  project: default\n  source: {repoURL: 'https://git.example.com/r.git', path: apps" + directory + "}\n  destination: {name: in-cluster, namespace: agents}\n"
	}
	cases := map[string]argoCase{
		"not recursing": {
			files: map[string]string{
				"argo/root.yaml":                root(""),
				"apps/conn.yaml":                argoConn("top"),
				"apps/agent/kustomization.yaml": "resources: [conn.yaml]\n",
				"apps/agent/conn.yaml":          argoConn("below"),
			},
			want:   []string{"apps/agent  below", "argocd:argocd/root agents top"},
			noDiag: []string{"InputNotDeployed"},
		},
		"recursing": {
			files: map[string]string{
				"argo/root.yaml":       root(", directory: {recurse: true}"),
				"apps/conn.yaml":       argoConn("top"),
				"apps/agent/conn.yaml": argoConn("below"),
			},
			want: []string{"argocd:argocd/root agents below", "argocd:argocd/root agents top"},
		},
	}
	for name, c := range cases {
		t.Run(name, c.run)
	}
}

// TestArgoRevisionPinned: an Application pinned to a tag, a commit or a
// branch the commit checked out does not hold is read at that commit,
// from git; HEAD, the branch checked out, and a branch the commit checked
// out holds are the working tree; a revision the repository does not
// hold is said once, and nothing is read for it, not even the working
// tree's files under its path.
func TestArgoRevisionPinned(t *testing.T) {
	app := func(url, rev string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: agent, namespace: argocd}\n" +
			"spec:\n  project: default\n  source: {repoURL: '" + url + "', path: envs/dev, targetRevision: '" + rev + "'}\n  destination: {name: in-cluster, namespace: agents}\n"
	}
	dir, r := gitRepo(t)
	if _, err := r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{"git@git.example.com:r.git"}}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, envFiles("dev"))
	first := commitAll(t, r, "first")
	if _, err := r.CreateTag("v1.0.0", first, nil); err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	// hotfix: a branch made from the first commit, which the one
	// checked out does not hold; release: the first commit, which it
	// holds.
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("hotfix"), Hash: first, Create: true}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"envs/dev/hotfix.yaml": argoConn("hotfix")})
	hotfix := commitAll(t, r, "hotfix")
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.Master}); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]plumbing.Hash{"refs/heads/release": first, "refs/remotes/origin/fix": hotfix} {
		if err := r.Storer.SetReference(plumbing.NewHashReference(plumbing.ReferenceName(name), h)); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, dir, map[string]string{"envs/dev/more.yaml": argoConn("more")})
	head := commitAll(t, r, "second")
	if _, err := r.CreateTag("v1.1.0", head, nil); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"envs/dev/wip.yaml": argoConn("wip")})
	tree := "gh-dev more wip"
	// own is this repository's URL, as its remote names it; a branch of
	// another is read as checked out, a tag or commit from git.
	own, other := "https://git.example.com/r", "https://git.example.com/fork.git"
	for _, c := range []struct{ url, rev, read, said string }{
		{own, "HEAD", tree, ""},
		{own, "master", tree, ""},
		{own, "release", tree, ""},
		{own, "v1.1.0", tree, ""},
		{own, head.String()[:10], tree, ""},
		{own, "v1.0.0", "gh-dev", "info ArgoCDRevision: Argo CD Application argocd/agent builds its path at targetRevision v1.0.0 (commit " + first.String()[:12] + "): keyhole reads it there"},
		{own, first.String(), "gh-dev", "info ArgoCDRevision"},
		{own, "hotfix", "gh-dev hotfix", "info ArgoCDRevision: Argo CD Application argocd/agent builds its path at targetRevision hotfix (commit " + hotfix.String()[:12] + ")"},
		{own, "fix", "gh-dev hotfix", "info ArgoCDRevision"},
		{own, "v2.0.0", "", "warning ArgoCDRevision: Argo CD Application argocd/agent builds its path at targetRevision v2.0.0, other than the one keyhole reads, and no tag, branch or commit of the repository is v2.0.0; fetch the tags (git fetch --tags"},
		{own, "1.*", "", "warning ArgoCDRevision: Argo CD Application argocd/agent builds its path at targetRevision 1.*, other than the one keyhole reads, and a semver range"},
		{own, "main", "", "warning ArgoCDRevision: Argo CD Application argocd/agent builds its path at targetRevision main, other than the one keyhole reads, and the repository holds no tag or branch main (local, or remote-tracking); fetch it (git fetch origin main"},
		{other, "hotfix", tree, ""},
		{other, "v1.0.0", "gh-dev", "info ArgoCDRevision"},
	} {
		t.Run(c.url+"@"+c.rev, func(t *testing.T) {
			assertPinRead(t, dir, "argo/app.yaml", app(c.url, c.rev), "ArgoCDRevision", c.read, c.said)
		})
	}
}

// TestAppSetWithoutEngine: Load given no Argo CD engine says so at each
// ApplicationSet, as an error: an embedding program's mistake is a
// diagnostic, not a panic, and no Application of it is taken as checked.
func TestAppSetWithoutEngine(t *testing.T) {
	files := withFiles(envFiles("dev"), map[string]string{"argo/set.yaml": appSet("s",
		"  generators:\n    - list: {elements: [{env: dev}]}\n"+dirTemplate("s-{{env}}", "envs/{{env}}", "agents"))})
	argoCase{files: files, want: []string{"argocd:argocd/s-dev agents gh-dev"}}.run(t)
	dir, _ := gitRepo(t)
	writeFiles(t, dir, files)
	docs, ds, err := Load([]string{"."}, Options{Dir: dir, Engines: Engines{Helm: testEngines.Helm, Flux: testEngines.Flux}})
	if err != nil {
		t.Fatal(err)
	}
	var errs diag.List
	for _, d := range ds {
		if d.Severity == diag.Error {
			errs = append(errs, d)
		}
	}
	if got := connectionUnits(docs); slices.Contains(got, "argocd:argocd/s-dev agents") || len(errs) != 1 ||
		errs[0].Pos.File != "argo/set.yaml" || errs[0].Pos.Line != 7 ||
		!strings.Contains(errs[0].Message, "Argo CD ApplicationSet argocd/s: keyhole was built without its Argo CD engine") {
		t.Errorf("got %q,\n%v", got, ds)
	}
}
