package source

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
)

// connectionsAs is what each Connection of docs is to a test, as says
// it, sorted; a Connection it says "" of is left out.
func connectionsAs(docs []*Document, as func(d *Document, u *Unit) string) []string {
	var got []string
	for _, d := range docs {
		if d.Object().Kind == "Connection" {
			if s := as(d, d.Unit()); s != "" {
				got = append(got, s)
			}
		}
	}
	slices.Sort(got)
	return got
}

// connectionUnits is "UNIT NAMESPACE" of each Connection of docs, sorted.
func connectionUnits(docs []*Document) []string {
	return connectionsAs(docs, func(d *Document, u *Unit) string { return u.Name + " " + d.Object().Namespace })
}

// TestFluxApplied holds a Flux Kustomization that another's path holds to
// what that one's build writes of it (fluxapplied.go): each case gives
// the unit of the Connection in apps/agent, and what a check says.
func TestFluxApplied(t *testing.T) {
	ks := func(name, path, extra string) string {
		return "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: " + name + ", namespace: flux-system}\n" +
			"spec:\n  path: " + path + "\n  sourceRef: {kind: GitRepository, name: flux-system}\n" + extra
	}
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh}\n" +
		"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
	childPatch := "  patches:\n    - target: {group: kustomize.toolkit.fluxcd.io, kind: Kustomization}\n      patch: |\n" +
		"        apiVersion: kustomize.toolkit.fluxcd.io/v1\n        kind: Kustomization\n        metadata: {name: _}\n        spec: {targetNamespace: patched}\n"
	cases := map[string]struct {
		parent, listing, child string
		extra                  map[string]string
		wantUnit, wantNS       string // the Connection's unit and namespace
		wantDiag               string // in some diagnostic, when set
	}{
		"as written: the parent changes nothing": {
			parent: ks("apps", "./apps", ""), child: ks("agent", "./apps/agent/app", "  targetNamespace: written\n"),
			wantUnit: "flux:flux-system/agent", wantNS: "written",
		},
		"the parent's spec.patches give every child a targetNamespace": {
			parent: ks("apps", "./apps", childPatch), child: ks("agent", "./apps/agent/app", ""),
			wantUnit: "flux:flux-system/agent", wantNS: "patched",
		},
		"the parent's substitution writes the child's path": {
			parent:   ks("apps", "./apps", "  postBuild:\n    substitute: {CLUSTER: prod}\n"),
			child:    ks("agent", "./apps/agent/${CLUSTER}", ""),
			extra:    map[string]string{"apps/agent/prod/conn.yaml": conn},
			wantUnit: "flux:flux-system/agent", wantNS: "",
		},
		"the parent's targetNamespace moves the child": {
			parent: ks("apps", "./apps", "  targetNamespace: team\n"),
			child: "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: agent, namespace: flux-system}\n" +
				"spec:\n  path: ./apps/agent/app\n  sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}\n",
			wantUnit: "flux:team/agent", wantNS: "",
		},
		"a patch of the kustomization listing the child": {
			parent: ks("apps", "./apps", ""),
			listing: "resources: [agent/ks.yaml]\npatches:\n  - target: {kind: Kustomization, name: agent}\n    patch: |\n" +
				"      - op: add\n        path: /spec/targetNamespace\n        value: listed\n",
			child:    ks("agent", "./apps/agent/app", ""),
			wantUnit: "flux:flux-system/agent", wantNS: "listed",
		},
		"a child the parent's kustomization does not list is not applied: no unit, a note": {
			parent: ks("apps", "./apps", childPatch), listing: "resources: []\n",
			child:    ks("agent", "./apps/agent/app", "  targetNamespace: written\n"),
			wantDiag: "apps/agent/ks.yaml:2:1: info InputSkipped: Flux Kustomization flux-system/agent lies under the path of Flux Kustomization flux-system/apps, whose kustomization does not list its file: Flux does not apply it, so it is no deploy unit",
		},
		"a parent that cannot be built leaves the child as written, and its build says why": {
			parent: ks("apps", "./apps", childPatch), listing: "resources: [agent/ks.yaml, gone.yaml]\n",
			child:    ks("agent", "./apps/agent/app", "  targetNamespace: written\n"),
			wantUnit: "flux:flux-system/agent", wantNS: "written",
			wantDiag: "apps/kustomization.yaml:1:28: error KustomizeBuildFailed: kustomize cannot build apps",
		},
		"a parent that holds nothing of keyhole's and cannot be built says the child is read as written": {
			parent: ks("apps", "./apps", childPatch), listing: "resources: [agent/ks.yaml, gone.yaml]\n",
			child:    ks("agent", "./agent-app", "  targetNamespace: written\n"),
			extra:    map[string]string{"agent-app/c.yaml": conn, "apps/agent/app/c.yaml": ""},
			wantUnit: "flux:flux-system/agent", wantNS: "written",
			wantDiag: "flux/parent.yaml:2:1: warning KustomizeBuildFailed: Flux Kustomization flux-system/apps cannot be built (",
		},
		"two levels: the grandparent's substitution reaches the parent, whose patch reaches the child": {
			parent: ks("root", "./clusters", "  postBuild:\n    substitute: {APPS: apps}\n"),
			extra: map[string]string{
				"clusters/apps.yaml": ks("apps", "./${APPS}", childPatch),
			},
			child:    ks("agent", "./apps/agent/app", ""),
			wantUnit: "flux:flux-system/agent", wantNS: "patched",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir, _ := gitRepo(t)
			files := map[string]string{
				"flux/parent.yaml":      c.parent,
				"apps/agent/ks.yaml":    c.child,
				"apps/agent/app/c.yaml": conn,
			}
			if strings.Contains(c.parent, "./clusters") {
				files["clusters/kustomization.yaml"] = "resources: [apps.yaml]\n"
			}
			files["apps/kustomization.yaml"] = cmp.Or(c.listing, "resources: [agent/ks.yaml]\n")
			for k, v := range c.extra {
				files[k] = v
			}
			writeFiles(t, dir, files)
			docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			got := connectionUnits(docs)
			if c.wantUnit == "" && len(got) > 0 {
				t.Errorf("Connection read in %q, want none\n%s", got, ds)
			}
			if want := c.wantUnit + " " + c.wantNS; c.wantUnit != "" && !slices.Equal(got, []string{want}) {
				t.Errorf("Connection read in %q, want [%s]\n%s", got, want, ds)
			}
			if c.wantDiag != "" && !strings.Contains(ds.Error(), c.wantDiag) {
				t.Errorf("no diagnostic says %q:\n%s", c.wantDiag, ds)
			}
			for _, d := range ds {
				if d.Severity == diag.Error && !strings.Contains(d.String(), c.wantDiag) {
					t.Errorf("unexpected error: %s", d)
				}
			}
		})
	}
}

