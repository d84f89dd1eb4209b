package flux

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resmap"

	"keyhole.dev/keyhole/source"
)

// TestSubstituteSecretValues substitutes from a Secret and a ConfigMap the
// repository holds and one it does not: the ConfigMap's value is written
// in, the Secret's variable stays as written (its value, a canary,
// appears nowhere), and so does a variable only the object the
// repository does not hold may give.
func TestSubstituteSecretValues(t *testing.T) {
	const canary = "canary-flux-substitute-5e1b"
	objs := map[string]*source.Document{}
	for _, y := range []string{
		"apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: flux-system}\nstringData: {TOKEN: " + canary + "}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: info, namespace: flux-system}\ndata: {HOST: api.example.com}\n",
	} {
		docs, err := source.Parse("held.yaml", []byte(y))
		if err != nil || len(docs) != 1 {
			t.Fatalf("parse: %v", err)
		}
		objs[docs[0].Object().Kind+"/"+docs[0].Object().Namespace+"/"+docs[0].Object().Name] = docs[0]
	}
	held := func(kind, ns, name string) *source.Document { return objs[kind+"/"+ns+"/"+name] }
	ks := unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1",
		"kind":       "Kustomization",
		"metadata":   map[string]any{"name": "apps", "namespace": "flux-system"},
		"spec": map[string]any{"postBuild": map[string]any{"substituteFrom": []any{
			map[string]any{"kind": "Secret", "name": "creds"},
			map[string]any{"kind": "ConfigMap", "name": "info"},
			map[string]any{"kind": "ConfigMap", "name": "elsewhere"},
		}}},
	}}
	m, err := resmap.NewFactory(provider.NewDefaultDepProvider().GetResourceFactory()).NewResMapFromBytes([]byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: out, namespace: agents}\ndata: {token: '${TOKEN}', host: '${HOST}', other: '${UNKNOWN}'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	u := &source.Unit{Name: "flux:flux-system/apps", Flux: &source.FluxOverlay{Object: ks}}
	if err := substitute(u, m, held); err != nil {
		t.Fatal(err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	if strings.Contains(got, canary) {
		t.Fatalf("a Secret's value was substituted:\n%s", got)
	}
	for _, want := range []string{"host: api.example.com", "token: ${TOKEN}", "other: ${UNKNOWN}"} {
		if !strings.Contains(got, want) {
			t.Errorf("substituted build lacks %q:\n%s", want, got)
		}
	}
}
