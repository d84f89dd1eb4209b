package argocd

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"keyhole.dev/keyhole/source"
)

// An Argo CD instance starts from its roots: the Applications and
// ApplicationSets applied to it by its installation or by hand (an app
// of apps), which keyhole.yaml's argocd.roots may name. Where it names
// them, an Application or ApplicationSet that no root reaches, through
// the chain of Argo CD units applying the files that declare them, is no
// deploy unit (reach). Each instance is a cluster: a root's instance is
// the one keyhole.yaml names for it; where it names none, two roots
// whose units make Applications of the same namespace and name are two
// instances, each named by its root's path (Clusters). See
// docs/inputs.md, "Argo CD roots and instances".

// Settle settles what the loader's scan found of Argo CD once every
// object is read: a source of this repository told by another building
// from it (ownRepo), then the objects no root reaches (reach).
func (Engine) Settle(h source.Host, objs []*source.ArgoObject) {
	ownRepo(objs)
	reach(h, objs)
}

// ownRepo says, of each Argo CD source of objs whose path is not a
// directory of this repository, and of each git generator path that
// matches nothing here, what Argo CD does when its repository is this
// one: when another source builds from the same repository and revision
// (source.RepoKey) out of this repository, it is this one, and the path
// is a mistake Argo CD stops at.
func ownRepo(objs []*source.ArgoObject) {
	own := map[string]bool{}
	for _, o := range objs {
		for _, f := range o.Found {
			if f.Unit != nil && f.Unit.Argo != nil && f.Repo != "" {
				own[f.Repo] = true
			}
		}
	}
	for _, o := range objs {
		for i, f := range o.Found {
			if f.Repo == "" || !own[f.Repo] || f.Unit != nil {
				continue
			}
			switch {
			case f.OwnErr != "":
				o.Found[i].Skip, o.Found[i].Err = "", f.OwnErr
			case f.OwnWarn != "":
				o.Found[i].Skip, o.Found[i].Warn, o.Found[i].Code = "", f.OwnWarn, source.CodeGeneratorMatchesNothing
			}
		}
	}
}

// reach sets Unreached on each of objs that no root of keyhole.yaml's
// argocd.roots reaches, when it names roots: an object is reached when
// a root holds its file, or a reached unit applies it (parent); what
// makes no unit is reached as its file is, by a reached unit whose path
// holds it.
func reach(h source.Host, objs []*source.ArgoObject) {
	roots := h.ArgoRoots()
	if len(roots) == 0 {
		return
	}
	var units []*source.Unit
	for _, o := range objs {
		for _, f := range o.Found {
			if f.Unit != nil {
				units = append(units, f.Unit)
			}
		}
	}
	reachedObj := map[*source.ArgoObject]bool{}
	reachedUnit := map[*source.Unit]bool{}
	reached := func(o *source.ArgoObject, f source.ArgoFound) bool {
		if rootOf(roots, o.File) != nil {
			return true
		}
		if f.Unit != nil {
			p := parent(h, f.Unit, units)
			return p != nil && reachedUnit[p]
		}
		return slices.ContainsFunc(units, func(p *source.Unit) bool {
			return reachedUnit[p] && source.Within(p.Root, o.File) && (!applying(p) || h.Holds(p, o.File))
		})
	}
	// Rounds until nothing more is reached.
	for changed := true; changed; {
		changed = false
		for _, o := range objs {
			if !reachedObj[o] && slices.ContainsFunc(o.Found, func(f source.ArgoFound) bool { return reached(o, f) }) {
				reachedObj[o] = true
				changed = true
			}
		}
		for _, o := range objs {
			for _, f := range o.Found {
				if f.Unit != nil && reachedObj[o] && !reachedUnit[f.Unit] {
					reachedUnit[f.Unit] = true
					changed = true
				}
			}
		}
	}
	var shown []string
	for _, r := range roots {
		shown = append(shown, r.Shown)
	}
	for _, o := range objs {
		if reachedObj[o] {
			continue
		}
		d := o.Doc.Object()
		o.Unreached = fmt.Sprintf("Argo CD %s %s/%s is reached by no root keyhole.yaml's argocd.roots names (%s) nor by an Application they apply: an example, not a deployment, so it is no deploy unit",
			d.Kind, cmp.Or(d.Namespace, "argocd"), d.Name, strings.Join(shown, ", "))
	}
}

