package source

import (
	"cmp"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Which directory a Flux Kustomization's source is, and what a source
// keyhole.yaml does not map is, the Flux engine asks the loader
// (source/flux's sources.go): the loader knows the repository's remotes,
// the sources the scan found and keyhole.yaml's flux.sources.
//
// keyhole.yaml's flux.entries names the files and directories that
// declare a cluster's entry Kustomizations, for a repository whose
// entries are not bootstrap's (a Kustomization whose path holds the file
// declaring it). A Flux Kustomization or HelmRelease that no entry
// reaches, through the chain of Kustomizations applying the files that
// declare them, is no deploy unit (fluxReach).

// CodeFluxSourceUnmapped is reported at a Flux Kustomization that builds
// from a source whose artifact keyhole cannot place in the repository:
// the unit is not read.
const CodeFluxSourceUnmapped = "FluxSourceUnmapped"

// readFluxConfig reads the flux field of the Config document d, whose
// directory is base, as the Flux engine reads it, into what the Config
// documents read before it say; it says each path that is not the
// repository's.
func (l *loader) readFluxConfig(d *Document, base string) {
	if l.opts.Engines.Flux == nil {
		return // no Flux unit is built: none reads the field
	}
	c, ds := l.opts.Engines.Flux.Config(Host{l}, d, base)
	l.diags = append(l.diags, ds...)
	for src, dir := range c.Sources {
		if l.flux.Sources == nil {
			l.flux.Sources = map[FluxSource]string{}
		}
		l.flux.Sources[src] = dir
	}
	l.flux.Rendered = append(l.flux.Rendered, c.Rendered...)
	l.flux.Entries = append(l.flux.Entries, c.Entries...)
}

// FluxSourceIs is what a Flux source keyhole.yaml does not map is, as far
// as its declaration and the repository's remotes tell (Host's
// FluxSourceIs).
type FluxSourceIs int

const (
	// FluxSourceUnknown: not declared, or nothing tells (a repository
	// with no remote, a Bucket, an OCIRepository naming this
	// repository's path, which its CI may push).
	FluxSourceUnknown FluxSourceIs = iota
	// FluxOtherRevision is a GitRepository of this repository (its url
	// one of the remotes, or its own GitRepository's) at another
	// revision than the one keyhole reads: another branch's tree.
	FluxOtherRevision
	// FluxSameRevision is such a GitRepository at the revision keyhole
	// reads.
	FluxSameRevision
	// FluxOtherRepository is a GitRepository whose url is none of this
	// repository's.
	FluxOtherRepository
	// FluxOtherArtifact is an OCIRepository whose url names no path of
	// this repository's remotes: another project's artifact (Flux's own
	// flux-manifests, a tenant's).
	FluxOtherArtifact
)

// sourceIs says what the Flux source kind ns/name is, for the
// repository at root, with its url and, for a GitRepository of this
// repository, the revision it names.
func (l *loader) sourceIs(kind, ns, name, root string) (is FluxSourceIs, url, rev string) {
	remotes := l.revsAt(root).remotes
	own := map[string]bool{}
	for k := range remotes {
		own[k] = true
	}
	ownRevs := map[string]bool{}
	if b := l.revsAt(root).branch; b != "" {
		ownRevs[b] = true
	}
	for key, ref := range l.gitRefs {
		if ns, name, _ := strings.Cut(key, "/"); l.ownSource("GitRepository", ns, name) {
			if ref.url != "" {
				own[repoKey(ref.url, "")] = true
			}
			if ref.rev != "" {
				ownRevs[ref.rev] = true
			}
		}
	}
	switch kind {
	case "GitRepository":
		ref, ok := l.gitRefs[ns+"/"+name]
		if !ok || ref.url == "" || len(own) == 0 {
			return FluxSourceUnknown, "", ""
		}
		if !own[repoKey(ref.url, "")] {
			return FluxOtherRepository, ref.url, ""
		}
		rev = cmp.Or(ref.rev, "its default branch")
		if ownRevs[ref.rev] && !ref.semver {
			return FluxSameRevision, ref.url, rev
		}
		return FluxOtherRevision, ref.url, rev
	case "OCIRepository":
		url := l.artifactURLs[ns+"/"+name]
		if url == "" || len(remotes) == 0 {
			return FluxSourceUnknown, "", ""
		}
		path := "/" + strings.TrimSuffix(repoKey(url, ""), "@HEAD") + "/"
		for k := range remotes {
			_, repo, ok := strings.Cut(strings.TrimSuffix(k, "@HEAD"), "/")
			if ok && strings.Contains(path, "/"+repo+"/") {
				return FluxSourceUnknown, "", "" // this repository's path: its CI may push it
			}
		}
		return FluxOtherArtifact, url, ""
	}
	return FluxSourceUnknown, "", ""
}

// fluxEntry reports whether the Flux Kustomization of found f is a
// cluster's entry: its unit's path holds (and its build applies) the
// file declaring it, as bootstrap's flux-system does, or keyhole.yaml's
// flux.entries names its file or a directory above it.
func (l *loader) fluxEntry(f engineFound) bool {
	if f.flux == nil {
		return false
	}
	if l.entryOf(f.flux.File) != "" {
		return true
	}
	u := f.unit
	return u != nil && u.Flux != nil && within(u.Root, f.flux.File) && l.holds(u, f.flux.File)
}

// entryOf is the path of keyhole.yaml's flux.entries that holds file
// (absolute), or "".
func (l *loader) entryOf(file string) string {
	for _, e := range l.flux.Entries {
		if file != "" && within(e, file) {
			return e
		}
	}
	return ""
}

// fluxReach turns into notes, in place, the Flux Kustomizations of found
// that Flux does not apply: one under a Flux unit's path that its
// kustomization does not list, and, where the repository has cluster
// entries (fluxEntry), one that no entry reaches through the chain of
// units applying the files that declare them (an example in a project's
// docs). Without entries, every other Kustomization stays a unit, so
// that keyhole is never blind. It reports whether there are entries. A
// Kustomization that several units apply, one of them reached, loses
// only the units of those not reached.
func (l *loader) fluxReach(found []engineFound) ([]engineFound, bool) {
	reached := make([]bool, len(found))
	var queue []*Unit
	for i, f := range found {
		if l.fluxEntry(f) {
			reached[i] = true
			if f.unit != nil {
				queue = append(queue, f.unit)
			}
		}
	}
	entries := len(queue) > 0 || slices.Contains(reached, true)
	if entries {
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for i, f := range found {
				if reached[i] || f.flux == nil || f.unit == p {
					continue
				}
				if within(p.Root, f.flux.File) && l.holds(p, f.flux.File) || !within(p.Root, f.flux.File) && l.reached(p)[f.flux.File] {
					reached[i] = true
					if f.unit != nil {
						queue = append(queue, f.unit)
					}
				}
			}
		}
	}
	someReached := map[*FluxDecl]bool{}
	for i, f := range found {
		if f.flux != nil && reached[i] {
			someReached[f.flux] = true
		}
	}
	drop := map[int]bool{}
	note := map[*FluxDecl]string{}
	for i, f := range found {
		if f.flux == nil || reached[i] {
			continue
		}
		if someReached[f.flux] {
			drop[i] = true // another unit applying it is reached
			continue
		}
		n, seen := note[f.flux]
		if !seen {
			what := "Flux Kustomization " + cmp.Or(f.flux.Namespace, fluxOwnSource) + "/" + f.flux.Doc.Object().Name
			switch by := l.unlisting(f.flux.File, found, func(g engineFound) bool { return g.flux == f.flux }); {
			case by != nil:
				n = what + " lies under the path of Flux Kustomization " + strings.TrimPrefix(by.Name, "flux:") + ", whose kustomization does not list its file: Flux does not apply it, so it is no deploy unit"
			case entries:
				n = what + " is applied by no cluster's entry (a Kustomization whose path holds the file declaring it, as bootstrap's flux-system, or one in a file keyhole.yaml's flux.entries names) nor by a Kustomization they apply: an example, not a deployment, so it is no deploy unit"
			}
			note[f.flux] = n
			if n != "" {
				found[i] = engineFound{pos: f.flux.Doc.Pos, skip: n}
				continue
			}
		}
		if n != "" {
			drop[i] = true // said once, at its first unit
		}
	}
	if len(drop) > 0 {
		kept := found[:0]
		for i, f := range found {
			if !drop[i] {
				kept = append(kept, f)
			}
		}
		found = kept
	}
	return found, entries
}

