package source

import (
	"cmp"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// A repository deployed by Argo CD says what a cluster applies in its
// Applications, each source a deploy unit, and in the Applications its
// ApplicationSets generate. What each means, as Argo CD reads it, is the
// Argo CD engine's (source/argocd, source.Argo): the loader gives it
// each Application and ApplicationSet its scan finds and keeps the
// records it returns, reads again those an Argo CD unit applies as its
// build writes them (argoApplied), has the engine settle them once all
// are read (argoSettled), prepares and runs each unit's build with the kustomization the engine
// writes, and says what the engine found. See docs/inputs.md.

// argoGroup is the API group of Argo CD's Application and ApplicationSet.
const argoGroup = "argoproj.io/"

// UnitArgoCD is an Argo CD Application's source (or one an ApplicationSet
// generates).
const UnitArgoCD UnitSource = "argocd"

// ArgoOverlay is what Argo CD's repo server applies to an Application
// source's path.
type ArgoOverlay struct {
	// Kustomize is spec.source.kustomize, as written.
	Kustomize *yaml.Node
	// Directory is spec.source.directory, as written.
	Directory *yaml.Node
}

// argoUnits is the units the Argo CD Application or ApplicationSet d
// makes, one per source (or per generated Application), as the Argo CD
// engine reads it: from vals, the object as the Argo CD unit applying it
// builds it in namespace ns, or from d when vals is nil. With no Argo CD
// engine, it says so at d (errNoArgo), and the paths its sources name
// are no one else's to read.
func (l *loader) argoUnits(d *Document, vals *yaml.Node, ns string, srcRoots []string) []engineFound {
	if l.opts.Engines.Argo == nil {
		return l.noArgo(d, cmp.Or(vals, d.Node), srcRoots)
	}
	var out []engineFound
	for _, f := range l.opts.Engines.Argo.Units(Host{l}, d, vals, ns, srcRoots) {
		out = append(out, argoFound(f))
	}
	return out
}

// noArgo is what the Application or ApplicationSet d (its fields those
// of obj) makes when Load was given no Argo CD engine: an error at its
// generators, or at the object, and a claim on its sources' paths.
func (l *loader) noArgo(d *Document, obj *yaml.Node, srcRoots []string) []engineFound {
	o := d.Object()
	what := "Argo CD " + o.Kind + " " + cmp.Or(o.Namespace, "argocd") + "/" + o.Name
	spec := Lookup(obj, "spec")
	if o.Kind == "ApplicationSet" {
		gens := Lookup(spec, "generators")
		if Lookup(spec, "template") == nil || gens == nil || gens.Kind != yaml.SequenceNode {
			return nil
		}
		return []engineFound{{pos: diag.Pos{File: d.File, Line: gens.Line, Column: gens.Column}, err: what + ": " + errNoArgo.Error()}}
	}
	f := engineFound{pos: d.Pos, err: what + ": " + errNoArgo.Error()}
	sources := []*yaml.Node{Lookup(spec, "source")}
	if ss := Lookup(spec, "sources"); ss != nil && ss.Kind == yaml.SequenceNode {
		sources = append(sources, ss.Content...)
	}
	for _, s := range sources {
		if rel := stringField(s, "path"); rel != "" {
			if dir, _ := l.enginePath(rel, srcRoots); dir != "" {
				f.claim = append(f.claim, dir)
			}
		}
	}
	return []engineFound{f}
}

// argoSettled is found with its Argo CD objects read as the units
// applying them build them (argoApplied), then settled by the Argo CD
// engine (Settle): the records it changes take its word, and an object
// no root reaches gives way to one note, where its first record stood.
func (l *loader) argoSettled(found []engineFound, patches []kustomizePatch) ([]engineFound, diag.List) {
	found, ds := l.argoApplied(found, patches)
	if l.opts.Engines.Argo == nil {
		return found, ds
	}
	type record struct {
		o *ArgoObject
		i int
	}
	var objs []*ArgoObject
	objOf := map[*argoDecl]*ArgoObject{}
	at := make([]record, len(found))
	for i, f := range found {
		if f.argo == nil {
			continue
		}
		o := objOf[f.argo]
		if o == nil {
			o = &ArgoObject{Doc: f.argo.d, File: f.argo.file}
			objOf[f.argo] = o
			objs = append(objs, o)
		}
		at[i] = record{o: o, i: len(o.Found)}
		o.Found = append(o.Found, ArgoFound{Unit: f.unit, Pos: f.pos, Skip: f.skip, Err: f.err, Warn: f.warn, Code: f.code,
			Repo: f.repo, OwnErr: f.ownErr, OwnWarn: f.ownWarn})
	}
	l.opts.Engines.Argo.Settle(Host{l}, objs)
	said := map[*ArgoObject]bool{}
	kept := found[:0]
	for i, f := range found {
		r := at[i]
		switch {
		case r.o == nil:
			kept = append(kept, f)
		case r.o.Unreached != "":
			if !said[r.o] {
				said[r.o] = true
				kept = append(kept, engineFound{pos: r.o.Doc.Pos, skip: r.o.Unreached})
			}
		default:
			s := r.o.Found[r.i]
			f.skip, f.err, f.warn, f.code = s.Skip, s.Err, s.Warn, s.Code
			kept = append(kept, f)
		}
	}
	return kept, ds
}

// prepareArgo readies the build of the Argo CD unit u as the repo server
// does it, or says why there is nothing to build.
func (l *loader) prepareArgo(u *Unit) engineJob {
	j := engineJob{u: u, named: l.unitName(u)}
	if !l.engineUnitMatters(u) {
		j.note = skipped(u.Decl, "Argo CD Application "+strings.TrimPrefix(u.Name, "argocd:")+" not built: nothing under its path or in its components names keyhole's kinds or declares a Secret")
		return j
	}
	l.diags = append(l.diags, l.opts.Engines.Argo.Jsonnet(Host{l}, u)...)
	if b := l.applying[u]; b != nil && (b.run.m != nil || b.run.err != nil) {
		j.build, j.built, j.run = true, true, b.run
		return j
	}
	j.bo = l.buildOptions(u.Root)
	j.bo.KFile, j.bo.KData = l.argoManifest(u)
	j.build = true
	return j
}

// CodeJsonnetNotEvaluated is reported at a Jsonnet file of an Argo CD
// directory application that names keyhole's kinds or declares a
// Secret: Argo CD evaluates it, keyhole does not.
const CodeJsonnetNotEvaluated = "JsonnetNotEvaluated"

// argoManifest is the kustomization the repo server builds the Argo CD
// unit u's path with, and the path it stands at, as the Argo CD engine
// writes it (Manifest): the path's own, with the Application's
// kustomize options written in, or the one a directory application
// makes of its files.
func (l *loader) argoManifest(u *Unit) (kfile string, kdata []byte) {
	return l.opts.Engines.Argo.Manifest(Host{l}, u)
}