// TestEngineUnitComponents: a component an engine adds to a unit's path
// can hold what the path does not; the unit is built for it, in its own
// namespace, not skipped as holding nothing of keyhole's.
func TestEngineUnitComponents(t *testing.T) {
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh}\n" +
		"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
	files := map[string]string{
		"flux/ks.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: a, namespace: flux-system}\n" +
			"spec:\n  path: ./apps/a\n  sourceRef: {kind: GitRepository, name: flux-system}\n  targetNamespace: fluxns\n  components: [../../components/agent]\n",
		"argo/app.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: b, namespace: argocd}\n" +
			"spec:\n  destination: {namespace: argons}\n  source:\n    repoURL: https://git.example.com/acme/apps.git\n    path: apps/b\n    kustomize: {namespace: argons, components: [../../components/agent]}\n",
		"apps/a/kustomization.yaml":           "resources: [cm.yaml]\n",
		"apps/a/cm.yaml":                      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
		"apps/b/kustomization.yaml":           "resources: [cm.yaml]\n",
		"apps/b/cm.yaml":                      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
		"components/agent/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [conn.yaml]\n",
		"components/agent/conn.yaml":          conn,
	}
	dir, _ := gitRepo(t)
	writeFiles(t, dir, files)
	docs, ds, err := testLoad([]string{"flux", "argo", "apps"}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := connectionUnits(docs)
	if want := []string{"argocd:argocd/b argons", "flux:flux-system/a fluxns"}; !slices.Equal(got, want) {
		t.Errorf("Connections read in %q, want %q\n%s", got, want, ds.Error())
	}
}