// unlisting is a Flux unit of found (other than those self takes) whose
// path holds file but whose build does not apply it, when no Flux unit
// applies it; else nil.
func (l *loader) unlisting(file string, found []engineFound, self func(engineFound) bool) *Unit {
	if len(l.appliers(file, found, self, fluxApplying)) > 0 {
		return nil
	}
	for _, f := range found {
		if u := f.unit; u != nil && u.Flux != nil && (self == nil || !self(f)) && within(u.Root, file) {
			return u
		}
	}
	return nil
}

// fluxScope says which Flux units deploy a file and which cluster each
// belongs to, for substitution (heldFor.lookup): a unit's cluster is
// the top of the chain of units applying the files that declare them
// (fluxParent). It is made when the units are known, before builds run
// in parallel, and only read after.
type fluxScope struct {
	units []*Unit
	reads map[*Unit]buildFiles
	tops  map[*Unit]*Unit
	// keys name each unit's cluster as the Flux engine does
	// (Flux.Clusters); final says it has, and a unit's Cluster is its
	// key.
	keys  map[*Unit]string
	final bool
	l     *loader
}

// newFluxScope is the scope of the Flux units of units.
func (l *loader) newFluxScope(units []*Unit) *fluxScope {
	s := &fluxScope{reads: map[*Unit]buildFiles{}}
	for _, u := range units {
		if u != nil && u.Flux != nil {
			s.units = append(s.units, u)
			s.reads[u] = l.buildReads(u)
		}
	}
	s.tops = map[*Unit]*Unit{}
	for _, u := range s.units {
		s.tops[u] = s.top(u)
	}
	s.l = l
	s.keys = map[*Unit]string{}
	for _, u := range s.units {
		s.keys[u] = s.key(u)
	}
	return s
}

