package source

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// An ArtifactGenerator (source.extensions.fluxcd.io) cuts ExternalArtifacts
// out of other Flux sources: each artifact is the files its copy
// operations take from a source ("@repo/apps/x/**") and place in the
// artifact ("@artifact/apps/x/"). Where every copy of an artifact takes a
// directory of one source and places it at the same path, the artifact
// is that source's tree, cut down: a Kustomization building from it
// reads its spec.path where it reads the source's, and keyhole builds it
// there when the source is this repository or one keyhole.yaml's
// flux.sources maps. Any other copy (a glob of files, a directory placed
// elsewhere, an exclude) is said in a FluxSourceUnmapped warning naming
// the flux.sources entry that would make the artifact readable.

// artifactGenGroup is the API group of Flux's ArtifactGenerator.
const artifactGenGroup = "source.extensions.fluxcd.io/"

// fluxInstanceGroup is the API group of flux-operator's FluxInstance,
// which installs Flux and may declare the source a cluster syncs from.
const fluxInstanceGroup = "fluxcd.controlplane.io/"

// externalArtifact is where the Flux Kustomization ns/name reads the
// ExternalArtifact refNs/refName from, building rel: the roots of the
// source it is cut from (srcRoots for this repository), or why it cannot
// be read (a FluxSourceUnmapped message). ok is false when no
// ArtifactGenerator of the repository makes the artifact.
func (l *loader) externalArtifact(ns, name, refNs, refName, rel string, srcRoots []string) (roots []string, unread string, ok bool) {
	cut := l.artifacts[refNs+"/"+refName]
	if cut == nil {
		return nil, "", false
	}
	entry := fmt.Sprintf("kind: ExternalArtifact, namespace: %s, name: %s, path: DIR", refNs, refName)
	if cut.Odd != "" {
		return nil, fmt.Sprintf("Flux Kustomization %s/%s builds from ExternalArtifact %s/%s, which ArtifactGenerator %s makes with a %s, which keyhole does not place in this repository's directories; so keyhole does not read it: to have it read, map the artifact to the directory of this repository that is its root in keyhole.yaml's flux.sources (%s)",
			ns, name, refNs, refName, cut.Generator, cut.Odd, entry), true
	}
	p := strings.Trim(path.Clean("/"+rel), "/")
	if !slices.ContainsFunc(cut.Dirs, func(d string) bool { return d == "" || p == d || strings.HasPrefix(p, d+"/") }) {
		return nil, fmt.Sprintf("Flux Kustomization %s/%s builds from ExternalArtifact %s/%s, whose ArtifactGenerator %s copies %s of %s %s/%s into it, and its spec.path %q is not under them; so keyhole does not read it: to have it read, map the artifact to the directory of this repository that is its root in keyhole.yaml's flux.sources (%s)",
			ns, name, refNs, refName, cut.Generator, strings.Join(cut.Dirs, ", "), cut.Kind, cut.Namespace, cut.Name, rel, entry), true
	}
	if dir := l.mappedSource(cut.Kind, cut.Namespace, cut.Name); dir != "" {
		return []string{dir}, "", true
	}
	if l.ownSource(cut.Kind, cut.Namespace, cut.Name) {
		return srcRoots, "", true
	}
	return nil, fmt.Sprintf("Flux Kustomization %s/%s builds from ExternalArtifact %s/%s, which ArtifactGenerator %s copies from %s %s/%s, path for path; that source's artifact is not this repository's git root, so keyhole does not read it: to have it read, map that source to the directory of this repository that is its root in keyhole.yaml's flux.sources (kind: %s, namespace: %s, name: %s, path: DIR)",
		ns, name, refNs, refName, cut.Generator, cut.Kind, cut.Namespace, cut.Name, cut.Kind, cut.Namespace, cut.Name), true
}
