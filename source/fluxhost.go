package source

// What the Flux engine (source/flux) asks the loader of the units found:
// which files their builds apply. The builds are the loader's; what
// Flux makes of them (which Kustomization an entry reaches, which
// cluster a unit deploys to) is the engine's.

// FluxFound is one Flux Kustomization the scan found, as Flux.Reach
// reads it: its declaration, and the unit it makes, nil when it makes
// none. Several share a Decl where several units apply one object.
type FluxFound struct {
	Decl *FluxDecl
	Unit *Unit
}

// FluxReached is what Flux.Reach says of one FluxFound: Note, when not
// empty, is why Flux does not apply it, said in place of its unit; Drop
// says its unit is no deploy unit and nothing is said of it (another
// unit of its object is reached, or the note is said at another).
type FluxReached struct {
	Note string
	Drop bool
}

// Applies reports whether the build of the engine unit u applies file
// (absolute, OS form): its path holds the file and the kustomizations
// on the way list it, or the build reads it from outside its path.
func (h Host) Applies(u *Unit, file string) bool {
	if within(u.Root, file) {
		return h.l.holds(u, file)
	}
	return h.l.reached(u)[file]
}

// Held is a ConfigMap or Secret the repository holds in the clear, and
// the file (absolute, OS form) declaring it.
type Held struct {
	Doc  *Document
	File string
}

// Held are the ConfigMaps or Secrets (kind) ns/name that the repository
// at root holds in the clear, as its walk finds them; with ns "", those
// of that name in any namespace. An object written without a namespace
// is default's. They are read once per Load, from several goroutines
// at once.
func (h Host) Held(root, kind, ns, name string) []Held {
	objs := h.l.repoObjects(root)
	if ns == "" {
		return objs.byName[[2]string{kind, name}]
	}
	return objs.byKey[[3]string{kind, ns, name}]
}

// FluxDeploys reports whether a Flux unit of u's cluster deploys file
// (one with u's top, or a cluster Flux.Cluster names as u's), and
// whether any Flux unit does. Before the units are known every unit is
// of u's cluster.
func (h Host) FluxDeploys(u *Unit, file string) (same, deployed bool) {
	if h.l.scope == nil {
		return true, true
	}
	return h.l.scope.deploys(u, file)
}

// FluxTop is the Flux unit at the top of u's chain of applying units:
// the one applying the file declaring u, and the one applying its file,
// up to one no Flux unit applies.
func (h Host) FluxTop(u *Unit) *Unit {
	if h.l.scope == nil {
		return u
	}
	return h.l.scope.top(u)
}
