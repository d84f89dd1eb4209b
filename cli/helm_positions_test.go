package cli

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/internal/testrepo"
)

// helmHelpers is the _helpers.tpl `helm create` writes, cut to its
// labels: an include that writes several lines.
const helmHelpers = `{{- define "web.labels" -}}
app.kubernetes.io/name: web
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}
`

// helmSecret declares the Secret the Connections read, holding the
// canary.
const helmSecret = `apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-api-token
  labels:
    {{- include "web.labels" . | nindent 4 }}
stringData:
  token: ` + canary + `
  email: ` + canary + `
`

// helmConnection is a Connection template as a chart `helm create` made
// writes it, its labels from the include; passwordKey and the value's
// reference name keys the Secret does not hold.
const helmConnection = `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: {{ .Release.Name }}-api
  labels:
    {{- include "web.labels" . | nindent 4 }}
spec:
  hosts: [api.example.com, jira.example.com]
  credential:
    kind: secret
    secretRef:
      name: {{ .Release.Name }}-api-token
  placement:
    inject:
      - hosts: [api.example.com]
        header: Authorization
        value: 'Bearer {{ "{{ .tokne }}" }}'
      - hosts: [jira.example.com]
        basic: {usernameKey: email, passwordKey: pasword}
`

var findingLine = regexp.MustCompile(`^(\S+:\d+:\d+): (error|warning) (\w+):`)

// TestHelmFindingPositions: what keyhole finds in an object a Helm chart
// renders is reported at the template's own line, whatever actions above
// it write (an include with nindent, a condition trimming the first
// line, a range block writing an object per pass, toYaml, tpl); at the
// column the rendered text has where the line reads as the template's,
// else at the action's. No Secret value is printed.
func TestHelmFindingPositions(t *testing.T) {
	chart := "apiVersion: v2\nname: web\nversion: 0.1.0\n"
	cases := map[string]struct {
		files map[string]string
		want  []string
		// summary, when set, is the last line of the output: each
		// object a range block writes is counted.
		summary string
	}{
		"below an include with nindent": {
			files: map[string]string{"chart/templates/connection.yaml": helmConnection},
			want: []string{
				"chart/templates/connection.yaml:17:27: error ConnectionSecretKeyMissing",
				"chart/templates/connection.yaml:19:50: error ConnectionSecretKeyMissing",
			},
		},
		"under a condition whose -}} joins the first line": {
			files: map[string]string{
				"chart/values.yaml":               "connectors: {enabled: true}\n",
				"chart/templates/connection.yaml": "{{- if .Values.connectors.enabled -}}\n" + helmConnection + "{{- end }}\n",
			},
			want: []string{
				"chart/templates/connection.yaml:18:27: error ConnectionSecretKeyMissing",
				"chart/templates/connection.yaml:20:50: error ConnectionSecretKeyMissing",
			},
		},
		"CRLF line breaks": {
			files: map[string]string{"chart/templates/connection.yaml": strings.ReplaceAll(helmConnection, "\n", "\r\n")},
			want: []string{
				"chart/templates/connection.yaml:17:27: error ConnectionSecretKeyMissing",
				"chart/templates/connection.yaml:19:50: error ConnectionSecretKeyMissing",
			},
		},
		"a range block, an object per pass": {
			files: map[string]string{
				"chart/values.yaml": "teams: [a, b]\n",
				"chart/templates/connection.yaml": "{{- range .Values.teams }}\n---\n" +
					strings.NewReplacer("{{ .Release.Name }}-api\n", "{{ . }}-api\n", "{{ .Release.Name }}", "{{ $.Release.Name }}", `include "web.labels" .`, `include "web.labels" $`).Replace(helmConnection) +
					"{{- end }}\n",
			},
			want: []string{
				"chart/templates/connection.yaml:19:27: error ConnectionSecretKeyMissing",
				"chart/templates/connection.yaml:19:27: error ConnectionSecretKeyMissing",
				"chart/templates/connection.yaml:21:50: error ConnectionSecretKeyMissing",
				"chart/templates/connection.yaml:21:50: error ConnectionSecretKeyMissing",
			},
			summary: "3 documents, 3 objects checked: 4 errors, 0 warnings, 0 info",
		},
		"a subchart's template, its own helpers": {
			files: map[string]string{
				"chart/charts/sub/Chart.yaml":                "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
				"chart/charts/sub/templates/_helpers.tpl":    helmHelpers,
				"chart/charts/sub/templates/connection.yaml": helmConnection,
				"chart/charts/sub/templates/secret.yaml":     helmSecret,
				"chart/templates/connection.yaml":            "{{- /* the subchart's */ -}}\n",
				"chart/templates/secret.yaml":                "{{- /* the subchart's */ -}}\n",
			},
			want: []string{
				"chart/charts/sub/templates/connection.yaml:17:27: error ConnectionSecretKeyMissing",
				"chart/charts/sub/templates/connection.yaml:19:50: error ConnectionSecretKeyMissing",
			},
		},
		"a key an action writes, toYaml and tpl above": {
			files: map[string]string{
				"chart/values.yaml": "annotations: {team: web, tier: '1', owner: me}\nkey: pasword\nextra: \"x: {{ .Release.Name }}\\n\"\n",
				"chart/templates/connection.yaml": `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: {{ .Release.Name }}-api
  {{- with .Values.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  labels:
{{ tpl .Values.extra . | indent 4 }}
spec:
  hosts: [jira.example.com]
  credential: {kind: secret, secretRef: {name: {{ .Release.Name }}-api-token}}
  placement:
    inject:
      - hosts: [jira.example.com]
        basic: {usernameKey: email, passwordKey: {{ .Values.key }}}
`,
			},
			want: []string{"chart/templates/connection.yaml:17:50: error ConnectionSecretKeyMissing"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{
				"chart/Chart.yaml":             chart,
				"chart/templates/_helpers.tpl": helmHelpers,
				"chart/templates/secret.yaml":  helmSecret,
			}
			for name, body := range c.files {
				files[name] = body
			}
			testrepo.WriteFiles(t, dir, files)
			t.Chdir(dir)
			var stdout, stderr bytes.Buffer
			Main([]string{"check", "."}, &stdout, &stderr)
			var got []string
			for _, l := range strings.Split(stdout.String(), "\n") {
				if m := findingLine.FindStringSubmatch(l); m != nil {
					got = append(got, m[1]+": "+m[2]+" "+m[3])
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("findings\n%s\nwant\n%s\noutput:\n%s%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"), stdout.String(), stderr.String())
			}
			if out := strings.TrimSpace(stdout.String()); c.summary != "" && !strings.HasSuffix(out, "\n"+c.summary) {
				t.Errorf("summary is not %q:\n%s", c.summary, out)
			}
			if strings.Contains(stdout.String()+stderr.String(), canary) {
				t.Errorf("a Secret's value printed:\n%s%s", stdout.String(), stderr.String())
			}
		})
	}
}
