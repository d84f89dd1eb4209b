package source

import (
	"strings"
	"testing"
)

// TestWalkedChartSecretNames: a chart a walk found that names none of
// keyhole's kinds is rendered only when a Connection may read a Secret
// it declares: one InputSkipped note when none of the names its
// templates give Secrets is in a file that names keyhole's kinds, and
// rendered (here warning of its missing dependency) when one is, or
// when a name cannot be told from the text.
func TestWalkedChartSecretNames(t *testing.T) {
	chart := "apiVersion: v2\nname: web\nversion: 0.1.0\ndependencies:\n  - name: app-template\n    version: 2.6.0\n    repository: https://example.com/charts\n"
	secret := func(name string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\n  namespace: {{ .Release.Namespace }}\nstringData:\n  password: x\n"
	}
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: default}\n" +
		"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
	cases := map[string]struct {
		secret   string
		rendered bool
		note     string
		// conn, when set, is a chart template holding the Connection,
		// in place of agents/conn.yaml.
		conn string
	}{
		"a Connection in a chart, its names plain": {secret: secret("web-admin"), conn: conn, note: "(web-admin)"},
		"a Connection in a chart, its Secret's name a value": {secret: secret("web-admin"), rendered: true,
			conn: strings.Replace(conn, "name: gh-token", "name: {{ .Values.secret }}", 1)},
		"a literal name no Connection reads":                      {secret: secret("web-admin"), note: "the names its templates give Secrets (web-admin) are in no file that names keyhole's kinds"},
		"a literal name a Connection reads":                       {secret: secret("gh-token"), rendered: true},
		"a templated name whose literal part no Connection holds": {secret: secret(`"{{ .Release.Name }}-admin" # the admin`), note: "(-admin)"},
		"a templated name whose literal part a Connection holds":  {secret: secret(`{{ .Release.Name }}-token`), rendered: true},
		"a name with no literal part":                             {secret: secret(`{{ include "web.fullname" . }}`), rendered: true},
		"a name a condition chooses":                              {secret: secret(`{{ if .Values.x }}a{{ else }}b{{ end }}`), rendered: true},
		"metadata a helper writes":                                {secret: "apiVersion: v1\nkind: Secret\nmetadata:\n  {{- include \"web.meta\" . | nindent 2 }}\n  name: web-admin\n", rendered: true},
		"a line a value fills whole":                              {secret: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: web-admin\n{{ .Values.more }}\n", rendered: true},
		"controls around the names":                               {secret: "{{- if .Values.on }}\napiVersion: v1\nkind: Secret\nmetadata:\n{{- if .Values.a }}\n  name: web-a\n{{- else }}\n  name: web-b\n{{- end }}\n{{- end }}\n", note: "(web-a, web-b)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"apps/web/Chart.yaml": chart, "apps/web/templates/secret.yaml": c.secret, "agents/conn.yaml": conn}
			if c.conn != "" {
				delete(files, "agents/conn.yaml")
				files["agents/Chart.yaml"] = "apiVersion: v2\nname: agents\nversion: 0.1.0\n"
				files["agents/templates/conn.yaml"] = c.conn
			}
			writeFiles(t, dir, files)
			_, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			all := ds.Error()
			if got := strings.Contains(all, CodeHelmDependencyMissing); got != c.rendered {
				t.Errorf("rendered = %v, want %v:\n%s", got, c.rendered, all)
			}
			if c.note != "" && !strings.Contains(all, "Helm chart not rendered: none of its files names keyhole's kinds, and the names its templates give Secrets") {
				t.Errorf("no note that the chart is not rendered:\n%s", all)
			}
			if !strings.Contains(all, c.note) {
				t.Errorf("no diagnostic says %q:\n%s", c.note, all)
			}
		})
	}
}
