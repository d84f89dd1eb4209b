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
