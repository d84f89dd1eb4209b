package source

import (
	"cmp"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
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

// fluxReleases adds to found the units the Flux HelmReleases of
// releases make, once every Flux Kustomization is known: each as the
// Flux units whose builds apply it apply it (patched and substituted,
// in their namespace), or why it makes none (Flux.Unapplied); entries
// says the repository has cluster entries (Flux.Reach).
func (l *loader) fluxReleases(found []engineFound, releases []FluxDecl, entries bool, patches []kustomizePatch, ds *diag.List) []engineFound {
	if l.opts.Engines.Flux == nil {
		for _, r := range releases {
			found = append(found, engineFound{pos: r.Doc.Pos, helm: true, err: errNoFlux.Error()})
		}
		return found
	}
	for _, r := range releases {
		listed := l.listedNamespace(r.File, r.SrcRoots[0])
		var efs []engineFound
		ps := l.appliers(r.File, found, nil, fluxApplying)
		if len(ps) == 0 {
			if n := l.opts.Engines.Flux.Unapplied(Host{l}, r.Doc, r.File, listed, fluxFounds(found), entries); n != "" {
				found = append(found, engineFound{pos: r.Doc.Pos, skip: n})
				continue
			}
		}
		for _, p := range ps {
			ef, ok := l.releaseAs(r, p, listed, patches, ds)
			if !ok {
				continue
			}
			if ef.skip != "" {
				if len(ps) > 1 {
					efs = nil // out of reach whoever applies it: said once, of the object as written
				} else {
					efs = append(efs, ef)
				}
				break
			}
			if len(ps) > 1 {
				ef.fan = p
			}
			efs = append(efs, ef)
		}
		if len(efs) == 0 {
			ef, _ := l.releaseAs(r, nil, listed, patches, ds)
			efs = append(efs, ef)
		}
		found = append(found, efs...)
	}
	return found
}

// fluxFounds are the Flux Kustomizations of found, as the Flux engine
// reads them.
func fluxFounds(found []engineFound) []FluxFound {
	var ks []FluxFound
	for _, f := range found {
		if f.flux != nil {
			ks = append(ks, FluxFound{Decl: f.flux, Unit: f.unit})
		}
	}
	return ks
}

// releaseAs is the unit of the HelmRelease r as the Flux unit p (nil
// when none does) applies it, read by the Flux engine: in p's namespace, patched and substituted
// as p's build writes it when p may change it; listed is the namespace
// the kustomization listing it sets. ok is false when p's build does not
// hold it.
func (l *loader) releaseAs(r FluxDecl, p *Unit, listed string, patches []kustomizePatch, ds *diag.List) (ef engineFound, ok bool) {
	ns := l.opts.Engines.Flux.ReleaseNamespace(r.Doc, p, listed)
	ef = l.helmReleaseUnit(r.Doc, nil, ns, r.SrcRoots, p)
	applied := false
	if p != nil && (ef.unit != nil || ef.err != "") {
		// A chart of this repository: read as the Flux unit applying
		// it builds it.
		o, applies := l.appliedAs(p, r.File, "HelmRelease", r.Doc.Object().Name, patches, ds)
		if !applies {
			return engineFound{}, false
		}
		if o != nil {
			ef, applied = l.helmReleaseUnit(r.Doc, o.node, cmp.Or(o.ns, ns), r.SrcRoots, p), true
		}
	}
	if ef.unit != nil {
		ef.unit.appliedBy = p
		if f := l.releasePatch(patches, r.Doc.Object().Name); f != "" && !applied {
			note := "the kustomize patch " + f + ", which keyhole does not apply to the HelmRelease (it reads the release as written)"
			if h := ef.unit.Helm; h.Without != "" {
				note = h.Without + " and " + note
			}
			ef.unit.Helm.Without = note
		}
	}
	ef.declared(r.File)
	return ef, true
}

// releasePatch names the first of patches that may change the Flux
// HelmRelease named name, or "". A Flux Kustomization applies the
// HelmRelease its kustomization builds, patches included; keyhole reads
// HelmReleases before anything is built, so a patched one is rendered
// as written, and says so.
func (l *loader) releasePatch(patches []kustomizePatch, name string) string {
	for _, p := range patches {
		switch {
		case p.kind != "" && p.kind != "HelmRelease":
			continue
		case p.kind != "":
			// kustomize matches a target's name as a regular expression.
			if re, err := regexp.Compile("^(?:" + p.name + ")$"); p.name == "" || err != nil || re.MatchString(name) {
				return p.shown
			}
			continue
		}
		data := l.sniff(p.file, []byte("HelmRelease"))
		docs, _ := Parse(p.shown, data)
		for _, d := range docs {
			if o := d.Object(); o.Kind == "HelmRelease" && (o.Name == "" || o.Name == name) {
				return p.shown
			}
		}
	}
	return ""
}
