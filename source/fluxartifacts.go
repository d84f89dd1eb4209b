package source

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
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

// artifactCut is what an ArtifactGenerator says of one ExternalArtifact.
type artifactCut struct {
	gen string // the generator, namespace/name
	// kind, ns and name are the source its copies take from.
	kind, ns, name string
	// dirs are the directories (slash, relative; "" for the whole
	// source) the artifact holds, each at its place in the source.
	dirs []string
	// odd is the first copy that is not such a directory, as written.
	odd string
}

// readArtifactGenerator records the ExternalArtifacts the ArtifactGenerator
// d, in namespace ns, makes.
func (l *loader) readArtifactGenerator(d *Document, ns string) {
	spec := Lookup(d.Node, "spec")
	type src struct{ kind, ns, name string }
	sources := map[string]src{}
	if s := Lookup(spec, "sources"); s != nil && s.Kind == yaml.SequenceNode {
		for _, e := range s.Content {
			sources[stringField(e, "alias")] = src{stringField(e, "kind"), cmp.Or(stringField(e, "namespace"), ns), stringField(e, "name")}
		}
	}
	arts := Lookup(spec, "artifacts")
	if arts == nil || arts.Kind != yaml.SequenceNode {
		return
	}
	for _, a := range arts.Content {
		name := stringField(a, "name")
		if name == "" {
			continue
		}
		cut := &artifactCut{gen: ns + "/" + d.Object().Name}
		alias := ""
		copies := Lookup(a, "copy")
		if copies == nil || copies.Kind != yaml.SequenceNode || len(copies.Content) == 0 {
			cut.odd = "no copy"
		} else {
			for _, c := range copies.Content {
				from, to := stringField(c, "from"), stringField(c, "to")
				al, dir, ok := plainCopy(from, to)
				if ok && Lookup(c, "exclude") == nil && (alias == "" || al == alias) {
					if _, known := sources[al]; known {
						alias = al
						cut.dirs = append(cut.dirs, dir)
						continue
					}
				}
				cut.odd = fmt.Sprintf("copy from %q to %q", from, to)
				break
			}
		}
		if s, ok := sources[alias]; ok && cut.odd == "" {
			cut.kind, cut.ns, cut.name = s.kind, s.ns, s.name
		}
		if l.artifacts == nil {
			l.artifacts = map[string]*artifactCut{}
		}
		key := ns + "/" + name
		if _, dup := l.artifacts[key]; !dup {
			l.artifacts[key] = cut
		}
	}
}

// plainCopy reports whether a copy operation takes a directory of the
// source aliased al and places it at the same path of the artifact:
// from "@al/DIR/" or "@al/DIR/**" to "@artifact/DIR/"; dir is DIR, ""
// for the source's root.
func plainCopy(from, to string) (al, dir string, ok bool) {
	if !strings.HasPrefix(from, "@") {
		return "", "", false
	}
	al, rest, found := strings.Cut(from[1:], "/")
	if !found || al == "" {
		return "", "", false
	}
	rest = strings.TrimSuffix(rest, "**")
	if rest != "" && !strings.HasSuffix(rest, "/") || strings.ContainsAny(rest, "*?[{\\") {
		return "", "", false
	}
	dir = strings.Trim(path.Clean("/"+rest), "/")
	at, found := strings.CutPrefix(to, "@artifact/")
	if !found || strings.ContainsAny(at, "*?[{\\") || strings.Trim(path.Clean("/"+at), "/") != dir {
		return "", "", false
	}
	return al, dir, true
}

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
	if cut.odd != "" {
		return nil, fmt.Sprintf("Flux Kustomization %s/%s builds from ExternalArtifact %s/%s, which ArtifactGenerator %s makes with a %s, which keyhole does not place in this repository's directories; so keyhole does not read it: to have it read, map the artifact to the directory of this repository that is its root in keyhole.yaml's flux.sources (%s)",
			ns, name, refNs, refName, cut.gen, cut.odd, entry), true
	}
	p := strings.Trim(path.Clean("/"+rel), "/")
	if !slices.ContainsFunc(cut.dirs, func(d string) bool { return d == "" || p == d || strings.HasPrefix(p, d+"/") }) {
		return nil, fmt.Sprintf("Flux Kustomization %s/%s builds from ExternalArtifact %s/%s, whose ArtifactGenerator %s copies %s of %s %s/%s into it, and its spec.path %q is not under them; so keyhole does not read it: to have it read, map the artifact to the directory of this repository that is its root in keyhole.yaml's flux.sources (%s)",
			ns, name, refNs, refName, cut.gen, strings.Join(cut.dirs, ", "), cut.kind, cut.ns, cut.name, rel, entry), true
	}
	if dir := l.mappedSource(cut.kind, cut.ns, cut.name); dir != "" {
		return []string{dir}, "", true
	}
	if l.ownSource(cut.kind, cut.ns, cut.name) {
		return srcRoots, "", true
	}
	return nil, fmt.Sprintf("Flux Kustomization %s/%s builds from ExternalArtifact %s/%s, which ArtifactGenerator %s copies from %s %s/%s, path for path; that source's artifact is not this repository's git root, so keyhole does not read it: to have it read, map that source to the directory of this repository that is its root in keyhole.yaml's flux.sources (kind: %s, namespace: %s, name: %s, path: DIR)",
		ns, name, refNs, refName, cut.gen, cut.kind, cut.ns, cut.name, cut.kind, cut.ns, cut.name), true
}
