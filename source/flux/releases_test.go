package flux

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"keyhole.dev/keyhole/source"
)

// A HelmRelease lands in the targetNamespace of the Kustomization
// applying it, which kustomize-controller writes over every namespace;
// else in its own, else in the one the kustomization listing it sets.
func TestReleaseNamespace(t *testing.T) {
	applier := func(target string) *source.Unit {
		spec := map[string]any{"path": "./apps"}
		if target != "" {
			spec["targetNamespace"] = target
		}
		return &source.Unit{Name: "flux:flux-system/apps", Flux: &source.FluxOverlay{Object: unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
			"metadata": map[string]any{"name": "apps", "namespace": "flux-system"}, "spec": spec,
		}}}}
	}
	for name, tc := range map[string]struct {
		ns, listed string
		by         *source.Unit
		want       string
	}{
		"target over own":  {ns: "podinfo", by: applier("apps"), want: "apps"},
		"own, no target":   {ns: "podinfo", listed: "listed", by: applier(""), want: "podinfo"},
		"listed, none own": {listed: "listed", by: applier(""), want: "listed"},
		"applied by none":  {ns: "podinfo", want: "podinfo"},
		"nothing says":     {want: ""},
		"listed, by none":  {listed: "listed", want: "listed"},
	} {
		t.Run(name, func(t *testing.T) {
			y := "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: podinfo}\n"
			if tc.ns != "" {
				y = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: podinfo, namespace: " + tc.ns + "}\n"
			}
			docs, err := source.Parse("release.yaml", []byte(y))
			if err != nil || len(docs) != 1 {
				t.Fatalf("parse: %v", err)
			}
			if got := (Engine{}).ReleaseNamespace(docs[0], tc.by, tc.listed); got != tc.want {
				t.Errorf("ReleaseNamespace = %q, want %q", got, tc.want)
			}
		})
	}
}
