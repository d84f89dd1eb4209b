package source

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"keyhole.dev/keyhole/diag"
)

// An Argo CD Application applies what its source's path builds, which
// may not be what keyhole renders of it: the Argo CD engine says so
// (source.Argo's Applies) of each unit's build, as the loader takes it.

// CodeArgoCDUnrendered is reported at an Argo CD Application whose
// source applies keyhole's inputs as written, not keyhole's render of
// them.
const CodeArgoCDUnrendered = "ArgoCDUnrendered"

// CodeArgoCDRenderOmits is reported at an Argo CD Application whose
// source keyhole's plugin renders when the source's build holds objects
// other than keyhole's inputs: the render holds only what keyhole makes
// of those, so Argo CD never applies the others.
const CodeArgoCDRenderOmits = "ArgoCDRenderOmits"

// keyholeGroup is the API group of keyhole's input kinds.
const keyholeGroup = "omnia.altairalabs.ai/"

// argoApplies says what Argo CD applies of the Argo CD unit u's build,
// docs, that keyhole's render does not make (the Argo CD engine's
// Applies): a kustomize or directory source's build and a Helm source's
// render alike, at the revision keyhole reads or the one it is pinned
// to. Nothing for a unit of another engine.
func (l *loader) argoApplies(u *Unit, docs []*Document) {
	if u.Argo == nil || l.opts.Engines.Argo == nil {
		return
	}
	l.diags = append(l.diags, l.opts.Engines.Argo.Applies(Host{l}, u, docs)...)
}

// A repository whose Argo CD cannot run keyhole's plugin (a managed Argo
// CD) commits keyhole's render instead: CI runs keyhole render -o DIR,
// and each Application's path is DIR/<unit>, the directory render writes
// one deploy unit's files to. keyhole.yaml's argocd.rendered names DIR
// (docs/inputs.md, "A committed render for Argo CD"). A source whose
// path lies there applies keyhole's output, not an input: it is no unit,
// and its path need not exist, as before the first render. A directory
// holding render's marker is such output too (the Argo CD engine says
// so, ArgoFound.Rendered). With argocd.rendered, each
// unit a directory declares is written to that directory relative to
// keyhole.yaml's (not to where keyhole runs), even when it is the only
// one (Unit.DirFixed), so no render moves what an Application applies;
// and an Application whose path is no unit's directory there is an
// error (CodeArgoCDRenderedPath): Argo CD would find no such directory.

// CodeArgoCDRenderedPath is reported at an Argo CD Application whose
// path lies in a directory keyhole.yaml's argocd.rendered names, where
// keyhole render writes no deploy unit.
const CodeArgoCDRenderedPath = "ArgoCDRenderedPath"

// ArgoRenderUse is an Argo CD source applying a directory keyhole.yaml's
// argocd.rendered names.
type ArgoRenderUse struct {
	// What is the Application (and source), Shown its path as written.
	What, Shown string
	// Dir is the argocd.rendered directory (absolute), Sub the path
	// below it (slash-separated; "" for Dir).
	Dir, Sub string
}

// argoRenderUse is an ArgoRenderUse as the loader keeps it, with where
// the source stands.
type argoRenderUse struct {
	ArgoRenderUse
	pos diag.Pos
}

// argoRenderedAgree fixes, when keyhole.yaml names argocd.rendered, where
// render writes each deploy unit (Unit.DirFixed), and says of each Argo
// CD source applying a directory there that no unit is written to.
func (l *loader) argoRenderedAgree() diag.List {
	if len(l.argo.rendered) == 0 {
		return nil
	}
	var units []*Unit
	seen := map[*Unit]bool{}
	// inputs are the units holding keyhole's inputs: only those have
	// anything for render to write.
	inputs := map[*Unit]bool{}
	for _, d := range l.docs {
		u := d.Unit()
		if d.IsAgent() || strings.HasPrefix(d.Object().APIVersion, keyholeGroup) {
			inputs[u] = true
		}
		if u == nil || u.Loose() || seen[u] {
			continue
		}
		seen[u] = true
		if u.Root != "" && l.renderOutput(u.Root) {
			continue // a render read back, which renders nothing
		}
		if u.Source == UnitKustomization || u.Source == UnitHelm {
			// Its directory as keyhole.yaml's sees it, wherever
			// keyhole runs.
			u.Dir = outputDir(filepath.ToSlash(relOrAbs(l.argo.base, u.Root)))
		}
		u.DirFixed = true
		units = append(units, u)
	}
	dirs := map[string]bool{}
	var written []string
	for _, u := range units {
		if inputs[u] {
			dirs[u.Dir] = true
			written = append(written, path.Join(filepath.ToSlash(relOrAbs(l.argo.base, l.argo.rendered[0])), u.Dir)+" (deploy unit "+u.Name+")")
		}
	}
	slices.Sort(written)
	var ds diag.List
	said := map[string]bool{}
	for _, use := range l.argo.uses {
		if dirs[use.Sub] || use.Sub == "" && inputs[looseUnit] {
			continue
		}
		msg := fmt.Sprintf("%s applies %s, where `keyhole render -o %s` (keyhole.yaml's argocd.rendered) writes no deploy unit: Argo CD finds no such directory to apply, so it does not sync; ",
			use.What, use.Shown, filepath.ToSlash(relOrAbs(l.argo.base, use.Dir)))
		if len(written) == 0 {
			msg += "the input has no deploy unit for render to write there"
		} else {
			msg += "point it at a directory render writes: " + strings.Join(written, ", ")
		}
		if said[msg] {
			continue
		}
		said[msg] = true
		ds = append(ds, diag.Diagnostic{Code: CodeArgoCDRenderedPath, Severity: diag.Error, Pos: use.pos, Message: msg})
	}
	return ds
}
