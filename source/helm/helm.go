// Package helm is the Helm engine: it renders a chart as `helm template`
// renders it, with Helm's own packages (loader, values, engine, manifest
// sorter), reading the chart through the loader's source.Host so a
// commit's tree renders as the disk does, and running its templates in a
// child process bounded in memory and time (internal/apart). Which
// charts are rendered, with what values, and what their documents are
// is the loader's (package source) and the engines deploying them.
package helm

import "keyhole.dev/keyhole/source"

// Engine renders Helm charts for source.Load (source.Engines.Helm).
type Engine struct{}

var _ source.Helm = Engine{}

// LocalDependencies are the directories of the repository that the chart
// in dir lists as its dependencies by path (file://), whose Chart.yaml
// is there.
func (Engine) LocalDependencies(h source.Host, dir string) []string {
	var dirs []string
	for _, d := range localDependencies(h, dir) {
		dirs = append(dirs, d.dir)
	}
	return dirs
}
