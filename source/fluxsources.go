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
// that Flux does not apply, as the Flux engine says (Flux.Reach), and
// drops the units of those it says nothing more of. It reports whether
// the repository has cluster entries.
func (l *loader) fluxReach(found []engineFound) ([]engineFound, bool) {
	if l.opts.Engines.Flux == nil {
		return found, false // no Flux unit: none applies another, nor is an entry
	}
	var ks []FluxFound
	var at []int
	for i, f := range found {
		if f.flux != nil {
			ks = append(ks, FluxFound{Decl: f.flux, Unit: f.unit})
			at = append(at, i)
		}
	}
	rs, entries := l.opts.Engines.Flux.Reach(Host{l}, ks)
	drop := map[int]bool{}
	for j, r := range rs {
		switch {
		case r.Drop:
			drop[at[j]] = true
		case r.Note != "":
			found[at[j]] = engineFound{pos: ks[j].Decl.Doc.Pos, skip: r.Note}
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

// fluxScope says which Flux units deploy a file and which cluster each
// belongs to, for substitution (the Flux engine reads the ConfigMaps
// and Secrets of a unit's cluster through Host.FluxDeploys): a unit's
// cluster is the top of the chain of units applying the files that
// declare them (parent). It is made when the units are known, before
// builds run in parallel, and only read after.
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
