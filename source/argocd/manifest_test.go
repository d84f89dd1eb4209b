package argocd

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

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