// applying reports whether u is an Argo CD unit built with kustomize (a
// Helm chart's are rendered apart), which applies the Applications its
// build holds.
func applying(u *source.Unit) bool { return u.Argo != nil && u.Helm == nil }

// rootOf is the root of roots that holds file (absolute), the deepest,
// or nil.
func rootOf(roots []source.ArgoRoot, file string) *source.ArgoRoot {
	var best *source.ArgoRoot
	for i, r := range roots {
		if file != "" && source.Within(r.Path, file) && (best == nil || len(r.Path) > len(best.Path)) {
			best = &roots[i]
		}
	}
	return best
}

// parent is the Argo CD unit of units that applies the file declaring
// u: the one whose build wrote it (Host.AppliedBy), else the one with
// the deepest path that holds the file and whose build reads it.
func parent(h source.Host, u *source.Unit, units []*source.Unit) *source.Unit {
	if p := h.AppliedBy(u); p != nil && p.Argo != nil {
		return p
	}
	decl := h.DeclaredIn(u)
	var best *source.Unit
	for _, v := range units {
		if v == u || v.Argo == nil || decl == "" || !source.Within(v.Root, decl) || best != nil && len(v.Root) <= len(best.Root) {
			continue
		}
		if applying(v) && !h.Holds(v, decl) {
			continue
		}
		best = v
	}
	return best
}

// Clusters names the Argo CD instance, and so the cluster, of each Argo
// CD unit of units, where the repository holds more than one: the
// instance keyhole.yaml's argocd.roots gives the root it starts from,
// else, when two roots' units make Applications of one namespace and
// name, that root's path. A unit's root is the declaration at the top
// of the chain of units applying it: the root of keyhole.yaml holding
// it, else its file.
func (Engine) Clusters(h source.Host, units []*source.Unit) {
	roots := h.ArgoRoots()
	var argo []*source.Unit
	for _, u := range units {
		if u.Argo != nil {
			argo = append(argo, u)
		}
	}
	rootOfUnit := map[*source.Unit]string{}
	named := map[string]string{} // root: the instance keyhole.yaml names
	for _, u := range argo {
		top, seen := u, map[*source.Unit]bool{u: true}
		for p := parent(h, top, argo); p != nil && !seen[p]; p = parent(h, top, argo) {
			seen[p] = true
			top = p
		}
		root := h.DeclaredIn(top)
		if r := rootOf(roots, root); r != nil {
			root = r.Path
			if r.Instance != "" {
				named[root] = r.Instance
			}
		}
		rootOfUnit[u] = root
	}
	// Two roots that make an Application of one name are two instances.
	byName := map[string]map[string]bool{}
	for _, u := range argo {
		n := u.Name // without the loader's @DIR and a source's #N
		if i := strings.IndexAny(n, "#@"); i >= 0 {
			n = n[:i]
		}
		if byName[n] == nil {
			byName[n] = map[string]bool{}
		}
		byName[n][rootOfUnit[u]] = true
	}
	apart := map[string]bool{}
	for _, roots := range byName {
		if len(roots) > 1 {
			for r := range roots {
				apart[r] = true
			}
		}
	}
	instance := func(root string) string {
		if n := named[root]; n != "" {
			return n
		}
		if apart[root] {
			return filepath.ToSlash(relOrAbs(h.SourceRoot(root), root))
		}
		return ""
	}
	distinct := map[string]bool{}
	for _, u := range argo {
		distinct[instance(rootOfUnit[u])] = true
	}
	if len(distinct) < 2 {
		return // one instance: the cluster keyhole's caller means
	}
	for _, u := range argo {
		i := instance(rootOfUnit[u])
		if i == "" {
			continue
		}
		if u.Cluster == "" {
			u.Cluster = "argocd " + i
		} else {
			u.Cluster = "argocd " + i + ", " + u.Cluster
		}
	}
}

// relOrAbs is abs relative to base, or abs where it has no such path.
func relOrAbs(base, abs string) string {
	if rel, err := filepath.Rel(base, abs); err == nil {
		return rel
	}
	return abs
}
