package source

import (
	"bytes"
	"cmp"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/resmap"

	"keyhole.dev/keyhole/diag"
)

// A repository deployed by Flux says what a cluster applies in Flux's own
// objects: each Kustomization (kustomize.toolkit.fluxcd.io) builds its
// spec.path, relative to the root of the source it names, with
// kustomize-controller's semantics. keyhole reads such a repository the
// same way: the Flux engine (source/flux), with the library
// kustomize-controller builds with (github.com/fluxcd/pkg/kustomize),
// generates the kustomization Flux generates (targetNamespace,
// namePrefix, nameSuffix, patches, images, components; one listing the
// path's files where the path has none) and applies postBuild
// substitution; the loader builds it with load restrictions off between
// the two. See docs/inputs.md.

// fluxGroup is the API group of Flux's Kustomization.
const fluxGroup = "kustomize.toolkit.fluxcd.io/"

// sourceGroup is the API group of Flux's sources (GitRepository).
const sourceGroup = "source.toolkit.fluxcd.io/"

// artifactGenGroup is the API group of Flux's ArtifactGenerator.
const artifactGenGroup = "source.extensions.fluxcd.io/"

// fluxInstanceGroup is the API group of flux-operator's FluxInstance,
// which installs Flux and may declare the source a cluster syncs from.
const fluxInstanceGroup = "fluxcd.controlplane.io/"

// CodeInputNotDeployed is reported at a file that names keyhole's kinds
// and lies under the path of a GitOps engine's unit that does not deploy
// it: the cluster never sees it, and keyhole does not check it as if it
// did.
const CodeInputNotDeployed = "InputNotDeployed"

// isFluxObject reports whether engineUnits' scan gives o to the Flux
// engine (Flux.Object): a Kustomization, HelmRelease, GitRepository,
// OCIRepository, FluxInstance or ArtifactGenerator.
func isFluxObject(o diag.Object) bool {
	switch {
	case strings.HasPrefix(o.APIVersion, fluxGroup):
		return o.Kind == "Kustomization"
	case strings.HasPrefix(o.APIVersion, helmReleaseGroup):
		return o.Kind == "HelmRelease"
	case strings.HasPrefix(o.APIVersion, sourceGroup):
		return o.Kind == "GitRepository" || o.Kind == "OCIRepository"
	case strings.HasPrefix(o.APIVersion, fluxInstanceGroup):
		return o.Kind == "FluxInstance"
	case strings.HasPrefix(o.APIVersion, artifactGenGroup):
		return o.Kind == "ArtifactGenerator"
	}
	return false
}

// fluxScan is what engineUnits' scan keeps of Flux's objects for the
// phases after it: the GitRepositories, and the HelmReleases, read once
// every Kustomization is known.
type fluxScan struct {
	repos, releases []FluxDecl
}

// scanFlux records what the Flux engine reads of the Flux object d that
// engineUnits' scan found in file, under srcRoots: a GitRepository or
// HelmRelease in scan, the other sources and the ExternalArtifacts in
// the loader, which the phases after the scan read. It returns the unit a Kustomization makes as written. With no
// Flux engine, a Kustomization's unit and a HelmRelease's say so.
func (l *loader) scanFlux(d *Document, file string, srcRoots []string, scan *fluxScan) []engineFound {
	o := d.Object()
	var r FluxObject
	var f engineFound
	unit := false
	switch {
	case l.opts.Engines.Flux != nil:
		r = l.opts.Engines.Flux.Object(Host{l}, d, file, srcRoots)
		if r.Unit != nil {
			f, unit = found(*r.Unit), true
		}
	case o.Kind == "Kustomization":
		r.Namespace = cmp.Or(o.Namespace, l.listedNamespace(file, srcRoots[0]))
		f, unit = l.fluxUnit(d, nil, r.Namespace, srcRoots), true
	case o.Kind == "HelmRelease":
		r.Release = true
	}
	switch {
	case unit:
		l.fluxHeld = true
		f.flux = &FluxDecl{Doc: d, File: file, Namespace: r.Namespace, SrcRoots: srcRoots}
		return []engineFound{f}
	case r.Release:
		// Read once every Flux Kustomization is known: the one applying
		// it may set its namespace.
		scan.releases = append(scan.releases, FluxDecl{Doc: d, File: file, SrcRoots: srcRoots})
	case r.GitRepository:
		scan.repos = append(scan.repos, FluxDecl{Doc: d, File: file, Namespace: r.Namespace, SrcRoots: srcRoots})
		l.gitRef(r.Namespace, o.Name, r)
	case r.OCIRepository:
		if l.artifactURLs == nil {
			l.artifactURLs = map[string]string{}
		}
		l.artifactURLs[r.Namespace+"/"+o.Name] = r.URL
	case r.SyncsGit:
		if l.fluxInstances == nil {
			l.fluxInstances = map[string]bool{}
		}
		l.fluxInstances[r.Namespace] = true
	}
	// Of two artifacts of one namespace and name, the first.
	for _, cut := range r.Cuts {
		if l.artifacts == nil {
			l.artifacts = map[string]*ArtifactCut{}
		}
		key := r.Namespace + "/" + cut.Artifact
		if _, dup := l.artifacts[key]; !dup {
			l.artifacts[key] = &cut
		}
	}
	return nil
}

