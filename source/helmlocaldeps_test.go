package source

import (
	"strings"
	"testing"
)

// TestHelmLocalDependency: a chart whose Chart.yaml lists a library
// chart of the repository by its directory (file://) is rendered with
// it, as helm dependency build copies it into charts/: the Connection
// the library's template writes is read, in the Application's unit and
// namespace, and nothing is said missing. A file:// directory the
// repository does not hold stays a missing dependency.
func TestHelmLocalDependency(t *testing.T) {
	library := map[string]string{
		"charts/library/common/Chart.yaml":          "apiVersion: v2\nname: common\ntype: library\nversion: 1.0.0\n",
		"charts/library/common/templates/_conn.tpl": "{{- define \"common.connection\" -}}\n" + strings.Replace(connection, "  namespace: agents\n", "", 1) + "{{- end -}}\n",
	}
	chartYAML := "apiVersion: v2\nname: agents\nversion: 0.1.0\ndependencies:\n  - name: common\n    version: 1.0.0\n    repository: file://%s\n"
	app := map[string]string{
		"charts/agents/templates/connection.yaml": "{{ include \"common.connection\" . }}\n",
		"charts/agents/templates/secret.yaml":     "apiVersion: v1\nkind: Secret\nmetadata:\n  name: acme-github-token\nstringData:\n  token: placeholder-not-a-token\n",
		"argocd/agents.yaml":                      "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: agents\n  namespace: argocd\nspec:\n  project: default\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: agents\n  source:\n    repoURL: https://example.com/r.git\n    path: charts/agents\n",
	}
	tests := map[string]struct {
		dep     string
		library bool
		read    bool
	}{
		"the library beside it":            {dep: "../library/common", library: true, read: true},
		"a directory the repository lacks": {dep: "../library/gone", library: true},
		"outside the repository":           {dep: "../../../common", library: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"charts/agents/Chart.yaml": strings.Replace(chartYAML, "%s", tc.dep, 1)}
			for k, v := range app {
				files[k] = v
			}
			if tc.library {
				for k, v := range library {
					files[k] = v
				}
			}
			writeFiles(t, dir, files)
			docs, ds, err := testLoad([]string{"."}, Options{Dir: dir, MaxFileSize: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			var conn *Document
			for _, d := range docs {
				if d.Object().Kind == "Connection" {
					conn = d
				}
			}
			missing := false
			for _, d := range ds {
				if d.Code == CodeHelmDependencyMissing {
					missing = true
				}
			}
			if !tc.read {
				if conn != nil || !missing {
					t.Fatalf("want the dependency said missing and nothing of it read; got docs %v, diagnostics %v", docIDs(docs), ds)
				}
				return
			}
			if conn == nil || missing {
				t.Fatalf("want the library's Connection read and nothing missing; got docs %v, diagnostics %v", docIDs(docs), ds)
			}
			if u := conn.Unit(); u == nil || u.Name != "argocd:argocd/agents" || u.Namespace != "agents" {
				t.Errorf("Connection read in unit %+v; want argocd:argocd/agents, namespace agents", u)
			}
			if conn.File != "charts/agents/templates/connection.yaml" {
				t.Errorf("Connection read from %s; want the chart's template that writes it", conn.File)
			}
		})
	}
}
