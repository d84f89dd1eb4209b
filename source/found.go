package source

import (
	"maps"
	"slices"

	"keyhole.dev/keyhole/diag"
)

// Found is what an engine's object makes, as the engine's package reads
// it (source.Flux's Kustomization and HelmRelease): the deploy unit, or
// why it makes none. The loader says what is not a unit once, at Pos.
type Found struct {
	// Unit is the deploy unit the object makes; nil when it makes none.
	Unit *Unit
	// Pos is where the object, or the field a message is about, stands.
	Pos diag.Pos
	// Skip, when not empty, is why the object is out of reach (its
	// source is another repository, a chart keyhole does not fetch): an
	// InputSkipped note.
	Skip string
	// Unread, when not empty, is why a unit its engine applies is not
	// read (a Flux source keyhole.yaml does not map): a warning that
	// says what would make it readable.
	Unread string
	// Err is a mistake in the object that its engine would refuse it
	// for; Chart says it is about rendering a Helm chart.
	Err   string
	Chart bool
	// Rendered says the object applies the directory keyhole render
	// writes: Skip says so.
	Rendered bool
	// SrcRoot is the root of the source the unit's path is relative to;
	// DeclRoot, when set, the root of the repository declaring it, where
	// that is not SrcRoot (a source keyhole.yaml maps).
	SrcRoot, DeclRoot string
}

// found is f as the loader keeps it.
func found(f Found) engineFound {
	return engineFound{unit: f.Unit, pos: f.Pos, skip: f.Skip, unread: f.Unread, err: f.Err, helm: f.Chart,
		rendered: f.Rendered, srcRoot: f.SrcRoot, declRoot: f.DeclRoot}
}

// FluxOwnSource is the namespace and name Flux's bootstrap gives the
// GitRepository of the repository it syncs, and the namespace a Flux
// Kustomization written without one is applied in.
const FluxOwnSource = fluxOwnSource

// RenderMarker is the file keyhole render writes at the top of what it
// writes: a directory holding it is keyhole's output, not an input.
const RenderMarker = renderMarker

// MappedFluxSource is the directory (absolute) keyhole.yaml's
// flux.sources maps the Flux source s to, or "".
func (h Host) MappedFluxSource(s FluxSource) string {
	return h.l.mappedSource(s.Kind, s.Namespace, s.Name)
}

// ArtifactCut is what the repository's ArtifactGenerators say of the
// ExternalArtifact ns/name (the first of that name the scan found), or
// nil when none makes it. It is shared, so never to be changed.
func (h Host) ArtifactCut(ns, name string) *ArtifactCut { return h.l.artifacts[ns+"/"+name] }

// FluxSourceIs says what the Flux source s is, for the repository at
// root, as far as its declaration and the repository's remotes tell:
// with its url and, for a GitRepository of this repository, the revision
// it names.
func (h Host) FluxSourceIs(s FluxSource, root string) (is FluxSourceIs, url, rev string) {
	return h.l.sourceIs(s.Kind, s.Namespace, s.Name, root)
}

// OwnFluxSource reports whether the Flux source is this repository's own
// GitRepository: flux-system/flux-system, or one a Kustomization applying
// the file declaring it builds from.
func (h Host) OwnFluxSource(s FluxSource) bool { return h.l.ownSource(s.Kind, s.Namespace, s.Name) }

// FluxSourceDeclared reports whether the repository says where the Flux
// source s is: keyhole.yaml's flux.sources maps it, or the repository
// declares it (a GitRepository of that namespace and name, or a
// FluxInstance syncing a GitRepository, which flux-operator names after
// its namespace). Flux's bootstrap declares flux-system/flux-system
// beside the Kustomization syncing it; where the repository does not,
// OwnFluxSource takes it for this repository by its name alone.
func (h Host) FluxSourceDeclared(s FluxSource) bool {
	if h.l.mappedSource(s.Kind, s.Namespace, s.Name) != "" {
		return true
	}
	if s.Kind != "GitRepository" {
		return false
	}
	_, ok := h.l.gitRefs[s.Namespace+"/"+s.Name]
	return ok || s.Name == s.Namespace && h.l.fluxInstances[s.Namespace]
}

// OwnFluxSources are the GitRepositories, as namespace/name and sorted,
// that OwnFluxSource accepts besides flux-system/flux-system: those a
// Kustomization applying the file declaring them builds from.
func (h Host) OwnFluxSources() []string { return slices.Sorted(maps.Keys(h.l.ownSources)) }

// RenderedPath is the directory an engine object's path rel names among
// srcRoots when it is one keyhole render writes (keyhole.yaml names it,
// or it holds RenderMarker), else "".
func (h Host) RenderedPath(rel string, srcRoots []string) string {
	return h.l.renderedPath(rel, srcRoots)
}

// EnginePath resolves an engine object's path rel against srcRoots in
// order, as the engine resolves it against its source's root: the
// directory and the root it was found under, or "" when it names no
// directory of any. A path cannot leave its root.
func (h Host) EnginePath(rel string, srcRoots []string) (dir, root string) {
	return h.l.enginePath(rel, srcRoots)
}

// HelmChart reports whether the directory dir (absolute) is a Helm chart.
func (h Host) HelmChart(dir string) bool { return helmChartFile(h.l.fsys, dir) != "" }

// GeneratedValue is the value of key in the ConfigMap ns/name that the
// build of the Flux unit by writes (a configMapGenerator's, named as
// written or as the build renames it), as a controller reads it from the
// cluster; found is false when by is nil, its build fails or holds no
// such ConfigMap or key.
func (h Host) GeneratedValue(by *Unit, ns, name, key string) (value string, found bool) {
	return h.l.generatedValues(by, ns, name, key)
}

// AppliedBy is the unit whose build applies the object declaring u, when
// the loader found one (a Flux unit, or the Argo CD Application
// rendering an app of apps' chart), else nil.
func (h Host) AppliedBy(u *Unit) *Unit { return u.appliedBy }

// DeclaredIn is the file declaring the engine unit u (absolute, OS form).
func (h Host) DeclaredIn(u *Unit) string { return u.declFile }

// FluxEntry is the path of keyhole.yaml's flux.entries that holds file
// (absolute), or "".
func (h Host) FluxEntry(file string) string { return h.l.entryOf(file) }

// SourceRoot is the root of the repository holding abs: the enclosing
// git working tree (a commit's tree stands at its working tree's place),
// else abs itself.
func (h Host) SourceRoot(abs string) string { return h.l.sourceRoot(abs) }

// OutputDir is a unit name made into a directory inside render's output
// directory, for Unit.Dir.
func OutputDir(name string) string { return outputDir(name) }
