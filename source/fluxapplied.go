package source

import (
	"cmp"
	"strings"

	"keyhole.dev/keyhole/diag"
)

// A Flux Kustomization that another Flux Kustomization's path holds (the
// cluster's apps Kustomization lists each app's) reaches the cluster as
// that one's build writes it: after its spec.patches (often one that
// gives every child Kustomization the same defaults), its
// targetNamespace, namePrefix and nameSuffix, the patches of the
// kustomizations on the way, and its postBuild substitution (a child's
// path ./apps/${CLUSTER}). fluxApplied reads such a Kustomization as the
// build applying it writes it, so that its unit is the one the cluster
// runs; see docs/inputs.md, "Deploy units".

// fluxApplied rereads, in place, each Flux Kustomization of found whose
// applying unit may change it, from that unit's build, and adds to
// found one unit more for each other unit applying it (two clusters'
// overlays of one base). The builds it makes are kept for
// buildEngineUnits, which would make them again.
func (l *loader) fluxApplied(found []engineFound, patches []kustomizePatch) ([]engineFound, diag.List) {
	var ds diag.List
	idx := map[*Unit]int{}
	for i, f := range found {
		if f.unit != nil && f.unit.Flux != nil {
			idx[f.unit] = i
		}
	}
	state := make([]int8, len(found)) // 1: being read, 2: read as written, 3: rewritten or added
	var apply func(i int, parentOf bool)
	apply = func(i int, parentOf bool) {
		if state[i] != 0 {
			return // read, or a cycle: as written
		}
		state[i] = 1
		defer func() {
			if state[i] == 1 {
				state[i] = 2
			}
		}()
		decl := found[i].flux
		self := func(f engineFound) bool { return f.flux == decl }
		ps := l.appliers(decl.File, found, self, fluxApplying)
		if len(ps) == 0 {
			return
		}
		if u := found[i].unit; u != nil && !parentOf && !l.engineUnitMatters(u) &&
			!strings.Contains(stringField(Lookup(decl.Doc.Node, "spec"), "path"), "${") {
			// Not built as written: nothing under its path is keyhole's.
			// Read again only for the Kustomizations it applies.
			u.appliedBy = ps[0]
			return
		}
		for _, p := range ps {
			apply(idx[p], true) // the parent as its own parent applies it
		}
		ps = l.appliers(decl.File, found, self, fluxApplying) // their paths as applied
		added := 0
		for _, p := range ps {
			if found[idx[p]].unit != p {
				continue // the parent is in error; it says so
			}
			bk, applies := l.appliedAs(p, decl.File, "Kustomization", decl.Doc.Object().Name, patches, &ds)
			if !applies {
				continue // not in its build: p does not apply it
			}
			var ef engineFound
			switch {
			case bk != nil:
				ef = l.fluxUnit(decl.Doc, bk.node, cmp.Or(bk.ns, decl.Namespace), decl.SrcRoots)
			case added == 0:
				ef = found[i] // as written
			default:
				ef = l.fluxUnit(decl.Doc, nil, decl.Namespace, decl.SrcRoots)
			}
			ef.flux = decl
			ef.declared(decl.File)
			if len(ps) > 1 {
				ef.fan = p
			}
			if ef.unit != nil {
				ef.unit.appliedBy = p
			}
			added++
			if added > 1 {
				// Another unit applying it: one more deploy unit.
				found = append(found, ef)
				state = append(state, 3)
				if ef.unit != nil {
					idx[ef.unit] = len(found) - 1
				}
				continue
			}
			if bk != nil || len(ps) > 1 {
				state[i] = 3
			}
			if old := found[i].unit; old != ef.unit && old != nil {
				delete(l.applying, old) // made as written, if at all
				delete(idx, old)
				if ef.unit != nil {
					// In place: a child's parent may already point at it.
					*old = *ef.unit
					ef.unit = old
				}
			}
			found[i] = ef
			if ef.unit != nil {
				idx[ef.unit] = i
			}
		}
	}
	// A pass reads each Kustomization whose parent is known; one a
	// rewritten parent now holds (its path substituted) is read in the
	// next.
	for rewritten, last := 0, -1; rewritten != last; {
		last = rewritten
		for i := range found {
			if found[i].flux != nil && state[i] != 3 {
				state[i] = 0
			}
		}
		for i := 0; i < len(found); i++ {
			if found[i].flux != nil {
				apply(i, false)
			}
		}
		rewritten = 0
		for _, s := range state {
			if s == 3 {
				rewritten++
			}
		}
	}
	return found, ds
}

// fluxApplying reports whether u is a Flux unit, which applies the Flux
// objects its build holds.
func fluxApplying(u *Unit) bool { return u.Flux != nil }
