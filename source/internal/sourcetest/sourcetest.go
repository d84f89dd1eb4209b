// Package sourcetest holds the Helm chart the tests of source and of
// source/helm both render: a Connection template and a Chart.yaml, as a
// team's chart writes them. It imports none of keyhole's packages, so any
// test under source/ may use it without a cycle.
package sourcetest

// HelmConn is a Connection template whose name, namespace and Secret
// come from the chart's values and release, as a team's chart writes it.
const HelmConn = `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: {{ .Values.name }}
  namespace: {{ .Release.Namespace }}
  labels: {release: {{ .Release.Name }}, tier: {{ .Values.tier | quote }}}
spec:
  hosts: [api.github.com]
  credential: {kind: secret, secretRef: {name: {{ .Values.secret }}}}
  placement:
    inject:
      - header: Authorization
        value: "Bearer {{ "{{ .token }}" }}"
`

// HelmChart is the Chart.yaml of a chart named agents.
const HelmChart = "apiVersion: v2\nname: agents\nversion: 0.1.0\n"
