// Package argocd is the Argo CD engine: it reads Argo CD's Applications
// and ApplicationSets as Argo CD reads them. Each source of an
// Application makes a deploy unit (application.go): its path in this
// repository, at the targetRevision it names, built as the repo server
// builds it (a kustomization with the Application's kustomize options
// written in, a directory application's files, manifest.go) or rendered
// as a Helm chart with its helm options; multi-source $values, ref,
// plugin and idpbuilder sources, and what is out of reach, are said as
// Argo CD meets them. An ApplicationSet's Applications are made as Argo
// CD's ApplicationSet controller makes them (applicationset/generators,
// applicationset/utils): the parameter sets of its list, git
// (directories and files), clusters and matrix generators, kept by their
// selectors, and its template filled with each (fasttemplate, or Go
// templates with Sprig's functions and Argo CD's, in a child process
// bounded in memory and time, internal/apart) and patched with its
// templatePatch. It also reads keyhole.yaml's argocd field (config.go),
// argo-helm's argocd-apps charts (appschart.go), cluster Secrets
// (clustersecret.go), Kargo's Stage annotation (kargo.go), a source
// applying a committed render (rendered.go), and says what Argo CD
// applies that keyhole's render does not make (applies.go). Once every
// object the loader's scan found is read, it says which keyhole.yaml's
// argocd.roots reach, and once the units are known, which Argo CD
// instance, and so which cluster, each deploys to (roots.go). It reads
// the repository through the loader's source.Host and asks the loader
// there what only the loader knows (the repository's revisions,
// keyhole.yaml's roots and rendered directories, the cluster Secrets it
// scanned, which unit applies another and what a unit's build reads).
// Which objects are read, the reading again of an applied object as
// its applying unit's build writes it, and the builds, are the loader's
// (package source). See docs/inputs.md.
package argocd

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// Engine reads Argo CD's objects for source.Load (source.Engines.Argo).
type Engine struct{}

var _ source.Argo = Engine{}

// applicationSet is what each generator of the ApplicationSet spec makes,
// in order: the parameter sets it makes from the repository, read
// through h, or from the cluster Secrets in.Clusters gives, as its
// selector keeps them; and the template, filled with each set and
// patched with the templatePatch, one Application each. Nil when spec
// has no template or no list of generators.
func applicationSet(h source.Host, spec *yaml.Node, in appSetInput) []appSetGenerated {
	tmpl := source.Lookup(spec, "template")
	gens := source.Lookup(spec, "generators")
	if tmpl == nil || gens == nil || gens.Kind != yaml.SequenceNode {
		return nil
	}
	t := appSetTemplating(spec)
	tp := source.Lookup(spec, "templatePatch")
	out := make([]appSetGenerated, 0, len(gens.Content))
	for _, g := range gens.Content {
		run := &appSetRun{h: h, t: t, in: in}
		params, stop := generatorParams(run, g, 0)
		gen := appSetGenerated{Line: g.Line, Column: g.Column, Unmatched: run.unmatched, Stop: stop, Assumed: run.assumed}
		for _, p := range params {
			app, err := t.fill(tmpl, p)
			if err == nil && tp != nil {
				app, err = t.patch(app, tp, p)
			}
			if err != nil {
				if gen.Failed = changing(err); gen.Failed == nil {
					gen.Failed = genError(fmt.Sprintf("its template cannot be filled for %s: %v", paramsNamed(p), err))
				}
				break
			}
			gen.Apps = append(gen.Apps, app)
		}
		out = append(out, gen)
	}
	return out
}

// appSetInput is what the loader knows that an ApplicationSet's
// generators read.
type appSetInput struct {
	// Roots are the directories (absolute, OS form) a git generator's
	// paths are relative to: the repository's root first, the directory
	// named on the command line last.
	Roots []string
	// Clusters gives the Argo CD cluster Secrets the repository declares,
	// which a clusters generator selects from; the repository is scanned
	// for them on the first call of a Load.
	Clusters func() []source.ArgoCluster
}

// appSetGenerated is what one generator of an ApplicationSet makes.
type appSetGenerated struct {
	// Line and Column are the generator's, in the ApplicationSet's file.
	Line, Column int
	// Unmatched are the paths of its git generators that match nothing
	// in the repository, each as often as a generator met it.
	Unmatched []appSetUnmatched
	// Stop, when set, is why it makes no Applications keyhole reads; Apps
	// is then empty.
	Stop *appSetStop
	// Apps are the Applications it makes, in order: the template filled
	// with each parameter set, and patched with the templatePatch.
	Apps []*yaml.Node
	// Failed, when set, is why the template cannot be filled for the
	// parameter set after the last of Apps: no later one is read.
	Failed *appSetStop
	// Assumed says a clusters generator in it gave the local cluster
	// because the repository declares no cluster Secret: the clusters
	// Argo CD holds are not known, and the Applications it makes may
	// not be made at all.
	Assumed bool
}

// appSetUnmatched is a path of a git generator that matches nothing in
// the repository, with the repository and revision the generator names.
type appSetUnmatched struct{ Path, RepoURL, Revision string }

// appSetStop is why a generator makes no Applications keyhole reads.
type appSetStop struct {
	// Severity is Info where they are out of reach, Warning where they
	// are not known (source.CodeArgoCDUnread), Error where the controller
	// refuses the generator.
	Severity diag.Severity
	Message  string
	// Advice, for a warning, says what would make them known.
	Advice string
	// Apart, for a warning, says the advice is to check the directories
	// its template deploys on their own: appSetUnits names them.
	Apart bool
}
