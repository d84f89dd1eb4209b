package source

import (
	"path/filepath"
	"slices"
)

// What `keyhole render` writes is keyhole's output, not an input: a
// directory holding render's marker file, or one keyhole.yaml's
// flux.rendered or argocd.rendered names.

// renderOutput says whether dir (absolute) is, or lies in, a directory
// keyhole render writes: what it holds beside the objects (proxy.json,
// env.json) is render's own record, not an input a build leaves out.
func (l *loader) renderOutput(dir string) bool {
	root, _ := confinement(l.fsys, dir)
	for d := filepath.Clean(dir); within(root, d); d = filepath.Dir(d) {
		if slices.Contains(l.flux.Rendered, d) || slices.Contains(l.argo.rendered, d) {
			return true
		}
		if fi, err := l.fsys.Stat(filepath.Join(d, renderMarker)); err == nil && fi.Mode().IsRegular() {
			return true
		}
		if d == root || filepath.Dir(d) == d {
			break
		}
	}
	return false
}

// renderMarker is the file keyhole render writes at the top of every
// output directory (render.MarkerFile, which source cannot import).
const renderMarker = ".keyhole-render"
