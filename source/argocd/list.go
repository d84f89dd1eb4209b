package argocd

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// listGenerator is the parameter sets of a list generator: its elements,
// and those its elementsYaml holds. Without goTemplate every value must
// be a string, but a map of strings under values (values.KEY), as the
// controller requires.
func listGenerator(list *yaml.Node, goTemplate bool) ([]map[string]any, *appSetStop) {
	var elems []map[string]any
	if e := source.Lookup(list, "elements"); e != nil {
		if e.Decode(&elems) != nil {
			return nil, genError("its list generator's elements are not a list of mappings")
		}
	}
	if s := source.StringField(list, "elementsYaml"); s != "" {
		var more []map[string]any
		if yaml.Unmarshal([]byte(s), &more) != nil {
			return nil, genError("its list generator's elementsYaml is not a YAML list of mappings")
		}
		elems = append(elems, more...)
	}
	if goTemplate {
		return elems, nil
	}
	out := make([]map[string]any, 0, len(elems))
	for _, e := range elems {
		p := map[string]any{}
		for k, v := range e {
			if m, ok := v.(map[string]any); ok && k == "values" {
				for vk, vv := range m {
					s, ok := vv.(string)
					if !ok {
						return nil, genError(fmt.Sprintf("its list generator's values.%s is not a string, which the controller refuses without goTemplate", vk))
					}
					p["values."+vk] = s
				}
				continue
			}
			s, ok := v.(string)
			if !ok {
				return nil, genError(fmt.Sprintf("its list generator's %s is not a string, which the controller refuses without goTemplate", k))
			}
			p[k] = s
		}
		out = append(out, p)
	}
	return out, nil
}
