package compiler

import (
	"strings"
	"testing"

	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// TestKindNested: one of keyhole's objects written inside an object of
// another kind, which its controller makes in the cluster, is said not
// checked, at its kind; a Secret inside another object, and what a
// GitOps engine keyhole reads renders itself, are not.
func TestKindNested(t *testing.T) {
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	const conn = "apiVersion: omnia.altairalabs.ai/v1alpha1\n        kind: Connection\n        metadata: {name: github}\n        spec: {hosts: [api.github.com]}\n"
	cases := map[string]struct {
		input string
		want  map[string]int
		holds map[string]string
	}{
		"a flux-operator ResourceSet's resources": {
			input: "apiVersion: fluxcd.controlplane.io/v1\nkind: ResourceSet\nmetadata: {name: agents, namespace: flux-system}\nspec:\n  inputs: [{team: a}]\n  resources:\n    - " + strings.ReplaceAll(conn, "        ", "      "),
			want:  map[string]int{codeKindUnknown: 1, codeKindNested: 1},
			holds: map[string]string{codeKindNested: "fluxcd.controlplane.io/v1 ResourceSet flux-system/agents holds a Connection github at spec.resources[0]: its controller makes it in the cluster, and keyhole does not read what a ResourceSet makes, so the Connection is not checked"},
		},
		"a Kyverno rule's generated data, and an agent-sandbox object": {
			input: "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: gen}\nspec:\n  rules:\n    - name: c\n      generate:\n        data:\n          " + strings.ReplaceAll(conn, "        ", "          ") +
				"    - name: s\n      generate:\n        data: {apiVersion: " + schema.AgentSandboxAPIVersion(schema.KindSandboxTemplate) + ", kind: SandboxTemplate, metadata: {name: t}}\n",
			want:  map[string]int{codeKindUnknown: 1, codeKindNested: 2},
			holds: map[string]string{codeKindNested: "holds a Connection github at spec.rules[0].generate.data"},
		},
		"a Secret inside another object is its controller's": {
			input: "apiVersion: example.com/v1\nkind: Wrapper\nmetadata: {name: w}\nspec:\n  template: {apiVersion: v1, kind: Secret, metadata: {name: s}}\n",
			want:  map[string]int{codeKindUnknown: 1},
		},
		"an Argo CD Application's values are rendered where its unit is": {
			input: "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a}\nspec:\n  source:\n    helm:\n      valuesObject:\n        extra:\n          - " + strings.ReplaceAll(conn, "        ", "            "),
			want:  map[string]int{codeKindUnknown: 1},
		},
		"an object of another group that is only shaped alike": {
			input: "apiVersion: example.com/v1\nkind: Wrapper\nmetadata: {name: w}\nspec:\n  item: {apiVersion: example.com/v1, kind: Connection}\n",
			want:  map[string]int{codeKindUnknown: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkCodes(t, v, tc.input, tc.want, tc.holds)
		})
	}
	// Said at the kind of the object inside, where a reader looks.
	docs, _ := source.Parse("in.yaml", []byte(cases["a flux-operator ResourceSet's resources"].input))
	for _, d := range Compile(docs, v, Options{}).Diagnostics {
		if d.Code == codeKindNested && (d.Pos.Line != 8 || d.Pos.Column != 13) {
			t.Errorf("KindNested at %d:%d, want 8:13 (the Connection's kind)", d.Pos.Line, d.Pos.Column)
		}
	}
}
