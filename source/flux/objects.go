package flux

import (
	"cmp"

	"keyhole.dev/keyhole/source"
)

// Object reads one of Flux's objects that the loader's scan found in
// file, under srcRoots: its namespace, as Flux applies it (its own, else
// the one the kustomization listing the file sets, else flux-system),
// and what it says of the units and sources that follow: a
// Kustomization's unit as written, a HelmRelease to read once every
// Kustomization is known, a source's declaration, an ArtifactGenerator's
// cuts.
func (e Engine) Object(h source.Host, d *source.Document, file string, srcRoots []string) source.FluxObject {
	o := d.Object()
	if o.Kind == "HelmRelease" {
		return source.FluxObject{Release: true}
	}
	listed := h.ListedNamespace(file, srcRoots[0])
	if o.Kind == "Kustomization" {
		// Its namespace defaults where it is read (Kustomization).
		ns := cmp.Or(o.Namespace, listed)
		f := e.Kustomization(h, d, nil, ns, srcRoots)
		return source.FluxObject{Namespace: ns, Unit: &f}
	}
	ns := cmp.Or(o.Namespace, listed, source.FluxOwnSource)
	spec := source.Lookup(d.Node, "spec")
	switch o.Kind {
	case "GitRepository":
		rev, semver := revision(source.Lookup(spec, "ref"))
		return source.FluxObject{Namespace: ns, GitRepository: true, Revision: rev, Semver: semver, URL: source.StringField(spec, "url")}
	case "OCIRepository":
		return source.FluxObject{Namespace: ns, OCIRepository: true, URL: source.StringField(spec, "url")}
	case "FluxInstance":
		return source.FluxObject{Namespace: ns, SyncsGit: source.StringField(source.Lookup(spec, "sync"), "kind") == "GitRepository"}
	case "ArtifactGenerator":
		return source.FluxObject{Namespace: ns, Cuts: artifactGenerator(d, ns)}
	}
	return source.FluxObject{}
}
