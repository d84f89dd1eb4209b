package flux

import (
	"cmp"
	"slices"
	"strings"

	"keyhole.dev/keyhole/source"
)

// A cluster applies what its entry Kustomization applies: bootstrap's
// flux-system, whose path holds the file declaring it, or one in a file
// keyhole.yaml's flux.entries names; then the Kustomizations their
// builds apply, and theirs. A Kustomization under a Flux unit's path
// that the unit's kustomization does not list is applied by nothing;
// and where a repository has entries, one none of them reaches (an
// example in a project's docs) is no deploy unit either. Without
// entries, every other Kustomization stays a unit, so that keyhole is
// never blind.

// Reach says which of ks Flux applies, asking the loader which files
// each unit's build applies (source.Host's Applies). A Kustomization
// that several units apply, one of them reached, loses only the units
// of those not reached; one not applied is said once, at its first
// unit.
func (Engine) Reach(h source.Host, ks []source.FluxFound) ([]source.FluxReached, bool) {
	reached := make([]bool, len(ks))
	var queue []*source.Unit
	for i, k := range ks {
		if entry(h, k) {
			reached[i] = true
			if k.Unit != nil {
				queue = append(queue, k.Unit)
			}
		}
	}
	entries := slices.Contains(reached, true)
	if entries {
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for i, k := range ks {
				if reached[i] || k.Unit == p {
					continue
				}
				if h.Applies(p, k.Decl.File) {
					reached[i] = true
					if k.Unit != nil {
						queue = append(queue, k.Unit)
					}
				}
			}
		}
	}
	someReached := map[*source.FluxDecl]bool{}
	for i, k := range ks {
		if reached[i] {
			someReached[k.Decl] = true
		}
	}
	out := make([]source.FluxReached, len(ks))
	// A unit that became a note applies nothing the notes after it say.
	left := slices.Clone(ks)
	note := map[*source.FluxDecl]string{}
	for i, k := range ks {
		if reached[i] {
			continue
		}
		if someReached[k.Decl] {
			out[i].Drop = true // another unit applying it is reached
			continue
		}
		n, seen := note[k.Decl]
		if !seen {
			what := "Flux Kustomization " + cmp.Or(k.Decl.Namespace, source.FluxOwnSource) + "/" + k.Decl.Doc.Object().Name
			switch by := unlisting(h, k.Decl.File, left, k.Decl); {
			case by != nil:
				n = what + " lies under the path of Flux Kustomization " + strings.TrimPrefix(by.Name, "flux:") + ", whose kustomization does not list its file: Flux does not apply it, so it is no deploy unit"
			case entries:
				n = what + " is applied by no cluster's entry (a Kustomization whose path holds the file declaring it, as bootstrap's flux-system, or one in a file keyhole.yaml's flux.entries names) nor by a Kustomization they apply: an example, not a deployment, so it is no deploy unit"
			}
			note[k.Decl] = n
			if n != "" {
				out[i].Note = n
				left[i].Unit = nil
			}
			continue
		}
		out[i].Drop = n != "" // said once, at its first unit
	}
	return out, entries
}

// entry reports whether k is a cluster's entry: keyhole.yaml's
// flux.entries names its file or a directory above it, or its unit's
// path holds (and its build applies) the file declaring it, as
// bootstrap's flux-system does.
func entry(h source.Host, k source.FluxFound) bool {
	if h.FluxEntry(k.Decl.File) != "" {
		return true
	}
	u := k.Unit
	return u != nil && u.Flux != nil && source.Within(u.Root, k.Decl.File) && h.Applies(u, k.Decl.File)
}

// unlisting is a Flux unit of ks (other than self's) whose path holds
// file but whose build does not apply it, when no Flux unit applies
// it; else nil.
func unlisting(h source.Host, file string, ks []source.FluxFound, self *source.FluxDecl) *source.Unit {
	var under *source.Unit
	for _, k := range ks {
		u := k.Unit
		if u == nil || u.Flux == nil || self != nil && k.Decl == self {
			continue
		}
		if h.Applies(u, file) {
			return nil
		}
		if under == nil && source.Within(u.Root, file) {
			under = u
		}
	}
	return under
}