// key names the cluster of u as the Flux engine names it
// (Flux.Cluster): the top of its chain of applying units is the first
// that names its own cluster (kubeConfig), else the last.
func (s *fluxScope) key(u *Unit) string {
	if s.final {
		return u.Cluster
	}
	if k, ok := s.keys[u]; ok {
		return k
	}
	top, seen := u, map[*Unit]bool{u: true}
	for top.Cluster == "" {
		p := s.parent(top)
		if p == nil || seen[p] {
			break
		}
		seen[p] = true
		top = p
	}
	if s.l.opts.Engines.Flux == nil {
		return "" // no Flux unit is built: none substitutes
	}
	return s.l.opts.Engines.Flux.Cluster(Host{s.l}, u, top)
}

// top is the unit at the top of u's chain of applying units.
func (s *fluxScope) top(u *Unit) *Unit {
	if t := s.tops[u]; t != nil {
		return t
	}
	seen := map[*Unit]bool{u: true}
	for p := s.parent(u); p != nil && !seen[p]; p = s.parent(u) {
		seen[p] = true
		u = p
	}
	return u
}

// parent is the Flux unit applying the file that declares u: the one
// fluxApplied found, else the deepest whose path holds it, else the
// first whose build reaches it from outside its path; nil for none.
func (s *fluxScope) parent(u *Unit) *Unit {
	if u.appliedBy != nil && u.appliedBy.Flux != nil {
		return u.appliedBy
	}
	var best *Unit
	for _, v := range s.units {
		if v != u && declaredUnder(u, v) && (best == nil || len(v.Root) > len(best.Root)) {
			best = v
		}
	}
	if best != nil {
		return best
	}
	for _, v := range s.units {
		if v != u && s.reads[v].outside[u.declFile] {
			return v
		}
	}
	return nil
}

// deploys reports whether a unit of u's cluster deploys file (same), and
// whether any Flux unit does.
func (s *fluxScope) deploys(u *Unit, file string) (same, deployed bool) {
	top := s.top(u)
	for _, v := range s.units {
		r := s.reads[v]
		if !(r.inside[file] || r.outside[file] || r.all && within(v.Root, file)) {
			continue
		}
		deployed = true
		if s.top(v) == top || s.key(v) == s.key(u) {
			return true, true
		}
	}
	return false, deployed
}

// renderedPath says whether the Flux path rel, relative to one of
// srcRoots, is a directory keyhole render writes: one keyhole.yaml's
// flux.rendered names (it need not exist before the first render), or
// one holding render's marker file. Such a path is keyhole's output, not
// its input: the Kustomization applying it is no unit to check.
func (l *loader) renderedPath(rel string, srcRoots []string) string {
	clean := path.Clean("/" + filepath.ToSlash(rel))
	for _, r := range srcRoots {
		p := filepath.Join(r, filepath.FromSlash(clean))
		if slices.Contains(l.flux.Rendered, p) {
			return p
		}
		if fi, err := l.fsys.Stat(filepath.Join(p, renderMarker)); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}
