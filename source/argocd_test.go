package source

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestGlobMatch(t *testing.T) {
	tests := map[string]struct {
		glob, path string
		want       bool
	}{
		"one element":                {glob: "apps/*", path: "apps/web", want: true},
		"star stays in an element":   {glob: "apps/*", path: "apps/web/prod", want: false},
		"double star below":          {glob: "apps/**", path: "apps/web/prod", want: true},
		"final double star not self": {glob: "apps/**", path: "apps", want: false},
		"double star in the middle":  {glob: "apps/**/prod", path: "apps/prod", want: true},
		"double star deep middle":    {glob: "apps/**/prod", path: "apps/a/b/prod", want: true},
		"other tree":                 {glob: "apps/*", path: "infra/web", want: false},
		"pattern characters":         {glob: "envs/[dp]*", path: "envs/dev", want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := globMatch(tc.glob, tc.path); got != tc.want {
				t.Errorf("globMatch(%q, %q) = %v, want %v", tc.glob, tc.path, got, tc.want)
			}
		})
	}
}

func TestImageEntry(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"new tag":            {in: "nginx:1.27", want: "name: nginx\nnewTag: \"1.27\"\n"},
		"new name and tag":   {in: "nginx=ghcr.io/acme/nginx:1.27", want: "name: nginx\nnewName: ghcr.io/acme/nginx\nnewTag: \"1.27\"\n"},
		"registry with port": {in: "app=registry:5000/app:v2", want: "name: app\nnewName: registry:5000/app\nnewTag: v2\n"},
		"digest":             {in: "app=ghcr.io/a/app@sha256:abc", want: "name: app\nnewName: ghcr.io/a/app\ndigest: sha256:abc\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := yaml.Marshal(imageEntry(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("imageEntry(%q):\n%s\nwant:\n%s", tc.in, out, tc.want)
			}
		})
	}
}

func TestArgoKustomization(t *testing.T) {
	var k, opts yaml.Node
	if err := yaml.Unmarshal([]byte("resources: [a.yaml]\nnamePrefix: old-\ncommonLabels: {team: a}\n"), &k); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte("namePrefix: dev-\nnamespace: agents\ncommonLabels: {env: dev}\nimages: [nginx:1.27]\ncomponents: [../c]\n"), &opts); err != nil {
		t.Fatal(err)
	}
	data := argoKustomization(k.Content[0], opts.Content[0])
	var got struct {
		Resources    []string
		NamePrefix   string `yaml:"namePrefix"`
		Namespace    string
		CommonLabels map[string]string `yaml:"commonLabels"`
		Images       []struct {
			Name   string
			NewTag string `yaml:"newTag"`
		}
		Components []string
	}
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatalf("%v:\n%s", err, data)
	}
	if got.NamePrefix != "dev-" || got.Namespace != "agents" || got.CommonLabels["team"] != "a" || got.CommonLabels["env"] != "dev" ||
		len(got.Images) != 1 || got.Images[0].NewTag != "1.27" || strings.Join(got.Components, ",") != "../c" || strings.Join(got.Resources, ",") != "a.yaml" {
		t.Errorf("the kustomization with the Application's options:\n%s", data)
	}
}

func TestFillTemplate(t *testing.T) {
	var tmpl yaml.Node
	if err := yaml.Unmarshal([]byte("metadata: {name: 'agents-{{path.basename}}'}\nspec: {source: {path: '{{path}}'}, destination: {name: '{{path[1]}}'}}\n"), &tmpl); err != nil {
		t.Fatal(err)
	}
	n, err := fillTemplate(tmpl.Content[0], pathParams("envs/dev"), false)
	if err != nil {
		t.Fatal(err)
	}
	field := func(n *yaml.Node, keys ...string) string {
		for _, k := range keys {
			n = Lookup(n, k)
		}
		if n == nil {
			return ""
		}
		return n.Value
	}
	if a, b, c := field(n, "metadata", "name"), field(n, "spec", "source", "path"), field(n, "spec", "destination", "name"); a != "agents-dev" || b != "envs/dev" || c != "dev" {
		t.Errorf("fasttemplate: name %q, path %q, destination %q; want agents-dev, envs/dev, dev", a, b, c)
	}
	var goTmpl yaml.Node
	if err := yaml.Unmarshal([]byte("metadata: {name: '{{.path.basename}}'}\nspec: {source: {path: '{{.path.path}}'}, destination: {namespace: '{{index .path.segments 0}}'}}\n"), &goTmpl); err != nil {
		t.Fatal(err)
	}
	n, err = fillTemplate(goTmpl.Content[0], pathParams("envs/prod"), true)
	if err != nil {
		t.Fatal(err)
	}
	if a, b, c := field(n, "metadata", "name"), field(n, "spec", "source", "path"), field(n, "spec", "destination", "namespace"); a != "prod" || b != "envs/prod" || c != "envs" {
		t.Errorf("goTemplate: name %q, path %q, namespace %q; want prod, envs/prod, envs", a, b, c)
	}
	if _, err := fillTemplate(goTmpl.Content[0], map[string]any{}, true); err == nil {
		t.Error("a missing key filled a goTemplate, want an error (missingkey=error)")
	}
}
