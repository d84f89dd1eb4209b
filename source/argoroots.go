package source

// An Argo CD instance starts from its roots: the Applications and
// ApplicationSets applied to it by its installation or by hand (an app
// of apps), which keyhole.yaml's argocd.roots may name. Where it names
// them, an Application or ApplicationSet that no root reaches, through
// the chain of Argo CD units applying the files that declare them, is no
// deploy unit, as Flux's entries do for Kustomizations.
//
// Each instance is a cluster: its in-cluster destination
// (https://kubernetes.default.svc) is its own, and so are the clusters
// its Secrets name. A root's instance is the one keyhole.yaml names for
// it; where it names none, two roots whose units make Applications of
// the same namespace and name (two clusters' bootstraps each creating
// argocd/platform) are two instances, each named by its root's path.
// Where the repository holds one instance, its units deploy to the
// cluster keyhole's caller means, as before. Which objects the roots
// reach, and the instances, are the Argo CD engine's to say (Settle,
// Clusters); the loader keeps keyhole.yaml's roots for it
// (Host.ArgoRoots). See docs/inputs.md, "Argo CD roots and instances".

// argoConfig is what keyhole.yaml's argocd field says.
type argoConfig struct {
	roots []ArgoRoot
	// rendered are the directories (absolute) keyhole.yaml's
	// argocd.rendered names, and base keyhole.yaml's directory
	// (argoRenderedAgree).
	rendered []string
	base     string
	// uses are the Argo CD sources found applying them.
	uses []argoRenderUse
}

// readArgoConfig reads the argocd field of the Config document d, whose
// directory is base, as the Argo CD engine reads it (Config).
func (l *loader) readArgoConfig(d *Document, base string) {
	if l.opts.Engines.Argo == nil {
		return // no Argo CD unit is read: none reads the field
	}
	c, ds := l.opts.Engines.Argo.Config(Host{l}, d, base)
	l.diags = append(l.diags, ds...)
	if c.Rendered != nil {
		l.argo.base = base
		l.argo.rendered = append(l.argo.rendered, c.Rendered...)
	}
	l.argo.roots = append(l.argo.roots, c.Roots...)
}

// argoInstances names the Argo CD instance, and so the cluster, of each
// Argo CD unit of units, as the Argo CD engine tells them apart
// (Clusters).
func (l *loader) argoInstances(units []*Unit) {
	if l.opts.Engines.Argo != nil {
		l.opts.Engines.Argo.Clusters(Host{l}, units)
	}
}
