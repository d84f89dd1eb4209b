package source

import (
	"strings"
	"testing"
)

// TestArgoUnrenderedHelm: an Argo CD Application whose source is a Helm
// chart of this repository, rendered without keyhole's plugin, has Argo CD
// apply the keyhole inputs the render holds as written, as a kustomize
// source's build does: one ArgoCDUnrendered warning at the Application,
// also when the source is read at another revision (a tag). A chart whose
// render holds none of keyhole's inputs (its values leave them out) is
// not said unrendered.
func TestArgoUnrenderedHelm(t *testing.T) {
	app := func(path, rev, helm string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: agents, namespace: argocd}\n" +
			"spec:\n  project: default\n  source:\n    repoURL: https://git.example.com/acme/agents.git\n    targetRevision: " + rev + "\n    path: " + path + "\n" + helm +
			"  destination: {server: https://kubernetes.default.svc, namespace: agents}\n"
	}
	files := map[string]string{
		"chart/Chart.yaml":                "apiVersion: v2\nname: agents\nversion: 0.1.0\n",
		"chart/values.yaml":               "connections: true\n",
		"chart/templates/connection.yaml": "{{- if .Values.connections }}\n" + argoConn("gh") + "---\n" + argoConn("gl") + "{{- end }}\n",
		"chart/templates/secret.yaml":     "apiVersion: v1\nkind: Secret\nmetadata: {name: gh-token}\nstringData: {token: canary-helm-unrendered}\n",
		"plain/kustomization.yaml":        "resources: [connection.yaml]\n",
		"plain/connection.yaml":           argoConn("gh"),
	}
	const warned = "argo/app.yaml:1:1: warning ArgoCDUnrendered: Argo CD Application argocd/agents applies keyhole's inputs as written ("
	dir, r := gitRepo(t)
	writeFiles(t, dir, files)
	first := commitAll(t, r, "first")
	if _, err := r.CreateTag("v1.0.0", first, nil); err != nil {
		t.Fatal(err)
	}
	// HEAD moves past the tag, so a source at the tag is read at its
	// commit, not as checked out.
	writeFiles(t, dir, map[string]string{"README.md": "agents\n"})
	commitAll(t, r, "second")
	cases := map[string]struct {
		app  string
		want string // what the warning says the source applies; "" for no warning
	}{
		"a Helm source": {
			app:  app("chart", "HEAD", ""),
			want: "2 Connections",
		},
		"a Helm source with its values": {
			app:  app("chart", "HEAD", "    helm: {valuesObject: {connections: true}}\n"),
			want: "2 Connections",
		},
		"a Helm source at a tag": {
			app:  app("chart", "v1.0.0", ""),
			want: "2 Connections",
		},
		"a kustomize source at a tag": {
			app:  app("plain", "v1.0.0", ""),
			want: "Connection",
		},
		"a Helm source whose values leave the inputs out": {
			app: app("chart", "HEAD", "    helm: {valuesObject: {connections: false}}\n"),
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			writeFiles(t, dir, map[string]string{"argo/app.yaml": c.app})
			_, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			n := strings.Count(ds.Error(), "ArgoCDUnrendered")
			switch {
			case c.want == "" && n != 0:
				t.Errorf("said ArgoCDUnrendered of a source that applies none of keyhole's inputs:\n%s", ds)
			case c.want != "" && (n != 1 || !strings.Contains(ds.Error(), warned+c.want+"), not keyhole's render of them")):
				t.Errorf("want %q, once; said:\n%s", warned+c.want+")", ds)
			}
			if pinned := strings.Contains(c.app, "v1.0.0"); pinned != strings.Contains(ds.Error(), "info ArgoCDRevision: ") {
				t.Errorf("ArgoCDRevision said: %v, want %v:\n%s", !pinned, pinned, ds)
			}
			if strings.Contains(ds.Error(), "canary-helm-unrendered") {
				t.Errorf("a Secret's value is in a diagnostic:\n%s", ds)
			}
		})
	}
}
