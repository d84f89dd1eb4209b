package source

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
)

// TestAppSetGenerators: an ApplicationSet's list and matrix generators
// make the Applications the controller makes (each checked as its own
// unit, in its destination namespace); what the controller refuses is an
// error, and what keyhole cannot read from the repository is said.
func TestAppSetGenerators(t *testing.T) {
	appset := func(name, goTemplate, gens, path, ns string) string {
		return "---\napiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: " + name + ", namespace: argocd}\n" +
			"spec:\n  goTemplate: " + goTemplate + "\n  generators:\n" + gens +
			"  template:\n    metadata: {name: '" + name + "-{{" + path + "}}'}\n" +
			"    spec:\n      source: {repoURL: 'https://git.example.com/r.git', path: 'envs/{{" + path + "}}'}\n" +
			"      destination: {name: in-cluster, namespace: '" + ns + "'}\n"
	}
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh}\n" +
		"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
	cases := map[string]struct {
		appsets  string
		files    map[string]string // more files of the repository
		all      bool              // check the whole repository, not argo/ alone
		want     []string          // "UNIT NAMESPACE" of each Connection
		wantDiag string
	}{
		"a list, values as strings": {
			appsets: appset("l", "false", "    - list:\n        elements:\n          - {env: dev, values: {team: a}}\n          - {env: prod, values: {team: b}}\n", "env", "{{values.team}}"),
			want:    []string{"argocd:argocd/l-dev a", "argocd:argocd/l-prod b"},
		},
		"a list with goTemplate, and elementsYaml": {
			appsets: appset("g", "true", "    - list:\n        elements: [{env: dev, team: {name: a}}]\n        elementsYaml: '[{env: prod, team: {name: b}}]'\n", ".env", "{{.team.name}}"),
			want:    []string{"argocd:argocd/g-dev a", "argocd:argocd/g-prod b"},
		},
		"a matrix of git directories and a list that names them": {
			appsets: appset("m", "false", "    - matrix:\n        generators:\n          - git: {repoURL: 'https://git.example.com/r.git', directories: [{path: 'envs/*'}]}\n"+
				"          - list: {elements: [{ns: 'ns-{{path.basename}}'}]}\n", "path.basename", "{{ns}}"),
			want: []string{"argocd:argocd/m-dev ns-dev", "argocd:argocd/m-prod ns-prod"},
		},
		"generator values filled with its parameters": {
			appsets: appset("v", "false", "    - git:\n        repoURL: 'https://git.example.com/r.git'\n        directories: [{path: 'envs/dev'}]\n        values: {ns: 'team-{{path.basename}}'}\n", "path.basename", "{{values.ns}}"),
			want:    []string{"argocd:argocd/v-dev team-dev"},
		},
		"a list value that is not a string, without goTemplate": {
			appsets:  appset("n", "false", "    - list: {elements: [{env: dev, replicas: 2}]}\n", "env", "x"),
			wantDiag: "error KustomizeBuildFailed: Argo CD ApplicationSet argocd/n: its list generator's replicas is not a string, which the controller refuses without goTemplate",
		},
		"a matrix of one generator": {
			appsets:  appset("o", "false", "    - matrix: {generators: [{list: {elements: [{env: dev}]}}]}\n", "env", "x"),
			wantDiag: "error KustomizeBuildFailed: Argo CD ApplicationSet argocd/o: a matrix generator must have exactly two generators",
		},
		"a matrix whose generators give one key two values": {
			appsets:  appset("k", "false", "    - matrix: {generators: [{list: {elements: [{env: dev}]}}, {list: {elements: [{env: prod}]}}]}\n", "env", "x"),
			wantDiag: "its matrix's generators both give env, with two values (dev and prod)",
		},
		"a matrix of two long lists": {
			appsets:  appset("p", "false", "    - matrix: {generators: [{list: {elementsYaml: '"+longList("a", 200)+"'}}, {list: {elementsYaml: '"+longList("b", 200)+"'}}]}\n", "a", "x"),
			wantDiag: "its matrix makes more than 10000 Applications, more than keyhole reads of one generator",
		},
		// The directories envs/* its template deploys hold a Connection:
		// not knowing its Applications is a warning naming them.
		"a generator that reads a service": {
			all:      true,
			appsets:  appset("c", "false", "    - scmProvider: {}\n", "name", "x"),
			wantDiag: "warning ArgoCDUnread: Argo CD ApplicationSet argocd/c: only git, list, clusters and matrix generators are read, not the scmProvider generator, which lists an SCM provider's repositories, so which Applications it makes is not known; its Applications are not checked (check the directories its template deploys that hold keyhole's kinds on their own, keyhole check envs/dev envs/prod, to have them checked)",
		},
		"a pull request generator": {
			all:      true,
			appsets:  appset("r", "true", "    - pullRequest: {github: {owner: example, repo: r}}\n", ".number", "x"),
			wantDiag: "warning ArgoCDUnread: Argo CD ApplicationSet argocd/r: only git, list, clusters and matrix generators are read, not the pullRequest generator, which lists a service's pull requests",
		},
		// The repository declares no cluster Secret: the local cluster
		// is keyhole's guess, and its Application's missing path no
		// mistake it can show.
		"a clusters generator's assumed local cluster, whose path is missing": {
			appsets:  appset("a", "false", "    - list: {elements: [{name: dev}]}\n    - clusters: {}\n", "name", "x"),
			want:     []string{"argocd:argocd/a-dev x"},
			wantDiag: "info InputSkipped: Argo CD Application argocd/a-in-cluster builds envs/in-cluster from https://git.example.com/r.git, which is not a directory of this repository; out of reach, skipped (made for the local cluster, which keyhole takes its clusters generator to give as the repository declares no cluster Secret)",
		},
		"a merge generator": {
			all:      true,
			appsets:  appset("g", "false", "    - merge: {mergeKeys: [env], generators: [{list: {elements: [{env: dev}]}}, {list: {elements: [{env: dev}]}}]}\n", "env", "x"),
			wantDiag: "warning ArgoCDUnread: Argo CD ApplicationSet argocd/g: only git, list, clusters and matrix generators are read, not the merge generator, so which Applications it makes is not known",
		},
		"a matrix inside a matrix": {
			all:      true,
			appsets:  appset("i", "false", "    - matrix: {generators: [{matrix: {generators: [{list: {elements: [{env: dev}]}}, {list: {elements: [{a: b}]}}]}}, {list: {elements: [{b: c}]}}]}\n", "env", "x"),
			wantDiag: "warning ArgoCDUnread: Argo CD ApplicationSet argocd/i: a matrix inside a matrix is not read by keyhole",
		},
		"a generator's own template": {
			all:      true,
			appsets:  appset("t", "false", "    - list: {elements: [{env: dev}], template: {metadata: {}}}\n", "env", "x"),
			wantDiag: "warning ArgoCDUnread: Argo CD ApplicationSet argocd/t: a generator's own template is not applied by keyhole",
		},
		// The directories other/* hold nothing of keyhole's: not knowing
		// the Applications is said once, as an info.
		"a generator that reads a service, deploying nothing of keyhole's": {
			all:      true,
			appsets:  strings.ReplaceAll(appset("c", "false", "    - scmProvider: {}\n", "name", "x"), "envs/", "other/"),
			files:    map[string]string{"other/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"},
			want:     []string{" ", " "}, // envs/*, not deployed by it, read as loose files
			wantDiag: "info InputSkipped: Argo CD ApplicationSet argocd/c: only git, list, clusters and matrix generators are read, not the scmProvider generator, which lists an SCM provider's repositories, so which Applications it makes is not known; nothing in the directories its template builds names keyhole's kinds or declares a Secret",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir, _ := gitRepo(t)
			writeFiles(t, dir, map[string]string{
				"argo/appsets.yaml":   c.appsets,
				"envs/dev/conn.yaml":  conn,
				"envs/prod/conn.yaml": conn,
			})
			writeFiles(t, dir, c.files)
			paths := []string{"argo"}
			if c.all {
				paths = []string{"."}
			}
			docs, ds, err := testLoad(paths, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			// A directory Application's objects take its destination
			// namespace when they are compiled.
			got := connectionsAs(docs, func(_ *Document, u *Unit) string { return u.Name + " " + u.Namespace })
			if !slices.Equal(got, c.want) {
				t.Errorf("Connections read in %q, want %q\n%s", got, c.want, ds)
			}
			if c.wantDiag != "" && !strings.Contains(ds.Error(), c.wantDiag) {
				t.Errorf("no diagnostic says %q:\n%s", c.wantDiag, ds)
			}
			for _, d := range ds {
				if d.Severity == diag.Error && (c.wantDiag == "" || !strings.Contains(d.String(), c.wantDiag)) {
					t.Errorf("unexpected error: %s", d)
				}
			}
		})
	}
}