// fluxScanned is the Flux phase that follows engineUnits' scan: the
// repository's own sources known (Flux.OwnSources), it reads again each
// Kustomization the scan skipped as built from another source, starts
// reading the ConfigMaps and Secrets the substitutions will read, and
// reads each Kustomization another Flux unit applies as that unit's
// build writes it (fluxApplied).
func (l *loader) fluxScanned(found []engineFound, scan fluxScan, patches []kustomizePatch) ([]engineFound, diag.List) {
	if l.findOwnSources(found, scan.repos) || len(l.artifacts) > 0 || len(l.gitRefs) > 0 || len(l.fluxInstances) > 0 || len(l.artifactURLs) > 0 {
		// Read again what was skipped as built from another source (or
		// an ExternalArtifact of a generator found after it, a
		// GitRepository or OCIRepository declared after it).
		for i, f := range found {
			if f.flux != nil && (f.skip != "" || f.unread != "") {
				ef := l.fluxUnit(f.flux.Doc, nil, f.flux.Namespace, f.flux.SrcRoots)
				ef.flux = f.flux
				ef.declared(f.flux.File)
				found[i] = ef
			}
		}
	}
	l.anyFlux = slices.ContainsFunc(found, func(f engineFound) bool { return f.unit != nil && f.unit.Flux != nil })
	l.readRepoObjectsAhead(found)
	l.scope = l.newFluxScope(foundUnits(found))
	return l.fluxApplied(found, patches)
}

// fluxFound is the Flux phase that follows the engines' reading of what
// applies what: the Kustomizations Flux does not apply become notes
// (fluxReach), the units building from a pinned revision of the
// repository's own GitRepository are pinned (fluxPins), and the
// HelmReleases are read (fluxReleases).
func (l *loader) fluxFound(found []engineFound, scan fluxScan, patches []kustomizePatch, ds *diag.List) []engineFound {
	found, entries := l.fluxReach(found)
	l.fluxPins(found)
	return l.fluxReleases(found, scan.releases, entries, patches, ds)
}

// fluxUnits is the Flux phase once the units are known and each
// engine has named its clusters: the render's cluster is the caller's
// (renderedCluster), the scope of the substitutions is the final one,
// and a HelmRelease deploys to the cluster of the Flux unit applying
// it (Flux.ReleaseClusters).
func (l *loader) fluxUnits(found []engineFound, units []*Unit) {
	renderedCluster(found, units)
	l.scope = l.newFluxScope(units)
	l.scope.final = true
	if l.opts.Engines.Flux != nil {
		l.opts.Engines.Flux.ReleaseClusters(Host{l}, units)
	}
}

// findOwnSources sets l.ownSources: the GitRepositories of repos that
// the Flux engine takes for this repository's own (Flux.OwnSources),
// given the Kustomizations of found. It reports whether it found any.
func (l *loader) findOwnSources(found []engineFound, repos []FluxDecl) bool {
	if l.opts.Engines.Flux == nil {
		return false // no Flux unit is built: none builds from a source
	}
	var ks []FluxDecl
	for _, f := range found {
		if f.flux != nil {
			ks = append(ks, *f.flux)
		}
	}
	for _, s := range l.opts.Engines.Flux.OwnSources(Host{l}, repos, ks) {
		if l.ownSources == nil {
			l.ownSources = map[string]bool{}
		}
		l.ownSources[s.Namespace+"/"+s.Name] = true
	}
	return len(l.ownSources) > 0
}

