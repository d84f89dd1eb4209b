package kustomize

import (
	"fmt"
	"strings"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// A kustomization's helmCharts are inflated only by a build that runs
// helm, which keyhole does not; where the repository gives Argo CD's
// kustomize builds --enable-helm (Host.ArgoHelmOption), a build that
// fails only for want of helm is keyhole's blind spot, said as a
// warning, not the engine's failure (source.CodeKustomizeHelmNotRun).

// helmNotRun is the warning said, instead of the build's failure msg,
// of the kustomization b builds for the unit u, when the build failed
// only for want of helm and the repository's Argo CD runs it; ok is
// false otherwise.
func (b *build) helmNotRun(u *source.Unit, err error, msg string, read map[string][]byte) (diag.Diagnostic, bool) {
	if !strings.Contains(msg, "--enable-helm") || u.Source != source.UnitArgoCD && u.Source != source.UnitKustomization {
		return diag.Diagnostic{}, false
	}
	at := b.h.ArgoHelmOption(b.h.RepoRoot(b.root))
	if at == "" {
		return diag.Diagnostic{}, false
	}
	dir := b.display(b.root)
	return diag.Diagnostic{
		Code:     source.CodeKustomizeHelmNotRun,
		Severity: diag.Warning,
		Pos:      b.failurePos(err, msg, read),
		Message: fmt.Sprintf("kustomization %s inflates Helm charts (helmCharts), which Argo CD builds with --enable-helm, as Argo CD's kustomize build options (%s) say; keyhole runs no helm, so nothing this build makes is read or checked: check it with kustomize build --enable-helm %s | keyhole check -",
			dir, at, dir),
	}, true
}
