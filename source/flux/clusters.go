package flux

import (
	"cmp"
	"path/filepath"

	"keyhole.dev/keyhole/source"
)

// OwnSources are the GitRepositories of repos, in Flux's namespace, that
// a Flux Kustomization of kustomizations builds from and whose path
// holds the file declaring the GitRepository. That is how a repository
// syncs itself (Flux's bootstrap writes the GitRepository and the
// Kustomization over its directory side by side), whatever name it gives
// its source, as a repository bootstrapped by hand, or before
// flux-system was the convention, may do (home-kubernetes).
func (Engine) OwnSources(h source.Host, repos, kustomizations []source.FluxDecl) []source.FluxSource {
	var own []source.FluxSource
	taken := map[source.FluxSource]bool{}
	for _, g := range repos {
		s := source.FluxSource{Kind: "GitRepository", Namespace: g.Namespace, Name: g.Doc.Object().Name}
		if taken[s] || h.OwnFluxSource(s) || g.Namespace != source.FluxOwnSource {
			// Flux's own namespace holds a cluster's sync; a tenant's
			// namespace holds a tenant's, of its own repository or
			// branch, even where it applies its own file.
			continue
		}
		for _, k := range kustomizations {
			spec := source.Lookup(k.Doc.Node, "spec")
			ref := source.Lookup(spec, "sourceRef")
			ns := cmp.Or(k.Namespace, source.FluxOwnSource)
			if source.StringField(ref, "name") != s.Name || cmp.Or(source.StringField(ref, "namespace"), ns) != s.Namespace || cmp.Or(source.StringField(ref, "kind"), "GitRepository") != "GitRepository" {
				continue
			}
			if root, _ := h.EnginePath(source.StringField(spec, "path"), k.SrcRoots); root != "" && source.Within(root, g.File) {
				own = append(own, s)
				taken[s] = true
				break
			}
		}
	}
	return own
}

// Clusters says which cluster each Flux unit deploys to: the one of the
// unit that deploys the file declaring it, up to a unit no other deploys
// (a cluster's flux-system), whose own path names the cluster, or whose
// file is in one of keyhole.yaml's flux.entries, which then names it.
// Objects declared outside every Flux unit's path deploy to the cluster
// keyhole's caller means ("").
func (e Engine) Clusters(h source.Host, units []*source.Unit) {
	var fl []*source.Unit
	for _, u := range units {
		if u.Flux != nil {
			fl = append(fl, u)
		}
	}
	units = fl
	// declaredUnder reports whether u is declared in a file under v's
	// path.
	declaredUnder := func(u, v *source.Unit) bool { return source.Within(v.Root, h.DeclaredIn(u)) }
	parent := func(u *source.Unit) *source.Unit {
		best := h.AppliedBy(u)
		if best != nil {
			return best
		}
		for _, v := range units {
			if v != u && v.Flux != nil && declaredUnder(u, v) && (best == nil || len(v.Root) > len(best.Root)) {
				best = v
			}
		}
		return best
	}
	for _, u := range units {
		if u.Cluster != "" {
			continue
		}
		top, seen := u, map[*source.Unit]bool{}
		for p := parent(top); p != nil && !seen[p]; p = parent(top) {
			seen[top] = true
			if p.Cluster != "" {
				top = p
				break
			}
			top = p
		}
		u.Cluster = e.Cluster(h, u, top)
	}
}

// Cluster names the cluster of the Flux unit u, the top of whose chain
// of applying units is top: top's own (kubeConfig, or one set before),
// else the entry of keyhole.yaml's flux.entries holding top's file, else
// top's path where top applies its own file or is not u; else "", the
// cluster keyhole's caller means.
func (Engine) Cluster(h source.Host, u, top *source.Unit) string {
	switch {
	case top.Cluster != "":
		return top.Cluster
	case h.FluxEntry(h.DeclaredIn(top)) != "":
		e := h.FluxEntry(h.DeclaredIn(top))
		return "flux " + filepath.ToSlash(relOrAbs(h.SourceRoot(e), e))
	case top != u || source.Within(top.Root, h.DeclaredIn(top)):
		return "flux " + filepath.ToSlash(relOrAbs(top.Flux.SourceRoot, top.Root))
	}
	return ""
}

// relOrAbs is abs relative to base, or abs where it cannot be.
func relOrAbs(base, abs string) string {
	if rel, err := filepath.Rel(base, abs); err == nil {
		return rel
	}
	return abs
}
