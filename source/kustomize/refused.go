package kustomize

import (
	"fmt"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/kustbuild"
	"keyhole.dev/keyhole/source"
)

// refused is the diagnostic of a build's refused file: the loader's, at
// the file, as reading the file directly would give (the loader's rules
// for the files a build reads).
func (b *build) refused(e *kustbuild.FileRefused) diag.Diagnostic {
	d := e.D
	d.Pos.File = b.display(e.Abs)
	return d
}

// outside is the error of a build that asked for a path outside the
// repository (kustbuild.Outside) where kustomize's own message does not
// say so: at the kustomization, naming the path as it reads from the
// working directory, never what the file holds.
func (b *build) outside(e *kustbuild.Outside) diag.Diagnostic {
	return diag.Diagnostic{
		Code:     source.CodeKustomizeBuildFailed,
		Severity: diag.Error,
		Pos:      diag.Pos{File: b.kname, Line: 1, Column: 1},
		Message:  fmt.Sprintf("kustomize cannot build %s: it reads %s, %s", b.display(b.root), b.h.Display(e.Path, e.Path, e.Path), e.Error()),
	}
}

// remote is the error of a build stopped at a kustomization's entry that
// kustomize would fetch over the network, when remote bases are not
// allowed (source.Options.AllowRemoteBases): at the entry, or, where only
// the kustomization an engine generates names it, at the unit's
// declaration. A Flux unit's is fetched by kustomize-controller, which
// fetches remote bases unless it runs with --no-remote-bases.
func (b *build) remote(e *kustbuild.RemoteRefused) diag.Diagnostic {
	pos := diag.Pos{File: b.display(e.File), Line: e.Entry.Line, Column: e.Entry.Column}
	if e.Entry.Line == 0 {
		pos = b.u.Decl
	}
	fetches := "kubectl kustomize does"
	if b.u.Source == source.UnitFlux {
		fetches = "kustomize-controller does unless it runs with --no-remote-bases"
	}
	return diag.Diagnostic{
		Code:     source.CodeKustomizeRemoteBase,
		Severity: diag.Error,
		Pos:      pos,
		Message:  kustbuild.RemoteMessage(e.Entry.Value, fetches),
	}
}