// TestFluxOwnSource: a repository that syncs itself through a
// GitRepository of another name than flux-system (its Kustomization
// applies the directory declaring it) is read as that source; a
// GitRepository of another repository stays out of reach.
func TestFluxOwnSource(t *testing.T) {
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh}\n" +
		"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
	ks := func(name, path, source string) string {
		return "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: " + name + ", namespace: flux-system}\n" +
			"spec:\n  path: " + path + "\n  sourceRef: {kind: GitRepository, name: " + source + "}\n"
	}
	repo := func(name string) string {
		return "---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: " + name + ", namespace: flux-system}\n" +
			"spec: {url: 'https://git.example.com/" + name + ".git', interval: 1h}\n"
	}
	dir, _ := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"kubernetes/flux/config/cluster.yaml": repo("home-kubernetes") + ks("cluster", "./kubernetes/flux", "home-kubernetes"),
		"kubernetes/flux/apps.yaml":           ks("apps", "./kubernetes/apps", "home-kubernetes") + repo("tenants") + ks("tenant", "./kubernetes/tenant", "tenants"),
		"kubernetes/apps/c.yaml":              conn,
		"kubernetes/tenant/c.yaml":            conn,
		// A tenant's sync, as Flux's multi-tenancy example writes it:
		// its Kustomization, with no path, applies the root of the
		// tenant's own branch, which holds this file here too.
		"tenants/dev-team/sync.yaml": "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: dev-team, namespace: apps}\n" +
			"spec: {url: 'https://git.example.com/home.git', ref: {branch: dev-team}}\n---\n" +
			"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: dev-team, namespace: apps}\n" +
			"spec: {sourceRef: {kind: GitRepository, name: dev-team}}\n",
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := connectionUnits(docs)
	if want := []string{" ", "flux:flux-system/apps "}; !slices.Equal(got, want) {
		t.Errorf("Connections read in %q, want %q\n%s", got, want, ds.Error())
	}
	// No cluster's Kustomization applies the tenant's sync: it is not
	// a unit, whatever its source.
	if want := "info InputSkipped: Flux Kustomization apps/dev-team is applied by no cluster's entry"; !strings.Contains(ds.Error(), want) {
		t.Errorf("no diagnostic says %q:\n%s", want, ds.Error())
	}
	if want := "warning FluxSourceUnmapped: Flux Kustomization flux-system/tenant builds from GitRepository flux-system/tenants, another repository (https://git.example.com/tenants.git) than this one (flux-system/flux-system, as Flux's bootstrap names it, or flux-system/home-kubernetes, which a Kustomization applying the file declaring it builds from)"; !strings.Contains(ds.Error(), want) {
		t.Errorf("no diagnostic says %q:\n%s", want, ds.Error())
	}
}