// TestArgoAppNamed: a message about an Application names it and its
// path, also when the object leaves them out.
func TestArgoAppNamed(t *testing.T) {
	app := func(meta, source string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: " + meta + "\n" +
			"spec:\n  source: " + source + "\n  destination: {name: in-cluster, namespace: team}\n"
	}
	cases := map[string]struct{ app, want string }{
		"no name": {
			app:  app("{namespace: argocd}", "{repoURL: 'https://git.example.com/r.git', path: envs, helm: {}}"),
			want: "argo/app.yaml:3:11: error KustomizeBuildFailed: an Argo CD Application in the namespace argocd has no metadata.name: the API server refuses it",
		},
		"Helm at the root, which holds no chart": {
			app:  app("{name: root}", "{repoURL: 'https://git.example.com/r.git', helm: {}}"),
			want: "argo/app.yaml:5:11: error HelmRenderFailed: Argo CD Application argocd/root renders the repository's root with Helm, but it holds no Chart.yaml: Argo CD cannot render it",
		},
		"the root of another repository": {
			app:  app("{name: other}", "{repoURL: 'https://git.example.com/other.git', path: ., helm: {}}"),
			want: "Argo CD Application argocd/other renders the repository's root with Helm",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir, _ := gitRepo(t)
			writeFiles(t, dir, map[string]string{"argo/app.yaml": c.app})
			_, ds, err := testLoad([]string{"argo"}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(ds.Error(), c.want) {
				t.Errorf("no diagnostic says %q:\n%s", c.want, ds)
			}
			if strings.Contains(ds.Error(), "argocd/ ") || strings.Contains(ds.Error(), "  ") {
				t.Errorf("a message leaves a name or path out:\n%s", ds)
			}
		})
	}
}

