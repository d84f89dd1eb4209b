package argocd

import (
	"fmt"
	"maps"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// matrixGenerator is the parameter sets of a matrix: each set of its
// first generator joined with each set of its second, which may name
// the first's parameters (filled in before it runs). Without goTemplate
// a key both sets hold with two values is refused, as the controller
// refuses it; with it, the two are merged, the first's values winning.
func matrixGenerator(run *appSetRun, m *yaml.Node, depth int) (out []map[string]any, stop *appSetStop) {
	gens := source.Lookup(m, "generators")
	if gens == nil || gens.Kind != yaml.SequenceNode || len(gens.Content) != 2 {
		return nil, genError("a matrix generator must have exactly two generators")
	}
	if depth > 0 {
		return nil, unknownApart("a matrix inside a matrix is not read by keyhole")
	}
	first, stop := generatorParams(run, gens.Content[0], depth+1)
	if stop != nil {
		return nil, stop
	}
	second := gens.Content[1]
	for _, a := range first {
		g := second
		if strings.Contains(string(nodeBytes(second)), "{{") {
			filled, err := run.t.fill(second, a)
			if err != nil {
				if stop := changing(err); stop != nil {
					return nil, stop
				}
				return nil, genError(fmt.Sprintf("its matrix's second generator cannot be filled for %s: %v", paramsNamed(a), err))
			}
			g = filled
		}
		bs, stop := generatorParams(run, g, depth+1)
		if stop != nil {
			return nil, stop
		}
		if len(out)+len(bs) > maxAppSetParams {
			return nil, genError(fmt.Sprintf("its matrix makes more than %d Applications, more than keyhole reads of one generator", maxAppSetParams))
		}
		for _, b := range bs {
			if run.t.goTemplate {
				out = append(out, mergeParams(b, a))
				continue
			}
			p := maps.Clone(a)
			for k, v := range b {
				if cur, ok := p[k]; ok && fmt.Sprint(cur) != fmt.Sprint(v) {
					return nil, genError(fmt.Sprintf("its matrix's generators both give %s, with two values (%v and %v)", k, cur, v))
				}
				p[k] = v
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// mergeParams is base with over merged in, over's values winning, maps
// merged key by key (as mergo.Merge WithOverride merges them).
func mergeParams(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	for k, v := range over {
		bm, ok1 := out[k].(map[string]any)
		om, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = mergeParams(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}

// maxAppSetParams bounds the Applications one generator makes: a matrix
// of two long lists (or of every directory twice) grows as their
// product.
const maxAppSetParams = 10000
