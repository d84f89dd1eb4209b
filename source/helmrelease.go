package source

import (
	"cmp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A Flux HelmRelease whose chart is a directory of this repository (its
// chart's sourceRef is the repository's own GitRepository) is rendered
// as helm-controller renders it; the Flux engine (source/flux) reads the
// release, the loader says which Flux unit applies it. See
// docs/inputs.md, "Helm charts".

// UnitHelmRelease is a Flux HelmRelease's chart.
const UnitHelmRelease UnitSource = "helmrelease"

// helmReleaseGroup is the API group of Flux's HelmRelease.
const helmReleaseGroup = "helm.toolkit.fluxcd.io/"

// helmReleaseUnit is the unit the HelmRelease d, in namespace ns, makes,
// as the Flux engine reads it (source.Flux's HelmRelease): its fields
// from vals, the release as the Flux unit applying it builds it
// (releaseAs), or from d itself when vals is nil. by is the Flux unit
// applying it, or nil.
func (l *loader) helmReleaseUnit(d *Document, vals *yaml.Node, ns string, srcRoots []string, by *Unit) engineFound {
	if l.opts.Engines.Flux == nil {
		return engineFound{pos: d.Pos, helm: true, err: errNoFlux.Error()}
	}
	return found(l.opts.Engines.Flux.HelmRelease(Host{l}, d, vals, ns, srcRoots, by))
}

// generatedValues is the value of key in the ConfigMap ns/name that the
// build of the Flux unit by writes, as helm-controller reads it from the
// cluster: one a configMapGenerator makes (merged with an overlay's,
// patched), named as written or as the build renames it (the hash
// suffix that a nameReference carries into the HelmRelease). found is
// false when by is nil, its build fails (which it says itself) or holds
// no such ConfigMap or key.
func (l *loader) generatedValues(by *Unit, ns, name, key string) (value string, found bool) {
	if by == nil || by.Flux == nil {
		return "", false
	}
	if l.applying == nil {
		l.applying = map[*Unit]*applyingBuild{}
	}
	b := l.applying[by]
	if b == nil {
		b = l.buildApplying(by)
		l.applying[by] = b
	}
	if b.err != nil || b.run.m == nil {
		return "", false
	}
	for _, r := range b.run.m.Resources() {
		if r.GetKind() != "ConfigMap" || r.GetApiVersion() != "v1" || cmp.Or(r.GetNamespace(), "default") != ns ||
			r.GetName() != name && r.OrgId().Name != name && !hashOf(r.GetName(), name) {
			continue
		}
		v, ok := r.GetDataMap()[key]
		return v, ok
	}
	return "", false
}

// hashOf reports whether built is name with the hash suffix kustomize's
// generators add: a hyphen and ten lowercase letters and digits.
func hashOf(built, name string) bool {
	h, ok := strings.CutPrefix(built, name+"-")
	return ok && len(h) == 10 && strings.Trim(h, "abcdefghijklmnopqrstuvwxyz0123456789") == ""
}