// fluxUnit is the unit the Flux Kustomization d, applied in namespace
// ns, makes, as the Flux engine reads it (source.Flux's Kustomization):
// its fields from vals, the object as the Flux unit applying it builds
// it (fluxApplied), or from d itself when vals is nil.
func (l *loader) fluxUnit(d *Document, vals *yaml.Node, ns string, srcRoots []string) engineFound {
	if l.opts.Engines.Flux == nil {
		// Its path is no one else's to read: what Flux applies of it is
		// not known, and nothing of it is taken as checked.
		f := engineFound{pos: d.Pos, err: errNoFlux.Error()}
		if dir, _ := l.enginePath(stringField(Lookup(d.Node, "spec"), "path"), srcRoots); dir != "" {
			f.claim = []string{dir}
		}
		return f
	}
	return found(l.opts.Engines.Flux.Kustomization(Host{l}, d, vals, ns, srcRoots))
}

// listedNamespace is the namespace the kustomization that lists the file
// abs sets (kustomize's namespace field), or "": the namespace a Flux
// Kustomization written without one is applied in. The kustomization is
// the nearest one, up to root, whose resources name the file.
func (l *loader) listedNamespace(abs, root string) string {
	for dir := filepath.Dir(abs); within(root, dir); dir = filepath.Dir(dir) {
		if k := kustomizationFile(l.fsys, dir); k != "" {
			n := kustomizationNode(l.fsys, k)
			rel := filepath.ToSlash(relOrAbs(dir, abs))
			for _, r := range stringList(Lookup(n, "resources")) {
				if path.Clean(r) == rel {
					return stringField(n, "namespace")
				}
			}
		}
		if dir == root || filepath.Dir(dir) == dir {
			break
		}
	}
	return ""
}

// fluxClusters says which cluster each Flux unit of units deploys to, as
// the Flux engine tells it (Flux.Clusters).
func (l *loader) fluxClusters(units []*Unit) {
	if l.opts.Engines.Flux != nil {
		l.opts.Engines.Flux.Clusters(Host{l}, units)
	}
}

// repoObjects are the ConfigMaps and Secrets a repository holds in the
// clear, read once per Load however many Flux units substitute from
// them.
type repoObjects struct {
	byKey map[[3]string][]Held
	// byName holds the objects of each kind and name, for an object
	// whose namespace a kustomization sets where the file names none.
	byName map[[2]string][]Held
}

// substitute applies the Flux unit u's postBuild substitution to what
// kustomize built of its path, as the Flux engine does it after the
// build (Flux.Substitute).
func (l *loader) substitute(u *Unit, m resmap.ResMap) error {
	if l.opts.Engines.Flux == nil {
		return errNoFlux
	}
	return l.opts.Engines.Flux.Substitute(Host{l}, u, m)
}

// fluxManifest is the kustomization Flux builds u's path with, and the
// path it stands at, as the Flux engine generates it.
func (l *loader) fluxManifest(u *Unit) (data []byte, kfile string, err error) {
	if l.opts.Engines.Flux == nil {
		return nil, "", errNoFlux
	}
	return l.opts.Engines.Flux.Manifest(Host{l}, u)
}

// repoObjects returns the ConfigMaps and Secrets of the repository at
// root, reading them on the first call for that root. Calls may come from
// several goroutines (readRepoObjects, the unit builds' substitutions);
// one reads, the others wait for it.
func (l *loader) repoObjects(root string) *repoObjects {
	l.repoObjsMu.Lock()
	read := l.repoObjs[root]
	if read == nil {
		read = sync.OnceValue(func() *repoObjects { return l.readRepoObjects(root) })
		if l.repoObjs == nil {
			l.repoObjs = map[string]func() *repoObjects{}
		}
		l.repoObjs[root] = read
	}
	l.repoObjsMu.Unlock()
	return read()
}

