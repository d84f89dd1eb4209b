package compiler

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestPodSecretUses: every way a pod takes in a Secret is found, at the
// name's position, and what only looks like one is not.
func TestPodSecretUses(t *testing.T) {
	tests := map[string]struct {
		pod  string
		want []string // secret@line:column path
	}{
		"env from": {
			pod:  "containers: [{name: a, envFrom: [{configMapRef: {name: c}}, {secretRef: {name: s}}]}]",
			want: []string{"s@1:80 spec.containers[0].envFrom[1].secretRef.name"},
		},
		"env key": {
			pod:  "initContainers: [{name: a, env: [{name: X, value: s}, {name: Y, valueFrom: {secretKeyRef: {name: s, key: k}}}]}]",
			want: []string{"s@1:98 spec.initContainers[0].env[1].valueFrom.secretKeyRef.name"},
		},
		"volumes": {
			pod: "volumes: [{name: a, secret: {secretName: s}}, {name: b, projected: {sources: [{configMap: {name: c}}, {secret: {name: t}}]}}]",
			want: []string{
				"s@1:42 spec.volumes[0].secret.secretName",
				"t@1:119 spec.volumes[1].projected.sources[1].secret.name",
			},
		},
		"through an alias": {
			pod: "containers: &c [{name: a, envFrom: [{secretRef: {name: s}}]}]\ninitContainers: *c",
			want: []string{
				"s@1:56 spec.initContainers[0].envFrom[0].secretRef.name",
				"s@1:56 spec.containers[0].envFrom[0].secretRef.name",
			},
		},
		"none":           {pod: "containers: [{name: a, image: b, env: [{name: S, valueFrom: {configMapKeyRef: {name: s, key: k}}}]}]"},
		"wrong shapes":   {pod: "containers: {a: b}\nvolumes: [1, [2], {secret: [x]}, {projected: {sources: 3}}]"},
		"empty name":     {pod: "containers: [{envFrom: [{secretRef: {name: ''}}]}]"},
		"not a mapping":  {pod: "[1, 2]"},
		"a scalar":       {pod: "x"},
		"nested lists":   {pod: "containers: [[{envFrom: [{secretRef: {name: s}}]}]]"},
		"name is a list": {pod: "containers: [{envFrom: [{secretRef: {name: [s]}}]}]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(tc.pod), &doc); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range podSecretUses(doc.Content[0], "spec") {
				got = append(got, u.secret+"@"+itoa(u.line)+":"+itoa(u.column)+" "+u.path)
				if u.what == "" {
					t.Errorf("%s: no description", u.path)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// FuzzPodSecretUses: any YAML gives uses whose Secret names are written
// in it, at positions inside it, never a panic.
func FuzzPodSecretUses(f *testing.F) {
	for _, s := range []string{
		"containers: [{name: a, envFrom: [{secretRef: {name: s}}], env: [{name: X, valueFrom: {secretKeyRef: {name: t, key: k}}}]}]",
		"volumes: [{name: a, secret: {secretName: s}}, {projected: {sources: [{secret: {name: t}}]}}]",
		"containers: &c [{envFrom: [{secretRef: {name: s}}]}]\ninitContainers: *c",
		"[1, 2]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(src), &doc); err != nil || len(doc.Content) == 0 {
			return
		}
		lines := strings.Count(src, "\n") + 1
		for _, u := range podSecretUses(doc.Content[0], "spec") {
			if u.secret == "" || u.line < 1 || u.line > lines || u.column < 1 || u.path == "" || u.what == "" {
				t.Fatalf("bad use %+v of %q", u, src)
			}
		}
	})
}
