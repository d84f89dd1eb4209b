package source

import (
	"errors"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// Argo makes an ApplicationSet's Applications as Argo CD's ApplicationSet
// controller makes them (source/argocd). Which ApplicationSets are read,
// and what each Application it makes deploys, is the loader's.
type Argo interface {
	// ApplicationSet is what each generator of the ApplicationSet spec
	// makes, in the order of its generators, reading the repository
	// through h and what the loader knows from in. It is nil when spec
	// has no template or no list of generators.
	ApplicationSet(h Host, spec *yaml.Node, in AppSetInput) []AppSetGenerated
}

// AppSetInput is what the loader knows that an ApplicationSet's
// generators read.
type AppSetInput struct {
	// Roots are the directories (absolute, OS form) a git generator's
	// paths are relative to: the repository's root first, the directory
	// named on the command line last.
	Roots []string
	// Clusters gives the Argo CD cluster Secrets the repository declares,
	// which a clusters generator selects from; the repository is scanned
	// for them on the first call of a Load.
	Clusters func() []ArgoCluster
}

// ArgoCluster is an Argo CD cluster Secret the repository declares: the
// fields a clusters generator's parameters take (never its config,
// which holds credentials).
type ArgoCluster struct {
	Name, Server, Project string
	Labels, Annotations   map[string]string
	// Made, when not empty, says the Secret is made by something whose
	// values keyhole does not read ("the ExternalSecret argocd/prod").
	Made string
}

// AppSetGenerated is what one generator of an ApplicationSet makes.
type AppSetGenerated struct {
	// Line and Column are the generator's, in the ApplicationSet's file.
	Line, Column int
	// Unmatched are the paths of its git generators that match nothing
	// in the repository, each as often as a generator met it.
	Unmatched []AppSetUnmatched
	// Stop, when set, is why it makes no Applications keyhole reads; Apps
	// is then empty.
	Stop *AppSetStop
	// Apps are the Applications it makes, in order: the template filled
	// with each parameter set, and patched with the templatePatch.
	Apps []*yaml.Node
	// Failed, when set, is why the template cannot be filled for the
	// parameter set after the last of Apps: no later one is read.
	Failed *AppSetStop
}

// AppSetUnmatched is a path of a git generator that matches nothing in
// the repository, with the repository and revision the generator names.
type AppSetUnmatched struct{ Path, RepoURL, Revision string }

// AppSetStop is why a generator makes no Applications keyhole reads.
type AppSetStop struct {
	// Severity is Info where they are out of reach, Warning where they
	// are not known (CodeArgoCDUnread), Error where the controller
	// refuses the generator.
	Severity diag.Severity
	Message  string
	// Advice, for a warning, says what would make them known.
	Advice string
}

// errNoArgo is an ApplicationSet's reading when Load was given no Argo CD
// engine.
var errNoArgo = errors.New("keyhole was built without its Argo CD engine (source.Options.Engines)")