// TestFluxAppliedFromBase: Flux objects declared in a base that each
// cluster's overlay lists from outside its path (a fleet repository's
// clusters/NAME listing ../../base, a hub's per-cluster patches of one
// HelmRelease) reach each cluster as that overlay's build writes them:
// one deploy unit per cluster, each read with its own patches, in its
// own cluster.
func TestFluxAppliedFromBase(t *testing.T) {
	ks := func(name, path, extra string) string {
		return "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: " + name + ", namespace: flux-system}\n" +
			"spec:\n  path: " + path + "\n  sourceRef: {kind: GitRepository, name: flux-system}\n" + extra
	}
	conn := func(host string) string {
		return "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh}\n" +
			"spec:\n  hosts: [" + host + "]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
	}
	overlay := func(cluster, patch string) string {
		return "resources: [flux-system, ../../base/apps.yaml, agents.yaml]\npatches:\n  - target: {kind: Kustomization, name: apps}\n    patch: |\n" +
			"      - {op: replace, path: /spec/path, value: ./apps/" + cluster + "}\n" + patch
	}
	agents := func(cluster, values string) string {
		return "resources: [../../../deploy/agents]\npatches:\n  - target: {kind: HelmRelease, name: agent}\n    patch: |\n" +
			"      - {op: replace, path: /spec/values, value: " + values + "}\n"
	}
	dir, _ := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"clusters/prod/flux-system/kustomization.yaml":    "resources: [sync.yaml]\n",
		"clusters/prod/flux-system/sync.yaml":             ks("flux-system", "./clusters/prod", ""),
		"clusters/prod/kustomization.yaml":                overlay("prod", ""),
		"clusters/prod/agents.yaml":                       ks("agents", "./clusters/prod/agents", ""),
		"clusters/prod/agents/kustomization.yaml":         agents("prod", "{name: prod-gh, secret: s, tier: t}"),
		"clusters/staging/flux-system/kustomization.yaml": "resources: [sync.yaml]\n",
		"clusters/staging/flux-system/sync.yaml":          ks("flux-system", "./clusters/staging", ""),
		"clusters/staging/kustomization.yaml":             overlay("staging", "      - {op: add, path: /spec/targetNamespace, value: stg}\n"),
		"clusters/staging/agents.yaml":                    ks("agents", "./clusters/staging/agents", ""),
		"clusters/staging/agents/kustomization.yaml":      agents("staging", "{name: staging-gh, secret: s, tier: t}"),
		"base/apps.yaml":                                  ks("apps", "./apps/base", ""),
		"apps/base/c.yaml":                                conn("base.example.com"),
		"apps/prod/c.yaml":                                conn("prod.example.com"),
		"apps/staging/c.yaml":                             conn("staging.example.com"),
		"deploy/agents/kustomization.yaml":                "resources: [release.yaml]\n",
		"deploy/agents/release.yaml": "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: agent, namespace: team}\n" +
			"spec:\n  chart:\n    spec: {chart: ./charts/agents, sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}}\n" +
			"  values: {name: as-written, secret: s, tier: t}\n",
		"charts/agents/Chart.yaml":       helmChart,
		"charts/agents/templates/c.yaml": helmConn,
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := connectionsAs(docs, func(d *Document, u *Unit) string {
		o := d.Object()
		return u.Name + " " + u.Cluster + " " + o.Namespace + "/" + o.Name + " " + stringList(Lookup(Lookup(d.Node, "spec"), "hosts"))[0]
	})
	want := []string{
		// No cluster applies apps/base: its files are loose files.
		"  /gh base.example.com",
		"flux:flux-system/apps@clusters/prod flux clusters/prod /gh prod.example.com",
		"flux:flux-system/apps@clusters/staging flux clusters/staging stg/gh staging.example.com",
		"helmrelease:team/agent@clusters/prod/agents flux clusters/prod team/prod-gh api.github.com",
		"helmrelease:team/agent@clusters/staging/agents flux clusters/staging team/staging-gh api.github.com",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Connections read as\n%s\nwant\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), ds)
	}
	for _, d := range ds {
		if d.Severity == diag.Error {
			t.Errorf("unexpected error: %s", d)
		}
	}
}