// longList is elementsYaml of n elements, each giving key a distinct value.
func longList(key string, n int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		fmt.Fprintf(&b, "{%s: v%d},", key, i)
	}
	return b.String() + "]"
}

// TestArgoApplied: an app of apps whose overlays rename and patch the
// Applications of one base: each overlay's Application is read as its
// build writes it (its name, path and destination), one unit for each,
// and what is wrong in it is said at the base file declaring it.
func TestArgoApplied(t *testing.T) {
	root := func(name, path, opts string) string {
		return "---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\n" +
			"spec:\n  destination: {name: in-cluster, namespace: argocd}\n  source:\n    repoURL: 'https://git.example.com/r.git'\n    path: " + path + "\n" + opts
	}
	overlay := func(prefix, path string) string {
		return "resources: [../../base]\nnamePrefix: " + prefix + "-\npatches:\n  - target: {kind: Application, name: agent}\n    patch: |\n" +
			"      - {op: replace, path: /spec/source/path, value: " + path + "}\n      - {op: replace, path: /spec/destination/namespace, value: agents-" + prefix + "}\n"
	}
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh}\n" +
		"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
	dir, _ := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"argo/root.yaml": root("apps-prod", "apps/overlays/prod", "") + root("apps-staging", "apps/overlays/staging", "") +
			root("apps-dev", "apps/base", "    kustomize: {namePrefix: dev-}\n"),
		"apps/base/kustomization.yaml": "resources: [app.yaml]\n",
		"apps/base/app.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: agent, namespace: argocd}\n" +
			"spec:\n  destination: {name: in-cluster, namespace: agents}\n  source:\n    repoURL: 'https://git.example.com/r.git'\n    path: agents/base\n",
		"apps/overlays/prod/kustomization.yaml":    overlay("prod", "agents/prod"),
		"apps/overlays/staging/kustomization.yaml": overlay("staging", "agents/gone"),
		"agents/base/conn.yaml":                    conn,
		"agents/prod/conn.yaml":                    conn,
	})
	docs, ds, err := testLoad([]string{"argo", "apps", "agents"}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := connectionsAs(docs, func(d *Document, u *Unit) string { return u.Name + " " + u.Namespace + " " + d.File })
	want := []string{
		"argocd:argocd/dev-agent agents agents/base/conn.yaml",
		"argocd:argocd/prod-agent agents-prod agents/prod/conn.yaml",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Connections read as %q, want %q\n%s", got, want, ds)
	}
	// staging's patch names a path that is not there, in the repository
	// the others build from: Argo CD fails on it, said at the base's
	// source, once.
	if want := `apps/base/app.yaml:7:5: error KustomizeBuildFailed: Argo CD Application argocd/staging-agent builds agents/gone from https://git.example.com/r.git, this repository`; !strings.Contains(ds.Error(), want) {
		t.Errorf("no diagnostic says %q:\n%s", want, ds)
	}
}

