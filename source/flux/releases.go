package flux

import (
	"cmp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"keyhole.dev/keyhole/source"
)

// A Flux HelmRelease is applied by the Flux Kustomization whose build
// holds it, in that Kustomization's targetNamespace when it sets one;
// which unit's build holds it is the loader's to say, once every
// Kustomization is known.

// ReleaseNamespace is the namespace the HelmRelease d is applied in by
// the Flux unit by (nil when none does): by's targetNamespace, which
// kustomize-controller writes over every namespace; else its own, or
// listed, the one the kustomization listing it sets.
func (Engine) ReleaseNamespace(d *source.Document, by *source.Unit, listed string) string {
	if by != nil {
		if t, _, _ := unstructured.NestedString(by.Flux.Object.Object, "spec", "targetNamespace"); t != "" {
			return t
		}
	}
	return cmp.Or(d.Object().Namespace, listed)
}

// Unapplied is why the Flux HelmRelease d, declared in file and
// applied by no Flux unit of ks, is no deploy unit: a unit's path holds
// it but the unit's kustomization does not list it, or the repository
// has cluster entries (entries) and none reaches it; "" when it stays
// one, read as written. listed is the namespace the kustomization
// listing file sets.
func (e Engine) Unapplied(h source.Host, d *source.Document, file, listed string, ks []source.FluxFound, entries bool) string {
	what := "Flux HelmRelease " + cmp.Or(e.ReleaseNamespace(d, nil, listed), "default") + "/" + d.Object().Name
	if by := unlisting(h, file, ks, nil); by != nil {
		return what + " lies under the path of Flux Kustomization " + strings.TrimPrefix(by.Name, "flux:") + ", whose kustomization does not list its file: Flux does not apply it, so it is no deploy unit"
	}
	if entries {
		return what + " is applied by no Flux Kustomization that a cluster's entry reaches: an example, not a deployment, so it is no deploy unit"
	}
	return ""
}

// ReleaseClusters sets the Cluster of each HelmRelease unit of units
// that names none (kubeConfig) to the cluster of the Flux unit applying
// it, else, where none does, of the deepest Flux unit whose path holds
// the file declaring it.
func (Engine) ReleaseClusters(h source.Host, units []*source.Unit) {
	for _, u := range units {
		if u.Source != source.UnitHelmRelease || u.Cluster != "" {
			continue
		}
		applied := h.AppliedBy(u)
		by := applied
		for _, v := range units {
			if applied == nil && v.Flux != nil && source.Within(v.Root, h.DeclaredIn(u)) && (by == nil || len(v.Root) > len(by.Root)) {
				by = v // applied by none: the deepest whose path holds it
			}
		}
		if by != nil {
			u.Cluster = by.Cluster
		}
	}
}