// TestFluxPathUnrestricted builds the directory a Flux Kustomization names
// as its path as kustomize-controller builds it, load restrictions off,
// when that Kustomization is out of reach (its source is one keyhole.yaml
// does not map) and no Flux unit is read: an overlay listing a file of
// ../../base builds.
func TestFluxPathUnrestricted(t *testing.T) {
	ks := func(name, path string) string {
		return "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: " + name + ", namespace: flux-system}\n" +
			"spec:\n  interval: 1h\n  path: " + path + "\n  prune: true\n  sourceRef: {kind: OCIRepository, name: manifests}\n"
	}
	dir, _ := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"clusters/c1/apps.yaml":              ks("apps", "./apps/overlay/c1"),
		"apps/overlay/c1/kustomization.yaml": "resources: [../../base, ../../base/agents/ks.yaml]\n",
		"apps/base/kustomization.yaml":       "resources: [namespace.yaml, conn.yaml]\n",
		"apps/base/namespace.yaml":           "apiVersion: v1\nkind: Namespace\nmetadata: {name: agents}\n",
		"apps/base/agents/ks.yaml":           ks("agents", "./apps/base/agents/app"),
		"apps/base/conn.yaml":                "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh, namespace: agents}\nspec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n",
	})
	_, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ds.Error(), "security") || strings.Contains(ds.Error(), "KustomizeBuildFailed") {
		t.Errorf("the overlay a Flux Kustomization names is built with load restrictions on:\n%s", ds)
	}
	if !strings.Contains(ds.Error(), "OCIRepository") {
		t.Errorf("no diagnostic says the Kustomizations are out of reach:\n%s", ds)
	}
	if testing.Verbose() {
		t.Log(ds)
	}
}

// TestFluxRenderedPath reads a Flux Kustomization applying the directory
// keyhole render writes as keyhole's output, not an input: absent before
// the first render (keyhole.yaml's flux.rendered names it) or holding
// render's marker, it is a note, never KustomizeBuildFailed.
func TestFluxRenderedPath(t *testing.T) {
	ks := "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: agents, namespace: flux-system}\n" +
		"spec:\n  path: ./rendered\n  prune: true\n  sourceRef: {kind: GitRepository, name: agents-config}\n"
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh, namespace: agents}\n" +
		"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
	cfg := "apiVersion: keyhole.dev/v1alpha1\nkind: Config\nflux:\n  sources:\n    - {kind: GitRepository, name: agents-config, path: .}\n"
	cases := map[string]map[string]string{
		"named in keyhole.yaml, not yet rendered": {"keyhole.yaml": cfg + "  rendered: [rendered]\n"},
		"holding render's marker":                 {"keyhole.yaml": cfg, "rendered/.keyhole-render": "keyhole render output\n", "rendered/kustomization.yaml": "resources: []\n"},
	}
	for name, extra := range cases {
		t.Run(name, func(t *testing.T) {
			dir, _ := gitRepo(t)
			files := map[string]string{"flux/agents.yaml": ks, "agents/connection.yaml": conn}
			for k, v := range extra {
				files[k] = v
			}
			writeFiles(t, dir, files)
			docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if d.Severity != diag.Info {
					t.Errorf("unexpected diagnostic: %s", d)
				}
			}
			if want := "flux/agents.yaml:5:9: info InputSkipped: Flux Kustomization flux-system/agents applies ./rendered, the directory `keyhole render` writes"; !strings.Contains(ds.Error(), want) {
				t.Errorf("no diagnostic says %q:\n%s", want, ds)
			}
			if got := connectionUnits(docs); len(got) != 1 {
				t.Errorf("Connections read: %q, want the one of agents/", got)
			}
		})
	}
}

// TestFluxRenderedCluster reads the loose files, the inputs keyhole
// render writes into the directory a cluster's Flux Kustomization
// applies, as deploying to that cluster: the Secrets another Flux unit
// of that cluster deploys are theirs, and those of another cluster are
// not.
func TestFluxRenderedCluster(t *testing.T) {
	ks := func(name, path string) string {
		return "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: " + name + ", namespace: flux-system}\n" +
			"spec:\n  path: " + path + "\n  prune: true\n  sourceRef: {kind: GitRepository, name: flux-system}\n"
	}
	secret := "apiVersion: v1\nkind: Secret\nmetadata: {name: gh-token, namespace: agents}\nstringData: {token: canary-3f9a}\n"
	dir, _ := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"keyhole.yaml":                      "apiVersion: keyhole.dev/v1alpha1\nkind: Config\nflux:\n  rendered: [rendered]\n",
		"clusters/prod/flux-system.yaml":    ks("flux-system", "./clusters/prod"),
		"clusters/prod/agents.yaml":         ks("agents", "./rendered"),
		"clusters/prod/secrets.yaml":        ks("secrets", "./secrets/prod"),
		"clusters/staging/flux-system.yaml": ks("flux-system", "./clusters/staging"),
		"clusters/staging/secrets.yaml":     ks("secrets", "./secrets/staging"),
		"secrets/prod/secret.yaml":          secret,
		"secrets/staging/secret.yaml":       secret,
		"agents/connection.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh, namespace: agents}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n",
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		if d.Object().Kind == "Secret" {
			got = append(got, d.File+" "+cmp.Or(d.Unit().Cluster, "(the loose files' cluster)"))
		}
	}
	slices.Sort(got)
	want := []string{"secrets/prod/secret.yaml (the loose files' cluster)", "secrets/staging/secret.yaml flux clusters/staging"}
	if !slices.Equal(got, want) {
		t.Errorf("the Secrets deploy to %q, want %q\n%s", got, want, ds)
	}
}

