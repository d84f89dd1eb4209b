package argocd

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// Kargo (kargo.akuity.io) promotes Freight through Stages: a Stage's
// promotion clones this repository at the commit promoted, renders an
// overlay or chart of it (the kustomize-build or helm-template step) and
// pushes the output to a branch of its own (stage/dev, env/dev), which an
// Argo CD Application deploys. The Application names the Stage allowed to
// update it in its kargo.akuity.io/authorized-stage annotation
// ("PROJECT:STAGE"), which Kargo's argocd-update step requires. Such a
// branch holds the last promotion's render, not the change keyhole
// checks: fetching it would check what is deployed, never what the next
// promotion renders. Where the repository does not hold it, keyhole reads
// nothing for the Application, whatever its path (the render's layout,
// which main need not have), and claims none of its files, so the
// overlays the Stage renders from are read as a walk finds them
// (kustomization roots, built as kustomize-build builds them), and says
// so once per Application (kargoUnread).

// kargoStageAnnotation names the Kargo Stage an Argo CD Application lets
// update it.
const kargoStageAnnotation = "kargo.akuity.io/authorized-stage"

// kargoStage is the Kargo Stage ("PROJECT:STAGE") the Argo CD
// Application app lets update it, or "".
func kargoStage(app *yaml.Node) string {
	return strings.TrimSpace(source.StringField(source.Lookup(source.Lookup(app, "metadata"), "annotations"), kargoStageAnnotation))
}

// kargoUnread is the warning that what, an Argo CD source of an
// Application the Kargo Stage stage updates, deploys the branch r names,
// which the repository does not hold: Kargo renders it at promotion.
func kargoUnread(what, stage string, r *source.Revision) string {
	return what + " builds its path at targetRevision " + r.Rev() + ", and the Kargo Stage " + stage + " updates it (" + kargoStageAnnotation +
		"): Kargo's promotion writes to that branch what it renders from this repository (an overlay's kustomize-build, a chart's helm-template), so the branch, which the repository does not hold, would show the last promotion, not this change; keyhole reads nothing for it, and reads this repository's files as a walk finds them, each overlay a kustomization root built as kustomize-build builds it (keyhole check DIR checks one alone)"
}
