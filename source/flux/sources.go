package flux

import (
	"cmp"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"keyhole.dev/keyhole/source"
)

// A Flux Kustomization's spec.path is relative to the root of the
// artifact its sourceRef names. Only one artifact is this repository's
// git root as it stands: the GitRepository a cluster syncs this
// repository with (source.Host's OwnFluxSource). An OCIRepository,
// Bucket or ExternalArtifact is an artifact someone made (flux push
// artifact --path=./kubernetes, an ArtifactGenerator), often of one
// directory of this repository, and another GitRepository is another
// repository or branch. keyhole.yaml's flux.sources says which
// directory of this repository is such a source's root, as flux-local's
// --sources does; a Kustomization building from a source it does not
// map is not read, and a FluxSourceUnmapped warning says so, and what
// would make it readable.
//
// An ArtifactGenerator's ExternalArtifact whose every copy takes a
// directory of one source and places it at the same path is that
// source's tree, cut down: a Kustomization building from it reads its
// spec.path where it reads the source's, and keyhole builds it there
// when the source is this repository or one keyhole.yaml's flux.sources
// maps. Any other copy (a glob of files, a directory placed elsewhere,
// an exclude) is said in a FluxSourceUnmapped warning naming the
// flux.sources entry that would make the artifact readable.

// sourceRoots is where the Flux Kustomization ns/name, whose path is
// rel, reads its path from: the directory keyhole.yaml's flux.sources
// maps its source to; what an ArtifactGenerator cuts out of a source
// keyhole reads, for an ExternalArtifact; srcRoots, the roots it was
// found under, for the repository's own GitRepository. Otherwise, or
// where an ExternalArtifact's cut is no directory of the repository,
// unread says why keyhole does not read it and what would make it
// readable.
func sourceRoots(h source.Host, ns, name string, from source.FluxSource, rel string, srcRoots []string) (roots []string, unread string) {
	if dir := h.MappedFluxSource(from); dir != "" {
		return []string{dir}, ""
	}
	if from.Kind == "ExternalArtifact" {
		if cut := h.ArtifactCut(from.Namespace, from.Name); cut != nil {
			return externalArtifact(h, cut, ns, name, from, rel, srcRoots)
		}
	}
	if !h.OwnFluxSource(from) {
		return nil, unmapped(h, ns, name, from, srcRoots[0])
	}
	return srcRoots, ""
}

// externalArtifact is where the Flux Kustomization ns/name reads the
// ExternalArtifact ref, which an ArtifactGenerator of the repository
// makes as cut says, from, building rel: the roots of the source it is
// cut from (srcRoots for this repository), or why it cannot be read (a
// FluxSourceUnmapped message).
func externalArtifact(h source.Host, cut *source.ArtifactCut, ns, name string, ref source.FluxSource, rel string, srcRoots []string) (roots []string, unread string) {
	refNs, refName := ref.Namespace, ref.Name
	entry := fmt.Sprintf("kind: ExternalArtifact, namespace: %s, name: %s, path: DIR", refNs, refName)
	if cut.Odd != "" {
		return nil, fmt.Sprintf("Flux Kustomization %s/%s builds from ExternalArtifact %s/%s, which ArtifactGenerator %s makes with a %s, which keyhole does not place in this repository's directories; so keyhole does not read it: to have it read, map the artifact to the directory of this repository that is its root in keyhole.yaml's flux.sources (%s)",
			ns, name, refNs, refName, cut.Generator, cut.Odd, entry)
	}
	p := strings.Trim(path.Clean("/"+rel), "/")
	if !slices.ContainsFunc(cut.Dirs, func(d string) bool { return d == "" || p == d || strings.HasPrefix(p, d+"/") }) {
		return nil, fmt.Sprintf("Flux Kustomization %s/%s builds from ExternalArtifact %s/%s, whose ArtifactGenerator %s copies %s of %s %s/%s into it, and its spec.path %q is not under them; so keyhole does not read it: to have it read, map the artifact to the directory of this repository that is its root in keyhole.yaml's flux.sources (%s)",
			ns, name, refNs, refName, cut.Generator, strings.Join(sourceDirs(cut), ", "), cut.Kind, cut.Namespace, cut.Name, rel, entry)
	}
	from := source.FluxSource{Kind: cut.Kind, Namespace: cut.Namespace, Name: cut.Name}
	if dir := h.MappedFluxSource(from); dir != "" {
		return under([]string{dir}, cut.Prefix), ""
	}
	if h.OwnFluxSource(from) {
		return under(srcRoots, cut.Prefix), ""
	}
	return nil, fmt.Sprintf("Flux Kustomization %s/%s builds from ExternalArtifact %s/%s, which ArtifactGenerator %s copies from %s %s/%s, path for path; that source's artifact is not this repository's git root, so keyhole does not read it: to have it read, map that source to the directory of this repository that is its root in keyhole.yaml's flux.sources (kind: %s, namespace: %s, name: %s, path: DIR)",
		ns, name, refNs, refName, cut.Generator, cut.Kind, cut.Namespace, cut.Name, cut.Kind, cut.Namespace, cut.Name)
}

