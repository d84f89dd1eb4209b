package flux

import (
	"path/filepath"
	"strings"

	"keyhole.dev/keyhole/source"
)

// A Flux unit's postBuild substitution, and a HelmRelease's valuesFrom,
// read ConfigMaps and Secrets from the cluster. keyhole reads those the
// repository holds in the clear (source.Host's Held), as the cluster of
// the unit asking reads them: prod's cluster-settings are not dev's.

// heldObjects gives the ConfigMap or Secret of kind, namespace and name
// that the repository holds in the clear and the cluster of the unit
// asking reads, or nil: then the cluster's object is not the
// repository's to tell.
type heldObjects func(kind, ns, name string) *source.Document

// heldFor reads the objects the repository at root holds as the cluster
// of the Flux unit u reads them; with u nil, as any cluster does: the
// first of the name.
func heldFor(h source.Host, root string, u *source.Unit) heldObjects {
	return func(kind, ns, name string) *source.Document {
		if d := pick(h, u, h.Held(root, kind, ns, name)); d != nil {
			return d
		}
		return pick(h, u, h.Held(root, kind, "", name))
	}
}

// pick is, of held, the first that a unit of u's cluster deploys, else
// one that no Flux unit deploys (nearFree); one only another cluster's
// units deploy is never read.
func pick(h source.Host, u *source.Unit, held []source.Held) *source.Document {
	var free []source.Held
	for _, o := range held {
		if u == nil {
			return o.Doc
		}
		same, deployed := h.FluxDeploys(u, o.File)
		if same {
			return o.Doc
		}
		if !deployed {
			free = append(free, o)
		}
	}
	return nearFree(h, u, free)
}

// nearFree is, of the objects free that no Flux unit deploys, the one
// the cluster of u applies: the only one, or the one declared nearest
// the file declaring the top of u's chain of applying units. Nothing
// deploys that file either: what applies it (a FluxInstance's sync, a
// cluster's bootstrap) applies its directory, so clusters/b/apps.yaml
// substitutes from clusters/b/cluster-info.yaml, not from clusters/a's.
// Where two are equally near, u's cluster cannot be told and neither is
// read: the variables stay as written.
func nearFree(h source.Host, u *source.Unit, free []source.Held) *source.Document {
	switch len(free) {
	case 0:
		return nil
	case 1:
		return free[0].Doc
	}
	from := filepath.Dir(h.DeclaredIn(h.FluxTop(u)))
	best, bestAt, tied := -1, -1, false
	for i, o := range free {
		n := commonDirs(from, filepath.Dir(o.File))
		switch {
		case n > best:
			best, bestAt, tied = n, i, false
		case n == best:
			tied = true
		}
	}
	if tied {
		return nil
	}
	return free[bestAt].Doc
}

// commonDirs is how many leading path elements the directories a and b
// share.
func commonDirs(a, b string) int {
	as := strings.Split(filepath.ToSlash(a), "/")
	bs := strings.Split(filepath.ToSlash(b), "/")
	n := 0
	for n < len(as) && n < len(bs) && as[n] == bs[n] {
		n++
	}
	return n
}
