package source

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// An Argo CD instance starts from its roots: the Applications and
// ApplicationSets applied to it by its installation or by hand (an app
// of apps), which keyhole.yaml's argocd.roots may name. Where it names
// them, an Application or ApplicationSet that no root reaches, through
// the chain of Argo CD units applying the files that declare them, is no
// deploy unit (argoReach), as Flux's entries do for Kustomizations.
//
// Each instance is a cluster: its in-cluster destination
// (https://kubernetes.default.svc) is its own, and so are the clusters
// its Secrets name. A root's instance is the one keyhole.yaml names for
// it; where it names none, two roots whose units make Applications of
// the same namespace and name (two clusters' bootstraps each creating
// argocd/platform) are two instances, each named by its root's path
// (argoInstances). Where the repository holds one instance, its units
// deploy to the cluster keyhole's caller means, as before. See
// docs/inputs.md, "Argo CD roots and instances".

// argoConfig is what keyhole.yaml's argocd field says.
type argoConfig struct {
	roots []ArgoRoot
	// rendered are the directories (absolute) keyhole.yaml's
	// argocd.rendered names, and base keyhole.yaml's directory
	// (argoRenderedAgree).
	rendered []string
	base     string
	// uses are the Argo CD sources found applying them.
	uses []argoRenderUse
}

// readArgoConfig reads the argocd field of the Config document d, whose
// directory is base, as the Argo CD engine reads it (Config).
func (l *loader) readArgoConfig(d *Document, base string) {
	if l.opts.Engines.Argo == nil {
		return // no Argo CD unit is read: none reads the field
	}
	c, ds := l.opts.Engines.Argo.Config(Host{l}, d, base)
	l.diags = append(l.diags, ds...)
	if c.Rendered != nil {
		l.argo.base = base
		l.argo.rendered = append(l.argo.rendered, c.Rendered...)
	}
	l.argo.roots = append(l.argo.roots, c.Roots...)
}

// argoRootOf is the root of keyhole.yaml's argocd.roots that holds file
// (absolute), the deepest, or nil.
func (l *loader) argoRootOf(file string) *ArgoRoot {
	var best *ArgoRoot
	for i, r := range l.argo.roots {
		if file != "" && within(r.Path, file) && (best == nil || len(r.Path) > len(best.Path)) {
			best = &l.argo.roots[i]
		}
	}
	return best
}

// argoParent is the Argo CD unit of units that applies the file
// declaring u: the one whose build wrote it (appliedBy), else the one
// with the deepest path that holds the file and whose build reads it.
func (l *loader) argoParent(u *Unit, units []*Unit) *Unit {
	if p := u.appliedBy; p != nil && p.Argo != nil {
		return p
	}
	var best *Unit
	for _, v := range units {
		if v == u || v.Argo == nil || u.declFile == "" || !within(v.Root, u.declFile) || best != nil && len(v.Root) <= len(best.Root) {
			continue
		}
		if argoApplying(v) && !l.holds(v, u.declFile) {
			continue
		}
		best = v
	}
	return best
}

// argoReach turns into notes the Argo CD objects of found that no root
// of keyhole.yaml's argocd.roots reaches, when it names roots: said once
// per object, at its declaration.
func (l *loader) argoReach(found []engineFound) []engineFound {
	if len(l.argo.roots) == 0 {
		return found
	}
	var units []*Unit
	for _, f := range found {
		if f.argo != nil && f.unit != nil {
			units = append(units, f.unit)
		}
	}
	reachedDecl := map[*argoDecl]bool{}
	reachedUnit := map[*Unit]bool{}
	// A declaration is reached when a root holds its file, or a reached
	// unit applies it; rounds until nothing more is.
	for changed := true; changed; {
		changed = false
		for _, f := range found {
			if f.argo == nil || reachedDecl[f.argo] {
				continue
			}
			ok := l.argoRootOf(f.argo.file) != nil
			if !ok && f.unit != nil {
				p := l.argoParent(f.unit, units)
				ok = p != nil && reachedUnit[p]
			}
			if !ok && f.unit == nil {
				// What makes no unit is reached as its file is: by a
				// reached unit whose path holds it.
				ok = slices.ContainsFunc(units, func(p *Unit) bool {
					return reachedUnit[p] && within(p.Root, f.argo.file) && (!argoApplying(p) || l.holds(p, f.argo.file))
				})
			}
			if ok {
				reachedDecl[f.argo] = true
				changed = true
			}
		}
		for _, f := range found {
			if f.argo != nil && f.unit != nil && reachedDecl[f.argo] && !reachedUnit[f.unit] {
				reachedUnit[f.unit] = true
				changed = true
			}
		}
	}
	said := map[*argoDecl]bool{}
	kept := found[:0]
	for _, f := range found {
		if f.argo == nil || reachedDecl[f.argo] {
			kept = append(kept, f)
			continue
		}
		if said[f.argo] {
			continue
		}
		said[f.argo] = true
		o := f.argo.d.Object()
		kept = append(kept, engineFound{pos: f.argo.d.Pos, skip: fmt.Sprintf(
			"Argo CD %s %s/%s is reached by no root keyhole.yaml's argocd.roots names (%s) nor by an Application they apply: an example, not a deployment, so it is no deploy unit",
			o.Kind, cmp.Or(o.Namespace, "argocd"), o.Name, l.argoRootsText())})
	}
	return kept
}

// argoRootsText lists keyhole.yaml's argocd.roots, for a message.
func (l *loader) argoRootsText() string {
	var s []string
	for _, r := range l.argo.roots {
		s = append(s, r.Shown)
	}
	return strings.Join(s, ", ")
}

// argoInstances names the Argo CD instance, and so the cluster, of each
// Argo CD unit of units, where the repository holds more than one: the
// instance keyhole.yaml's argocd.roots gives the root it starts from,
// else, when two roots' units make Applications of one namespace and
// name, that root's path. A unit's root is the declaration at the top
// of the chain of units applying it: the root of keyhole.yaml holding
// it, else its file.
func (l *loader) argoInstances(units []*Unit) {
	var argo []*Unit
	for _, u := range units {
		if u.Argo != nil {
			argo = append(argo, u)
		}
	}
	rootOf := map[*Unit]string{}
	named := map[string]string{} // root: the instance keyhole.yaml names
	for _, u := range argo {
		top, seen := u, map[*Unit]bool{u: true}
		for p := l.argoParent(top, argo); p != nil && !seen[p]; p = l.argoParent(top, argo) {
			seen[p] = true
			top = p
		}
		root := top.declFile
		if r := l.argoRootOf(top.declFile); r != nil {
			root = r.Path
			if r.Instance != "" {
				named[root] = r.Instance
			}
		}
		rootOf[u] = root
	}
	// Two roots that make an Application of one name are two instances.
	byName := map[string]map[string]bool{}
	for _, u := range argo {
		n := u.Name // without uniqueNames' @DIR and a source's #N
		if i := strings.IndexAny(n, "#@"); i >= 0 {
			n = n[:i]
		}
		if byName[n] == nil {
			byName[n] = map[string]bool{}
		}
		byName[n][rootOf[u]] = true
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
			return filepath.ToSlash(relOrAbs(l.sourceRoot(root), root))
		}
		return ""
	}
	distinct := map[string]bool{}
	for _, u := range argo {
		distinct[instance(rootOf[u])] = true
	}
	if len(distinct) < 2 {
		return // one instance: the cluster keyhole's caller means
	}
	for _, u := range argo {
		i := instance(rootOf[u])
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
