package argocd

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// A generator that makes no parameter sets keyhole reads says why, as a
// appSetStop: genUnread where they are not known (advice says
// what would make them known), genError where the controller refuses
// the generator. Whether not knowing them matters (the directories the
// template deploys hold something of keyhole's) is the loader's to say.

// unknownApart is the stop of a generator keyhole does not read: the
// directories its template deploys can still be checked on their own.
func unknownApart(msg string) *appSetStop {
	return &appSetStop{Severity: diag.Warning, Message: msg + ", so which Applications it makes is not known",
		Advice: "check the directories its template deploys on their own, keyhole check DIR, to have what they hold checked", Apart: true}
}

func genUnread(msg, advice string) *appSetStop {
	return &appSetStop{Severity: diag.Warning, Message: msg, Advice: advice}
}

func genError(msg string) *appSetStop {
	return &appSetStop{Severity: diag.Error, Message: msg}
}

// appSetRun is the reading of one ApplicationSet's generator.
type appSetRun struct {
	h  source.Host
	t  appSetTmpl
	in appSetInput
	// unmatched are its git generators' paths that match nothing.
	unmatched []appSetUnmatched
	// assumed says a clusters generator gave the local cluster because
	// the repository declares no cluster Secret.
	assumed bool
}

// changing is the stop a template error calling a function whose result
// changes on every run makes, or nil for any other error.
func changing(err error) *appSetStop {
	var ce changingError
	if !errors.As(err, &ce) {
		return nil
	}
	return genUnread("its template calls "+ce.name+", whose value differs on every run; keyhole does not evaluate it, so which Applications it makes is not known",
		"fill that value from a generator's parameter to have them checked")
}

// reads says what a generator keyhole does not read reads instead of the
// repository, for the generators that read a service.
func reads(g *yaml.Node) string {
	switch {
	case source.Lookup(g, "pullRequest") != nil:
		return ", which lists a service's pull requests"
	case source.Lookup(g, "scmProvider") != nil:
		return ", which lists an SCM provider's repositories"
	case source.Lookup(g, "clusterDecisionResource") != nil:
		return ", which reads a resource in the cluster"
	case source.Lookup(g, "plugin") != nil:
		return ", which asks a plugin's service"
	}
	return ""
}

// paramsNamed names a generator's parameter set in a message: by its
// path, or by its keys and values, sorted.
func paramsNamed(p map[string]any) string {
	if v, ok := p["path"]; ok {
		if s, ok := v.(string); ok {
			return s
		}
		if m, ok := v.(map[string]any); ok {
			return fmt.Sprint(m["path"])
		}
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		kv = append(kv, fmt.Sprintf("%s=%v", k, p[k]))
	}
	return "{" + strings.Join(kv, ", ") + "}"
}

// generatorParams is the parameter sets the ApplicationSet generator g
// makes, as the ApplicationSet controller makes them and as its
// selector keeps them, or why it makes none here. depth counts the
// matrices around g.
func generatorParams(run *appSetRun, g *yaml.Node, depth int) ([]map[string]any, *appSetStop) {
	git, list, matrix, clusters := source.Lookup(g, "git"), source.Lookup(g, "list"), source.Lookup(g, "matrix"), source.Lookup(g, "clusters")
	for _, n := range []*yaml.Node{git, list, clusters} {
		if source.Lookup(n, "template") != nil {
			return nil, unknownApart("a generator's own template is not applied by keyhole")
		}
	}
	var params []map[string]any
	var stop *appSetStop
	switch {
	case git != nil:
		params, stop = gitGenerator(run, git)
		if stop == nil {
			params, stop = generatorValues(run.t, git, params)
		}
	case list != nil:
		params, stop = listGenerator(list, run.t.goTemplate)
	case clusters != nil:
		params, stop = clustersGenerator(run, clusters)
		if stop == nil {
			params, stop = generatorValues(run.t, clusters, params)
		}
		if stop == nil && source.BoolField(clusters, "flatList") {
			items := make([]any, len(params))
			for i, p := range params {
				items[i] = p
			}
			params = []map[string]any{{"clusters": items}}
		}
	case matrix != nil:
		params, stop = matrixGenerator(run, matrix, depth)
	default:
		kind := "an empty"
		if g.Kind == yaml.MappingNode && len(g.Content) > 0 {
			kind = "the " + g.Content[0].Value
		}
		return nil, unknownApart("only git, list, clusters and matrix generators are read, not " + kind + " generator" + reads(g))
	}
	if stop != nil {
		return nil, stop
	}
	if sel := source.Lookup(g, "selector"); sel != nil {
		var err error
		if params, err = selectParams(sel, params); err != nil {
			return nil, genError(err.Error())
		}
	}
	return params, nil
}

// generatorValues adds the values of a generator (the field of its
// kind) to each of its parameter sets, filled with that set's
// parameters: values.KEY, or a values map with goTemplate.
func generatorValues(t appSetTmpl, gen *yaml.Node, params []map[string]any) ([]map[string]any, *appSetStop) {
	vals := source.Lookup(gen, "values")
	if vals == nil {
		return params, nil
	}
	var m map[string]string
	if vals.Kind != yaml.MappingNode || vals.Decode(&m) != nil {
		return nil, genError("a generator's values must be a mapping of strings")
	}
	for i, p := range params {
		filled := map[string]any{}
		for k, v := range m {
			s, err := t.render(v, p)
			if err != nil {
				if stop := changing(err); stop != nil {
					return nil, stop
				}
				return nil, genError(fmt.Sprintf("a generator's values cannot be filled for %s: %v", paramsNamed(p), err))
			}
			filled[k] = s
		}
		p = maps.Clone(p)
		if t.goTemplate {
			p["values"] = filled
		} else {
			for k, v := range filled {
				p["values."+k] = v
			}
		}
		params[i] = p
	}
	return params, nil
}

// nodeBytes is n as YAML, or nil.
func nodeBytes(n *yaml.Node) []byte {
	b, _ := yaml.Marshal(n)
	return b
}
