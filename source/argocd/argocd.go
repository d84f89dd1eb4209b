// Package argocd is the Argo CD ApplicationSet engine: it makes an
// ApplicationSet's Applications as Argo CD's ApplicationSet controller
// makes them (applicationset/generators, applicationset/utils): the
// parameter sets of its list, git (directories and files), clusters and
// matrix generators, kept by their selectors, and its template filled
// with each (fasttemplate, or Go templates with Sprig's functions and
// Argo CD's, in a child process bounded in memory and time,
// internal/apart) and patched with its templatePatch. It reads the
// repository through the loader's source.Host, and the cluster Secrets
// the repository declares as the loader gives them. Which
// ApplicationSets are read, and what each Application deploys, is the
// loader's (package source). See docs/inputs.md.
package argocd

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// Engine makes ApplicationSets' Applications for source.Load
// (source.Engines.Argo).
type Engine struct{}

var _ source.Argo = Engine{}

// ApplicationSet is what each generator of the ApplicationSet spec makes,
// in order: the parameter sets it makes from the repository, read
// through h, or from the cluster Secrets in.Clusters gives, as its
// selector keeps them; and the template, filled with each set and
// patched with the templatePatch, one Application each. Nil when spec
// has no template or no list of generators.
func (Engine) ApplicationSet(h source.Host, spec *yaml.Node, in source.AppSetInput) []source.AppSetGenerated {
	tmpl := source.Lookup(spec, "template")
	gens := source.Lookup(spec, "generators")
	if tmpl == nil || gens == nil || gens.Kind != yaml.SequenceNode {
		return nil
	}
	t := appSetTemplating(spec)
	tp := source.Lookup(spec, "templatePatch")
	out := make([]source.AppSetGenerated, 0, len(gens.Content))
	for _, g := range gens.Content {
		run := &appSetRun{h: h, t: t, in: in}
		params, stop := generatorParams(run, g, 0)
		gen := source.AppSetGenerated{Line: g.Line, Column: g.Column, Unmatched: run.unmatched, Stop: stop}
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
