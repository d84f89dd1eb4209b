package source

import (
	"slices"

	"keyhole.dev/keyhole/diag"
)

// An Argo CD Application (or ApplicationSet) that another Application's
// path holds, an app of apps, reaches Argo CD as that Application's build
// writes it: after its kustomize options (namePrefix, namespace, patches)
// and the patches of the kustomizations on the way, which may rename it,
// move its path or change its Helm values. One that two Applications'
// overlays list from a base is one for each. argoApplied reads them so,
// as fluxApplied reads Flux Kustomizations; see docs/inputs.md, "Deploy
// units".

// argoDecl is where an Argo CD Application or ApplicationSet is declared.
type argoDecl struct {
	d        *Document
	file     string // absolute
	srcRoots []string
}

// argoApplying reports whether u is an Argo CD unit built with kustomize
// (a Helm chart's are rendered apart), which applies the Applications
// its build holds.
func argoApplying(u *Unit) bool { return u.Argo != nil && u.Helm == nil }

// argoApplied rereads the Argo CD objects of found that an Argo CD unit
// applies and may change, from that unit's build: the entries of such an
// object give way to those it makes as applied, one set for each unit
// applying it.
func (l *loader) argoApplied(found []engineFound, patches []kustomizePatch) ([]engineFound, diag.List) {
	var ds diag.List
	declOf := map[*Unit]*argoDecl{}
	var decls []*argoDecl
	for _, f := range found {
		if f.argo == nil {
			continue
		}
		if !slices.Contains(decls, f.argo) {
			decls = append(decls, f.argo)
		}
		if f.unit != nil {
			declOf[f.unit] = f.argo
		}
	}
	state := map[*argoDecl]int8{} // 1: being read, 2: read
	var apply func(decl *argoDecl)
	apply = func(decl *argoDecl) {
		if state[decl] != 0 {
			return // read, or a cycle: as written
		}
		state[decl] = 1
		defer func() { state[decl] = 2 }()
		self := func(f engineFound) bool { return f.argo == decl }
		ps := l.appliers(decl.file, found, self, argoApplying)
		for _, p := range ps {
			if pd := declOf[p]; pd != nil {
				apply(pd) // the parent as its own parent applies it
			}
		}
		ps = l.appliers(decl.file, found, self, argoApplying) // their paths as applied
		o := decl.d.Object()
		var efs []engineFound
		changed := false
		// The cluster holds one object of a name: Applications applying
		// the same one (nothing renames it on the way) make one set of
		// units, the first's, not one per applier, which multiplied with
		// every Application applying another.
		made := map[string]bool{}
		for _, p := range ps {
			bo, applies := l.appliedAs(p, decl.file, o.Kind, o.Name, patches, &ds)
			if !applies {
				continue // not in its build: p does not apply it
			}
			var fs []engineFound
			if bo != nil {
				fs, changed = l.argoUnits(decl.d, bo.node, bo.ns, decl.srcRoots), true
			} else {
				fs = l.argoUnits(decl.d, nil, "", decl.srcRoots)
			}
			fs = slices.DeleteFunc(fs, func(f engineFound) bool {
				key := f.pos.String() + "\x00" + f.skip + "\x00" + f.err + "\x00" + f.warn
				if f.unit != nil {
					key = "unit\x00" + p.Cluster + "\x00" + f.unit.Name
				}
				if made[key] {
					return true
				}
				made[key] = true
				return false
			})
			for i := range fs {
				fs[i].argo = decl
				fs[i].declared(decl.file)
				if len(ps) > 1 {
					fs[i].fan = p
				}
				if u := fs[i].unit; u != nil {
					u.appliedBy = p
					declOf[u] = decl
				}
			}
			efs = append(efs, fs...)
		}
		if !changed && len(efs) > 0 && len(ps) < 2 {
			return // as written
		}
		if len(efs) == 0 {
			return
		}
		// The object's entries give way to those it makes as applied,
		// where the first of them stood.
		var next []engineFound
		for _, f := range found {
			switch {
			case f.argo != decl:
				next = append(next, f)
			case efs != nil:
				next = append(next, efs...)
				efs = nil
			}
		}
		found = next
	}
	for _, decl := range decls {
		apply(decl)
	}
	return found, ds
}
