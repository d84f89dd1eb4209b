package source

import (
	"cmp"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A Flux GitRepository's spec.ref names what source-controller fetches:
// a branch, a tag, a semver range over tags, a commit, or a full
// reference name. The units of Flux Kustomizations building from the
// repository's own GitRepository are read where it points, as an Argo CD
// source's targetRevision is (pinAt): the working tree for the branch
// checked out (or one the checkout holds), else the commit from git, or
// nothing, said once, where the repository does not hold it. The
// Kustomizations themselves are read as the working tree declares them.

// CodeFluxRevision is reported at a Flux unit whose source, this
// repository's own GitRepository, is pinned (spec.ref) to a revision
// other than the one keyhole reads: an info when it reads the unit at
// that revision from git, a warning when the repository does not hold it.
const CodeFluxRevision = "FluxRevision"

// fluxRef is the revision a GitRepository's spec.ref names
// (FluxObject.Revision).
type fluxRef struct {
	rev    string
	semver bool
	url    string // the GitRepository's spec.url
}

// gitRef keeps the revision the Flux GitRepository ns/name names, as
// the Flux engine read it (FluxObject).
func (l *loader) gitRef(ns, name string, r FluxObject) {
	if l.gitRefs == nil {
		l.gitRefs = map[string]fluxRef{}
	}
	l.gitRefs[ns+"/"+name] = fluxRef{rev: r.Revision, semver: r.Semver, url: r.URL}
}

// fluxPins pins each Flux unit of found building from this repository's
// own GitRepository to the revision its spec.ref names, when that is not
// the one keyhole reads; one it cannot read becomes a warning, its path
// read by no one.
func (l *loader) fluxPins(found []engineFound) {
	for i, f := range found {
		u := f.unit
		if u == nil || u.Flux == nil || u.pin != nil {
			continue
		}
		kind, _, _ := unstructured.NestedString(u.Flux.Object.Object, "spec", "sourceRef", "kind")
		name, _, _ := unstructured.NestedString(u.Flux.Object.Object, "spec", "sourceRef", "name")
		ns, _, _ := unstructured.NestedString(u.Flux.Object.Object, "spec", "sourceRef", "namespace")
		ns = cmp.Or(ns, u.Flux.Object.GetNamespace(), fluxOwnSource)
		if cmp.Or(kind, "GitRepository") != "GitRepository" || l.mappedSource("GitRepository", ns, name) != "" || !l.ownSource(kind, ns, name) {
			continue
		}
		ref, ok := l.gitRefs[ns+"/"+name]
		if !ok {
			continue
		}
		rev, semver := ref.rev, ref.semver
		what := "Flux Kustomization " + strings.TrimPrefix(u.Name, "flux:")
		source := "GitRepository " + ns + "/" + name
		var p *revPin
		if semver {
			p = &revPin{rev: rev, unread: "a semver range over the repository's tags, which keyhole does not resolve; pin a tag (or check the matching tag out) to have it read"}
		} else {
			p = l.pinAt(rev, f.srcRoot, ref.url)
		}
		if p == nil {
			continue
		}
		if p.fsys == nil {
			found[i] = engineFound{pos: f.pos, warn: what + " builds from " + source + " at " + rev + ", other than the revision keyhole reads, and " + p.unread +
				"; keyhole reads nothing for it, as the working tree is not what it deploys", code: CodeFluxRevision, claim: []string{u.Root}}
			continue
		}
		if fi, err := p.fsys.Stat(u.Root); err != nil || !fi.IsDir() {
			found[i] = engineFound{pos: f.pos, err: fmt.Sprintf("%s: spec.path %q is not a directory of %s at %s (commit %s); kustomize-controller fails to build it",
				what, relOrAbs(f.srcRoot, u.Root), source, rev, short(p.ref.Commit))}
			continue
		}
		pinned := *p
		pinned.source = source
		u.pin = &pinned
	}
}