// unmapped is what is said of the Flux Kustomization ns/name that builds
// from the source from, which is not this repository's git root and
// which keyhole.yaml does not map, in the repository at root: why
// keyhole does not read it, and a way to check it that works for what
// the source is (source.Host's FluxSourceIs).
func unmapped(h source.Host, ns, name string, from source.FluxSource, root string) string {
	kind, refNs, refName := from.Kind, from.Namespace, from.Name
	entry := fmt.Sprintf("keyhole.yaml's flux.sources (kind: %s, namespace: %s, name: %s, path: DIR)", kind, refNs, refName)
	head := fmt.Sprintf("Flux Kustomization %s/%s builds from %s %s/%s, ", ns, name, kind, refNs, refName)
	switch is, url, rev := h.FluxSourceIs(from, root); is {
	case source.FluxOtherRevision:
		return head + fmt.Sprintf("this repository (%s) at %s, not the revision keyhole reads; its spec.path is relative to that revision's root, so keyhole does not read it: to check it, run keyhole on a checkout of %s, or map the source to a directory holding that revision's tree (a git worktree of it) in %s",
			url, rev, rev, entry)
	case source.FluxSameRevision:
		return head + fmt.Sprintf("this repository (%s) at %s, the revision keyhole reads, but not by a name keyhole takes for it (%s); its spec.path is relative to the repository's root, so keyhole does not read it: to have it read, map the source to the repository's root directory in %s",
			url, rev, ownSourcesText(h), entry)
	case source.FluxOtherRepository:
		return head + fmt.Sprintf("another repository (%s) than this one (%s), which keyhole does not fetch; its spec.path is relative to that repository's root, so keyhole does not read it: to have it read, map the source to a directory holding a copy of that repository's tree (a submodule, a vendored copy) in %s",
			url, ownSourcesText(h), entry)
	case source.FluxOtherArtifact:
		return head + fmt.Sprintf("whose artifact (%s) is another project's: no remote of this repository names that path, and keyhole does not fetch artifacts, so it is out of reach and keyhole does not read it; only where a directory of this repository is what is pushed there, map the source to that directory in %s",
			url, entry)
	}
	why := "whose artifact is not this repository's git root"
	if kind == "GitRepository" {
		why = "another repository or branch than this one (" + ownSourcesText(h) + ")"
	}
	return head + why + "; its spec.path is relative to that artifact's root, so keyhole does not read it: to have it read, map the source to the directory of this repository that is its root in " + entry
}

// ownSourcesText names the GitRepositories source.Host's OwnFluxSource
// accepts, for a message.
func ownSourcesText(h source.Host) string {
	text := source.FluxOwnSource + "/" + source.FluxOwnSource + ", as Flux's bootstrap names it"
	if own := h.OwnFluxSources(); len(own) > 0 {
		text += ", or " + strings.Join(own, ", ") + ", which a Kustomization applying the file declaring it builds from"
	}
	return text
}

// under is roots with the slash-separated directory prefix joined to
// each: where an artifact's root is in its source ("" for the source's
// root).
func under(roots []string, prefix string) []string {
	if prefix == "" {
		return roots
	}
	out := make([]string, len(roots))
	for i, r := range roots {
		out[i] = filepath.Join(r, filepath.FromSlash(prefix))
	}
	return out
}

// sourceDirs are the directories of its source an artifact's copies
// take, as the source holds them.
func sourceDirs(cut *source.ArtifactCut) []string {
	out := make([]string, len(cut.Dirs))
	for i, d := range cut.Dirs {
		out[i] = cmp.Or(path.Join(cut.Prefix, d), ".")
	}
	return out
}