// TestFluxSubstituteFromCluster: clusters a and b each declare a
// cluster-info ConfigMap beside the Kustomization that substitutes from
// it, and nothing else of Flux's applies either file (a FluxInstance
// syncs each cluster's directory). Cluster b's apps read b's
// CLUSTER, so the child's path ./apps/${CLUSTER}/agent is b's, where the
// Connection is.
func TestFluxSubstituteFromCluster(t *testing.T) {
	dir, _ := gitRepo(t)
	files := map[string]string{
		"apps/b/kustomization.yaml": "resources: [agent.yaml]\n",
		"apps/a/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\ndata: {a: b}\n",
		"apps/b/agent.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: agent, namespace: flux-system}\n" +
			"spec:\n  path: ./apps/${CLUSTER}/agent\n  sourceRef: {kind: GitRepository, name: flux-system}\n",
		"apps/b/agent/c.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh, namespace: agents}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n",
	}
	for _, c := range []string{"a", "b"} {
		files["clusters/"+c+"/apps.yaml"] = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\n" +
			"spec:\n  path: ./apps/" + c + "\n  sourceRef: {kind: GitRepository, name: flux-system}\n" +
			"  postBuild:\n    substituteFrom: [{kind: ConfigMap, name: cluster-info}]\n"
		files["clusters/"+c+"/cluster-info.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cluster-info, namespace: flux-system}\ndata: {CLUSTER: " + c + "}\n"
	}
	writeFiles(t, dir, files)
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Severity == diag.Error {
			t.Errorf("unexpected error: %s", d)
		}
	}
	if got, want := connectionUnits(docs), []string{"flux:flux-system/agent agents"}; !slices.Equal(got, want) {
		t.Errorf("Connection read in %q, want %q\n%s", got, want, ds)
	}
}

// Load given no Flux engine says so at each Flux unit it would build, as
// a Kustomization Flux cannot generate: an embedding program's mistake is
// a diagnostic, not a panic, and nothing of the unit is taken as checked.
func TestFluxWithoutEngine(t *testing.T) {
	dir, _ := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"clusters/c1/agents.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: agents, namespace: flux-system}\n" +
			"spec:\n  path: ./apps/agents\n  sourceRef: {kind: GitRepository, name: flux-system}\n",
		"apps/agents/conn.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh, namespace: agents}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n",
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := connectionUnits(docs), []string{"flux:flux-system/agents agents"}; !slices.Equal(got, want) {
		t.Fatalf("with the engines: Connection read in %q, want %q\n%s", got, want, ds)
	}
	docs, ds, err = Load([]string{"."}, Options{Dir: dir, Engines: Engines{Helm: testEngines.Helm}})
	if err != nil {
		t.Fatal(err)
	}
	if len(connectionUnits(docs)) != 0 || len(ds) != 1 || ds[0].Code != CodeKustomizeBuildFailed || ds[0].Severity != diag.Error ||
		!strings.Contains(ds[0].Message, "without its Flux engine") {
		t.Errorf("got %q, %v", connectionUnits(docs), ds)
	}
}
