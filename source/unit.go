package source

import (
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"keyhole.dev/keyhole/diag"
)

// UnitSource says what declared a deploy unit: which engine, or which
// convention, makes the objects it holds one thing a cluster applies.
type UnitSource string

// The unit sources, in the order docs/inputs.md states their precedence:
// a GitOps engine's objects, where the repository has them, decide what
// is deployed; otherwise each kustomization root; the files outside any
// of them are one more unit.
const (
	// UnitFlux is a Flux Kustomization (kustomize.toolkit.fluxcd.io):
	// its spec.path, built as kustomize-controller builds it.
	UnitFlux UnitSource = "flux"
	// UnitKustomization is a kustomization root: a kustomization no other
	// kustomization of the walk uses, or one named explicitly.
	UnitKustomization UnitSource = "kustomization"
	// UnitLoose is the files read outside any kustomization.
	UnitLoose UnitSource = "loose"
)

// Unit is one deploy unit (docs/inputs.md): what a cluster applies as
// one, found before anything is built and carried as a value by the
// compiler, render, diff and explain. Two units are the same unit when
// their IDs are.
type Unit struct {
	// ID tells units apart: the source and what identifies the unit
	// within it (the directory built, or the engine object's namespace
	// and name). Two engine objects on one path are two units.
	ID string
	// Name is the unit as the user names it (--unit) and as reports
	// name it: a kustomization root's directory as reported
	// ("apps/production"), a Flux Kustomization as "flux:NS/NAME", and
	// LooseUnit for the loose files.
	Name string
	// Dir is where render -o writes the unit's files when it writes
	// several units: a relative, slash-separated path that never leaves
	// the output directory; "" for the output directory itself.
	Dir string
	// DirFixed says render -o writes the unit's files in Dir even when
	// it writes no other unit: keyhole.yaml's argocd.rendered has Argo
	// CD Applications point at it, so it never moves (ArgoFound.Rendered).
	DirFixed bool
	// Source is what declared the unit.
	Source UnitSource
	// Root is the directory built (absolute, OS form); "" for the loose
	// files.
	Root string
	// Decl is where the unit is declared: its kustomization file, or the
	// engine object. Zero for the loose files.
	Decl diag.Pos
	// Cluster names the cluster the unit deploys to, as far as the
	// repository says: "" for the cluster keyhole's caller means; a Flux
	// Kustomization's spec.kubeConfig makes it another. Units of
	// different clusters never read each other's Secrets.
	Cluster string
	// Namespace is where the engine applies the unit's objects that name
	// none (an Argo CD Application's destination.namespace); "" for the
	// namespace keyhole's caller means.
	Namespace string
	// Flux is the overlay kustomize-controller applies, for a Flux unit.
	Flux *FluxOverlay
	// Argo is the overlay Argo CD's repo server applies, for an Argo CD
	// unit.
	Argo *ArgoOverlay
	// Helm, when set, says Root is a Helm chart and how it is rendered
	// (an Argo CD Application's Helm source, or a chart a walk found).
	Helm *HelmOverlay

	// declFile is the file declaring the unit (absolute, OS form).
	declFile string
	// appliedBy is the Flux unit whose build applies the object
	// declaring this one, when one does.
	appliedBy *Unit
	// shallow says the unit is an Argo CD directory application that
	// does not recurse: its files are those at the top of Root.
	shallow bool
	// pin, when set, is the revision an Argo CD unit is pinned to,
	// other than the one keyhole reads: its path is read at that commit
	// (pinAt).
	pin *revPin
	// rendered says the unit is an Argo CD source that keyhole's config
	// management plugin renders (source/argocd's keyholePlugin): Argo CD
	// applies keyhole's render of it, not its inputs as written.
	rendered bool
}

// KeyholePlugin reports whether u is an Argo CD source that keyhole's
// config management plugin renders: Argo CD applies keyhole's render of
// it.
func (u *Unit) KeyholePlugin() bool { return u != nil && u.rendered }

// Loose reports whether u is the unit of the files read outside any
// kustomization.
func (u *Unit) Loose() bool { return u == nil || u.Source == UnitLoose }

// looseUnit is the one unit of the loose files.
var looseUnit = &Unit{ID: "loose", Name: LooseUnit, Source: UnitLoose}

// LooseUnitValue is the unit of the files read outside any kustomization.
func LooseUnitValue() *Unit { return looseUnit }

// kustomizationUnit is the unit of the kustomization root dir (absolute),
// reported as name, declared by the kustomization file kname.
func kustomizationUnit(name, dir, kname string) *Unit {
	return &Unit{
		ID:     "kustomization:" + name,
		Name:   dirUnitName(name),
		Dir:    outputDir(name),
		Source: UnitKustomization,
		Root:   dir,
		Decl:   diag.Pos{File: kname, Line: 1, Column: 1},
	}
}

// outputDir is a unit name made into a directory inside the output
// directory: a name outside the working directory (../apps/prod, or an
// absolute path) still writes inside it.
func outputDir(name string) string {
	var dir []string
	for _, e := range strings.Split(name, "/") {
		if e != "" && e != "." && e != ".." {
			dir = append(dir, e)
		}
	}
	return path.Join(dir...)
}

// dirUnitName is the Name of a unit a directory declares (a kustomization
// root, a Helm chart a walk found), reported as name. An engine unit's
// Name starts with its engine ("flux:", "argocd:", "helmrelease:") and the
// loose files' is "", so a directory named like one (flux:flux-system/apps)
// is named "./flux:flux-system/apps": whatever a directory is called, its
// unit's name is no engine unit's, and the two are never compared as one.
// Its output directory is the same either way (outputDir drops ".").
func dirUnitName(name string) string {
	first, _, _ := strings.Cut(name, "/")
	if strings.Contains(first, ":") || strings.HasPrefix(first, "(") {
		return "./" + name
	}
	return name
}

// FluxOverlay is what kustomize-controller applies to a Flux unit's path:
// the Kustomization object as the repository writes it.
type FluxOverlay struct {
	// Object is the Kustomization, as Flux's library reads it.
	Object unstructured.Unstructured
	// SourceRoot is the root of the source spec.path is relative to
	// (absolute, OS form).
	SourceRoot string
}