// readRepoObjectsAhead starts reading the ConfigMaps and Secrets that
// the found Flux units' substitutions will read: the Kustomizations
// that apply other Kustomizations are built next, one at a time, and a
// core is free meanwhile. Load waits for the reads before it returns.
func (l *loader) readRepoObjectsAhead(found []engineFound) {
	started := map[string]bool{}
	for _, f := range found {
		u := f.unit
		if u == nil || u.Flux == nil || started[u.Flux.SourceRoot] {
			continue
		}
		if _, ok, _ := unstructured.NestedMap(u.Flux.Object.Object, "spec", "postBuild"); ok {
			root := u.Flux.SourceRoot
			started[root] = true
			l.background.Go(func() { l.repoObjects(root) })
		}
	}
}

func (l *loader) readRepoObjects(root string) *repoObjects {
	r := &repoObjects{byKey: map[[3]string][]Held{}, byName: map[[2]string][]Held{}}
	for _, f := range walkAll(l.fsys, root, &l.paths) {
		data := l.sniff(f, []byte("kind"))
		if data == nil || !(bytes.Contains(data, []byte("ConfigMap")) || bytes.Contains(data, []byte("Secret"))) {
			continue
		}
		docs, _ := Parse(f, data)
		for _, d := range docs {
			o := d.Object()
			if o.APIVersion != "v1" || (o.Kind != "ConfigMap" && o.Kind != "Secret") || Lookup(d.Node, "sops") != nil {
				continue
			}
			k := [3]string{o.Kind, cmp.Or(o.Namespace, "default"), o.Name}
			r.byKey[k] = append(r.byKey[k], Held{Doc: d, File: f})
			n := [2]string{o.Kind, o.Name}
			r.byName[n] = append(r.byName[n], Held{Doc: d, File: f})
		}
	}
	return r
}

// prepareFlux readies the build of the Flux unit u as kustomize-controller
// does it: the kustomization Flux generates, or why there is nothing to
// build.
func (l *loader) prepareFlux(u *Unit) engineJob {
	j := engineJob{u: u, named: l.unitName(u)}
	if !l.engineUnitMatters(u) {
		j.note = skipped(u.Decl, "Flux Kustomization "+strings.TrimPrefix(u.Name, "flux:")+" not built: nothing under its path or in its components names keyhole's kinds or declares a Secret")
		return j
	}
	if b := l.applying[u]; b != nil && (b.run.m != nil || b.run.err != nil) {
		j.build, j.built, j.run = true, true, b.run
		return j
	}
	kdata, kfile, err := l.fluxManifest(u)
	if err != nil {
		j.note = diag.Diagnostic{Code: CodeKustomizeBuildFailed, Severity: diag.Error, Pos: u.Decl, Units: []string{u.Name},
			Message: fmt.Sprintf("Flux cannot generate the kustomization of %s: %v", strings.TrimPrefix(u.Name, "flux:"), err)}
		return j
	}
	j.bo = l.buildOptions(u.Root)
	j.bo.KFile, j.bo.KData = filepath.Clean(kfile), kdata
	if _, ok, _ := unstructured.NestedMap(u.Flux.Object.Object, "spec", "postBuild"); ok {
		l.repoObjects(u.Flux.SourceRoot) // read now: the builds that substitute share it
	}
	j.build = true
	return j
}

// declaredUnder reports whether u's Kustomization is declared in a file
// under v's path.
func declaredUnder(u, v *Unit) bool {
	return within(v.Root, u.declFile)
}

// renderedCluster makes the cluster that applies keyhole's render the
// cluster keyhole's caller means (""): the loose files are the inputs
// `keyhole render` writes into a directory a Flux Kustomization applies
// (flux.rendered), so they deploy to that Kustomization's cluster, and
// read the Secrets the other units of that cluster deploy. That cluster
// is the one of the Flux unit whose path holds the Kustomization's
// file; where the render is applied by units of several clusters, or of
// none of the units', the clusters stay as they are.
func renderedCluster(found []engineFound, units []*Unit) {
	clusters := map[string]bool{}
	for _, f := range found {
		if !f.rendered || f.flux == nil {
			continue
		}
		var by *Unit
		for _, v := range units {
			if v.Flux != nil && within(v.Root, f.flux.File) && (by == nil || len(v.Root) > len(by.Root)) {
				by = v
			}
		}
		if by == nil {
			return
		}
		clusters[by.Cluster] = true
	}
	if len(clusters) != 1 {
		return
	}
	for c := range clusters {
		if c == "" {
			return
		}
		for _, u := range units {
			if u.Cluster == c {
				u.Cluster = ""
			}
		}
	}
}
