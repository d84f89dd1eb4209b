package argocd

import (
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// TestFillTemplate: a template's strings are filled with a git
// generator's path parameters, as fasttemplate placeholders and as Go
// templates; with missingkey=error a missing key fails.
func TestFillTemplate(t *testing.T) {
	var tmpl yaml.Node
	if err := yaml.Unmarshal([]byte("metadata: {name: 'agents-{{path.basename}}'}\nspec: {source: {path: '{{path}}'}, destination: {name: '{{path[1]}}'}}\n"), &tmpl); err != nil {
		t.Fatal(err)
	}
	n, err := appSetTmpl{}.fill(tmpl.Content[0], pathParams("envs/dev", "", false, ""))
	if err != nil {
		t.Fatal(err)
	}
	field := func(n *yaml.Node, keys ...string) string {
		for _, k := range keys {
			n = source.Lookup(n, k)
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
	n, err = appSetTmpl{goTemplate: true}.fill(goTmpl.Content[0], pathParams("envs/prod", "", true, ""))
	if err != nil {
		t.Fatal(err)
	}
	if a, b, c := field(n, "metadata", "name"), field(n, "spec", "source", "path"), field(n, "spec", "destination", "namespace"); a != "prod" || b != "envs/prod" || c != "envs" {
		t.Errorf("goTemplate: name %q, path %q, namespace %q; want prod, envs/prod, envs", a, b, c)
	}
	if _, err := (appSetTmpl{goTemplate: true, options: []string{"missingkey=error"}}).fill(goTmpl.Content[0], map[string]any{}); err == nil {
		t.Error("a missing key filled a goTemplate, want an error (missingkey=error)")
	}
}

// TestTemplatePatchProject: a templatePatch does not change spec.project,
// removes what it sets to null, replaces lists and merges mappings.
func TestTemplatePatchProject(t *testing.T) {
	var app, tp yaml3Node
	app.parse(t, "metadata: {name: a, labels: {x: '1'}}\nspec:\n  project: default\n  source: {path: a}\n  info: [{name: a}]\n")
	tp.parse(t, "p: |\n  metadata: {labels: {y: '2'}}\n  spec:\n    project: evil\n    source: null\n    info: [{name: b}]\n")
	out, err := appSetTmpl{}.patch(app.n, source.Lookup(tp.n, "p"), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := string(nodeBytes(out))
	want := "metadata: {name: a, labels: {x: '1', y: '2'}}\nspec:\n    project: default\n    info: [{name: b}]\n"
	if got != want {
		t.Errorf("patched:\n%s\nwant:\n%s", got, want)
	}
}

// yaml3Node is a parsed document's top node.
type yaml3Node struct{ n *yaml.Node }

func (y *yaml3Node) parse(t *testing.T, s string) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		t.Fatal(err)
	}
	y.n = doc.Content[0]
}
