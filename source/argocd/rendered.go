package argocd

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"keyhole.dev/keyhole/source"
)

// A repository whose Argo CD cannot run keyhole's plugin commits
// keyhole's render instead, and each Application's path is a directory
// keyhole render -o writes (keyhole.yaml's argocd.rendered names it, or
// it holds render's marker): keyhole's output, not an input, so such a
// source makes no unit. The loader says, once every unit is known,
// where render writes no unit there (source.CodeArgoCDRenderedPath).

// renderedSource is what is said of the Argo CD source what, whose path
// rel (shown as shown) is relative to one of roots, when that path is
// keyhole render's output; ok is false when it is not.
func renderedSource(h source.Host, what, shown, rel string, roots []string) (f source.ArgoFound, ok bool) {
	dirs, base := h.ArgoRenderedDirs()
	clean := path.Clean("/" + filepath.ToSlash(rel))
	for _, r := range roots {
		p := filepath.Join(r, filepath.FromSlash(clean))
		for _, d := range dirs {
			if !source.Within(d, p) {
				continue
			}
			sub, _ := filepath.Rel(d, p)
			use := &source.ArgoRenderUse{What: what, Shown: shown, Dir: d, Sub: strings.TrimPrefix(filepath.ToSlash(sub), ".")}
			return source.ArgoFound{Rendered: use, Skip: fmt.Sprintf(
				"%s applies %s, in the directory `keyhole render -o %s` writes one directory per deploy unit to (keyhole.yaml's argocd.rendered): keyhole's output, written from the inputs keyhole checks, not an input to check",
				what, shown, filepath.ToSlash(relOrAbs(base, d)))}, true
		}
		for d := p; source.Within(r, d); d = filepath.Dir(d) {
			if fi, err := h.Stat(filepath.Join(d, source.RenderMarker)); err == nil && fi.Mode().IsRegular() {
				return source.ArgoFound{Skip: fmt.Sprintf("%s applies %s, in a directory `keyhole render` wrote (it holds %s): keyhole's output, written from the inputs keyhole checks, not an input to check",
					what, shown, source.RenderMarker)}, true
			}
			if d == r {
				break
			}
		}
	}
	return source.ArgoFound{}, false
}
