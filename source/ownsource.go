package source

import (
	"cmp"
)

// Which directory of this repository a GitOps source's root is: a Flux
// Kustomization's spec.path, an Argo CD Application's source path and a
// HelmRelease's chart are relative to it. Flux names the repository's own
// GitRepository (ownSource) and keyhole.yaml's flux.sources maps the
// others (mappedSource); Argo CD's Applications ask the same of the Flux
// sources they share a repository with.

// fluxOwnSource is the name Flux's bootstrap gives the GitRepository of
// the repository it is bootstrapped into: a Kustomization whose sourceRef
// names it builds from this repository.
const fluxOwnSource = "flux-system"

// ownSource reports whether the Flux source of kind ("" for
// GitRepository, sourceRef's default), ns and name is this repository's
// git root: the GitRepository Flux's bootstrap names flux-system, or one
// that a Kustomization applying the file declaring it builds from
// (findOwnSources). A source of another kind is an artifact, never the
// git root by its name: an OCIRepository flux-system/flux-system is what
// bootstrap makes for an OCI artifact, whose root is wherever it was
// pushed from (keyhole.yaml's flux.sources says where).
func (l *loader) ownSource(kind, ns, name string) bool {
	if cmp.Or(kind, "GitRepository") != "GitRepository" {
		return false
	}
	return ns == fluxOwnSource && name == fluxOwnSource || l.ownSources[ns+"/"+name]
}

// mappedSource is the directory keyhole.yaml maps the Flux source of
// kind, ns and name to, or "".
func (l *loader) mappedSource(kind, ns, name string) string {
	return l.flux.Sources[FluxSource{Kind: kind, Namespace: ns, Name: name}]
}