// TestArgoAppOfAppsChartValues: an app of apps written as a Helm chart
// declares the Applications its templates write with the values of the
// Application rendering it, one set for each such Application; with its
// defaults when no Application renders it.
func TestArgoAppOfAppsChartValues(t *testing.T) {
	root := func(name, helm string) string {
		return "---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\n" +
			"spec:\n  destination: {name: in-cluster, namespace: argocd}\n  source:\n    repoURL: 'https://git.example.com/r.git'\n    path: apps\n    helm: " + helm + "\n"
	}
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh}\n" +
		"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
	files := map[string]string{
		"apps/Chart.yaml":       "apiVersion: v2\nname: apps\nversion: 0.1.0\n",
		"apps/values.yaml":      "env: dev\n",
		"apps/values-prod.yaml": "env: prod\n",
		"apps/templates/app.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: 'agent-{{ .Values.env }}', namespace: argocd}\n" +
			"spec:\n  destination: {name: in-cluster, namespace: 'agents-{{ .Values.env }}'}\n  source: {repoURL: 'https://git.example.com/r.git', path: 'agents/{{ .Values.env }}'}\n",
		"agents/dev/conn.yaml":     conn,
		"agents/prod/conn.yaml":    conn,
		"agents/staging/conn.yaml": conn,
	}
	for name, c := range map[string]struct {
		roots string
		want  []string
	}{
		"no Application renders it: its defaults": {
			want: []string{"argocd:argocd/agent-dev agents-dev"},
		},
		"rendered with a value file": {
			roots: root("root", "{valueFiles: [values-prod.yaml]}"),
			want:  []string{"argocd:argocd/agent-prod agents-prod"},
		},
		"rendered by two Applications, each with its values": {
			roots: root("root", "{valueFiles: [values-prod.yaml]}") + root("root-staging", "{valuesObject: {env: staging}}"),
			want:  []string{"argocd:argocd/agent-prod agents-prod", "argocd:argocd/agent-staging agents-staging"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, _ := gitRepo(t)
			fs := maps.Clone(files)
			if c.roots != "" {
				fs["argo/root.yaml"] = c.roots
			}
			writeFiles(t, dir, fs)
			docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			got := connectionsAs(docs, func(_ *Document, u *Unit) string {
				if u.Loose() {
					return "" // an environment no Application deploys
				}
				return u.Name + " " + u.Namespace
			})
			if !slices.Equal(got, c.want) {
				t.Errorf("Connections read in %q, want %q\n%s", got, c.want, ds)
			}
		})
	}
}

// TestArgoRenderedPath reads an Argo CD Application applying a deploy
// unit's directory of a committed render as keyhole's output: absent
// before the first render (keyhole.yaml's argocd.rendered names its
// parent) or under render's marker, it is a note, never
// KustomizeBuildFailed. With argocd.rendered, the unit render writes
// there is placed by its directory relative to keyhole.yaml's, wherever
// keyhole runs, and always under it (DirFixed).
func TestArgoRenderedPath(t *testing.T) {
	app := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: agents-prod, namespace: argocd}\n" +
		"spec:\n  source: {repoURL: https://git.example.com/agents.git, path: rendered/apps/prod}\n  destination: {server: https://kubernetes.default.svc, namespace: agents-prod}\n"
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh, namespace: agents-prod}\n" +
		"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
	cases := map[string]struct {
		extra   map[string]string
		fixed   bool
		wantDir string
	}{
		"named in keyhole.yaml, not yet rendered": {
			extra:   map[string]string{"keyhole.yaml": "apiVersion: keyhole.dev/v1alpha1\nkind: Config\nargocd:\n  rendered: [rendered]\n"},
			fixed:   true,
			wantDir: "apps/prod",
		},
		"under render's marker": {
			extra: map[string]string{"rendered/.keyhole-render": "keyhole render output\n",
				"rendered/apps/prod/kustomization.yaml": "resources: []\n"},
			wantDir: "prod", // relative to where keyhole runs
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir, _ := gitRepo(t)
			files := map[string]string{"argocd/agents.yaml": app, "apps/prod/kustomization.yaml": "resources: [connection.yaml]\n", "apps/prod/connection.yaml": conn}
			maps.Copy(files, tc.extra)
			writeFiles(t, dir, files)
			docs, ds, err := testLoad([]string{".."}, Options{Dir: filepath.Join(dir, "apps")})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if d.Severity != diag.Info {
					t.Errorf("unexpected diagnostic: %s", d)
				}
			}
			if want := "info InputSkipped: Argo CD Application argocd/agents-prod applies rendered/apps/prod, in "; !strings.Contains(ds.Error(), want) {
				t.Errorf("no diagnostic says %q:\n%s", want, ds)
			}
			var got []string
			for _, d := range docs {
				if d.Object().Kind == "Connection" {
					got = append(got, fmt.Sprintf("%s %v", d.Unit().Dir, d.Unit().DirFixed))
				}
			}
			if want := []string{fmt.Sprintf("%s %v", tc.wantDir, tc.fixed)}; !slices.Equal(got, want) {
				t.Errorf("the Connection's unit is written to %q, want %q", got, want)
			}
		})
	}
}
