package source

import (
	"keyhole.dev/keyhole/diag"
)

// argo-helm's argocd-apps, unvendored, writes its values out as
// Applications and ApplicationSets; another dependency charts/ does not
// hold may write them from the chart's values: the Argo CD engine reads
// both (AppsChart, UnvendoredApps), the loader's scan asks it.

// unvendoredArgoApps is the warning, when there is one, that the chart
// in dir (its Chart.yaml reported as chart) has a dependency charts/
// does not hold that the chart's values give Argo CD objects to render.
func (l *loader) unvendoredArgoApps(dir, chart string) (diag.Diagnostic, bool) {
	if l.opts.Engines.Argo == nil {
		return diag.Diagnostic{}, false
	}
	return l.opts.Engines.Argo.UnvendoredApps(Host{l}, dir, chart)
}

// argoAppsObjects is, for the chart in dir whose Chart.yaml lists
// argo-helm's argocd-apps without charts/ holding it, the Applications
// and ApplicationSets argocd-apps renders from the chart's values.yaml
// (shown as file); ok is false when there is nothing to read.
func (l *loader) argoAppsObjects(dir, file string) (docs []*Document, ok bool) {
	if l.opts.Engines.Argo == nil {
		return nil, false
	}
	return l.opts.Engines.Argo.AppsChart(Host{l}, dir, file)
}
