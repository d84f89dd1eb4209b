package argocd

import (
	"encoding/json"
	"fmt"
	"maps"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// mergeGenerator is the parameter sets of a merge, as the controller
// makes them: each set of its first generator, with the values of the
// set of each later generator that gives the same values to its
// mergeKeys merged in, later generators winning (maps merged key by key
// with goTemplate; without it, every parameter a flat string). A later
// generator's set that matches no first one is dropped. The controller
// refuses a merge of fewer than two generators, without mergeKeys, or
// whose later generator gives two sets the same merge key.
func mergeGenerator(run *appSetRun, m *yaml.Node, depth int) ([]map[string]any, *appSetStop) {
	gens := source.Lookup(m, "generators")
	if gens == nil || gens.Kind != yaml.SequenceNode || len(gens.Content) < 2 {
		return nil, genError("a merge generator must have two generators or more")
	}
	keys := source.StringList(source.Lookup(m, "mergeKeys"))
	if len(keys) == 0 {
		return nil, genError("a merge generator must name its mergeKeys")
	}
	if depth > 0 {
		return nil, unknownApart("a merge inside a matrix or a merge is not read by keyhole")
	}
	base, stop := generatorParams(run, gens.Content[0], depth+1)
	if stop != nil {
		return nil, stop
	}
	out := make([]map[string]any, len(base))
	for i, p := range base {
		out[i] = maps.Clone(p)
	}
	for i, g := range gens.Content[1:] {
		sets, stop := generatorParams(run, g, depth+1)
		if stop != nil {
			return nil, stop
		}
		byKey := make(map[string]map[string]any, len(sets))
		for _, p := range sets {
			k := mergeKey(keys, p)
			if _, ok := byKey[k]; ok {
				return nil, genError(fmt.Sprintf("its merge's generator %d gives two parameter sets the merge key %s: the controller requires each to be unique", i+2, k))
			}
			byKey[k] = p
		}
		for j, p := range out {
			over, ok := byKey[mergeKey(keys, p)]
			if !ok {
				continue
			}
			if run.t.goTemplate {
				out[j] = mergeParams(p, over)
				continue
			}
			for k, v := range over {
				p[k] = v
			}
		}
	}
	return out, nil
}

// mergeKey is the key a merge matches parameter sets by: the values p
// gives the merge keys (nil where it gives none), as JSON, as the
// controller writes it.
func mergeKey(keys []string, p map[string]any) string {
	k := make(map[string]any, len(keys))
	for _, name := range keys {
		k[name] = p[name]
	}
	b, err := json.Marshal(k)
	if err != nil {
		return fmt.Sprint(k)
	}
	return string(b)
}
