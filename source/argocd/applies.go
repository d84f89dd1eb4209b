package argocd

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// An Argo CD Application applies what its source's path builds. keyhole's
// inputs (Connections, SandboxClasses, AgentRuntimes) are not what a
// cluster runs: keyhole render turns them into the sandboxes and their
// egress proxy. A source that builds them without keyhole's config
// management plugin (keyholePlugin) has Argo CD apply them as written:
// only a cluster running the omnia operator, which serves these kinds
// itself, makes anything of them. Said once per unit
// (CodeArgoCDUnrendered).

// keyholeGroup is the API group of keyhole's input kinds.
const keyholeGroup = "omnia.altairalabs.ai/"

// Applies is what Argo CD applies of the Argo CD unit u's build, docs,
// that keyhole's render does not make: keyhole's inputs as written, for
// a source keyhole's plugin does not render (unrenderedNote); the
// objects other than keyhole's inputs, for one it does (omittedNote),
// but those another Argo CD source applies as written
// (siblingApplies).
func (Engine) Applies(h source.Host, u *source.Unit, docs []*source.Document) []diag.Diagnostic {
	var out []diag.Diagnostic
	if n, ok := unrenderedNote(u, docs); ok {
		out = append(out, n)
	}
	if n, ok := omittedNote(u, docs, siblingApplies(h, u)); ok {
		out = append(out, n)
	}
	return out
}

// siblingApplies reports, of a document the Argo CD unit u's build
// read, whether another Argo CD source applies its file as written to
// u's cluster: a directory or kustomize source whose path holds it, of
// u's Application beside the source keyhole's plugin renders, or of
// another Application (an app of apps' entry for the Secrets).
func siblingApplies(h source.Host, u *source.Unit) func(*source.Document) bool {
	var roots []string
	for _, v := range h.EngineUnits() {
		if v != u && v.Argo != nil && !v.KeyholePlugin() && v.Helm == nil && (v.Decl == u.Decl || v.Cluster == u.Cluster) {
			roots = append(roots, v.Root)
		}
	}
	return func(d *source.Document) bool {
		abs := h.Abs(d.File)
		return slices.ContainsFunc(roots, func(root string) bool { return source.Within(root, abs) })
	}
}

// unrenderedNote is the warning that the Argo CD unit u, not rendered by
// keyhole's plugin, applies the inputs among docs (its build) as
// written; ok is false when it applies none, or keyhole renders it.
func unrenderedNote(u *source.Unit, docs []*source.Document) (diag.Diagnostic, bool) {
	if u.Argo == nil || u.KeyholePlugin() {
		return diag.Diagnostic{}, false
	}
	kinds := map[string]int{}
	for _, d := range docs {
		if o := d.Object(); strings.HasPrefix(o.APIVersion, keyholeGroup) {
			kinds[o.Kind]++
		}
	}
	if len(kinds) == 0 {
		return diag.Diagnostic{}, false
	}
	var what []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		s := k
		if n := kinds[k]; n > 1 {
			s = fmt.Sprintf("%d %ss", n, k)
		}
		what = append(what, s)
	}
	return diag.Diagnostic{Code: source.CodeArgoCDUnrendered, Severity: diag.Warning, Pos: u.Decl, Units: []string{u.Name},
		Message: "Argo CD Application " + strings.TrimPrefix(u.Name, "argocd:") + " applies keyhole's inputs as written (" + strings.Join(what, ", ") +
			"), not keyhole's render of them: unless the cluster runs the omnia operator, which serves these kinds itself, nothing makes their sandboxes and egress proxy; render its path with keyhole's config management plugin (source.plugin.name keyhole-VERSION, examples/argocd), or commit keyhole render's output and point it at the unit's directory there (keyhole.yaml's argocd.rendered, examples/argocd-committed)"}, true
}

// omittedNote is the warning that the Argo CD unit u, which keyhole's
// plugin renders, builds objects among docs that are not keyhole's
// inputs (a Secret, an ExternalSecret, a ConfigMap): keyhole's render
// holds only the objects it makes, never a Secret, so Argo CD never
// applies them. A Secret a Connection reads is then missing in the
// cluster, however the check found it. ok is false when there are none.
// applied says which of docs another Argo CD source applies as
// written: those are not omitted.
func omittedNote(u *source.Unit, docs []*source.Document, applied func(*source.Document) bool) (diag.Diagnostic, bool) {
	if u.Argo == nil || !u.KeyholePlugin() {
		return diag.Diagnostic{}, false
	}
	var what []string
	for _, d := range docs {
		o := d.Object()
		if d.IsAgent() || strings.HasPrefix(o.APIVersion, keyholeGroup) || o.APIVersion == source.ConfigAPIVersion || o.Kind == "" {
			continue
		}
		if applied(d) {
			continue
		}
		if o.Kind == "Application" && d.File == u.Decl.File && strings.HasPrefix(strings.TrimPrefix(u.Name, "argocd:"), cmp.Or(o.Namespace, "argocd")+"/"+o.Name) {
			continue // the Application itself, which is applied, since it renders
		}
		what = append(what, o.Kind+" "+cmp.Or(o.Namespace, u.Namespace, "default")+"/"+o.Name)
	}
	if len(what) == 0 {
		return diag.Diagnostic{}, false
	}
	slices.Sort(what)
	return diag.Diagnostic{Code: source.CodeArgoCDRenderOmits, Severity: diag.Warning, Pos: u.Decl, Units: []string{u.Name},
		Message: "Argo CD Application " + strings.TrimPrefix(u.Name, "argocd:") + " renders its path with keyhole's config management plugin, whose render holds only the objects keyhole makes, never a Secret: Argo CD never applies what else the path builds (" +
			strings.Join(what, ", ") + "); apply those from a source of their own, such as a second source of the Application"}, true
}
