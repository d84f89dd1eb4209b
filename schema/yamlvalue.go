package schema

import (
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Limits on one document. The loader resolves aliases with its own budget;
// these keep Validate safe on a node tree built any other way, such as a
// billion-laughs alias tree or a hand-made cycle.
const (
	maxDepth = 100
	maxNodes = 1 << 20
)

// converter turns a YAML node tree into the values encoding/json would
// decode the equivalent JSON into, which is what the JSON Schema validator
// takes. Problems JSON cannot represent (non-string keys, duplicate keys)
// become violations; the rest is the schema's to judge.
type converter struct {
	nodes int
	// path is the stack of keys and indexes down to the current node,
	// formatted only when a violation needs it.
	path []pathSeg
	vs   []Violation
	// overflow is set once a limit is hit; conversion then stops.
	overflow bool
}

func (c *converter) fail(n *yaml.Node, msg string) {
	c.vs = append(c.vs, Violation{Line: n.Line, Column: n.Column, Path: formatPath(c.path), Message: msg})
}

func (c *converter) value(n *yaml.Node, depth int) any {
	if c.overflow {
		return nil
	}
	c.nodes++
	if depth > maxDepth || c.nodes > maxNodes {
		c.overflow = true
		c.fail(n, "the document nests too deeply or is too large to check")
		return nil
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return c.value(n.Content[0], depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil
		}
		return c.value(n.Alias, depth+1)
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, item := range n.Content {
			c.path = append(c.path, pathSeg{index: i})
			out[i] = c.value(item, depth+1)
			c.path = c.path[:len(c.path)-1]
		}
		return out
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		c.mapping(out, n, depth, true)
		return out
	case yaml.ScalarNode:
		return scalar(n)
	}
	return nil
}

// mapping adds n's pairs to out. Keys written in the mapping itself win
// over keys merged in with "<<", as YAML's merge key specifies; explicit
// says whether duplicates are reported (merged mappings may repeat keys).
func (c *converter) mapping(out map[string]any, n *yaml.Node, depth int, explicit bool) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMerge(k) {
			merges = append(merges, v)
			continue
		}
		key, ok := keyString(k)
		if !ok {
			c.fail(k, "a mapping key must be a string, not a "+nodeKindName(k))
			continue
		}
		c.path = append(c.path, pathSeg{key: key, isKey: true})
		if _, dup := out[key]; !dup {
			out[key] = c.value(v, depth+1)
		} else if explicit {
			c.fail(k, "duplicate field "+quote(key))
		}
		c.path = c.path[:len(c.path)-1]
	}
	for _, m := range merges {
		for _, src := range mergeSources(m) {
			c.nodes++
			if depth > maxDepth || c.nodes > maxNodes {
				c.overflow = true
				c.fail(m, "the document nests too deeply or is too large to check")
				return
			}
			c.mapping(out, src, depth+1, false)
		}
	}
}

// isMerge reports whether k is YAML's merge key "<<".
func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Tag == "!!merge"
}

// mergeSources returns the mappings a merge value names: a mapping, an
// alias of one, or a sequence of those. Anything else merges nothing.
func mergeSources(v *yaml.Node) []*yaml.Node {
	v = deref(v)
	switch {
	case v == nil:
		return nil
	case v.Kind == yaml.MappingNode:
		return []*yaml.Node{v}
	case v.Kind == yaml.SequenceNode:
		var out []*yaml.Node
		for _, item := range v.Content {
			if item = deref(item); item != nil && item.Kind == yaml.MappingNode {
				out = append(out, item)
			}
		}
		return out
	}
	return nil
}

// deref follows an alias chain, giving up on a cycle.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > maxDepth {
			return nil
		}
		n = n.Alias
	}
	return n
}

// keyString returns a mapping key as JSON has it. Scalar keys of any type
// are taken by their text, as Kubernetes' YAML-to-JSON conversion does.
func keyString(k *yaml.Node) (string, bool) {
	k = deref(k)
	if k == nil || k.Kind != yaml.ScalarNode {
		return "", false
	}
	return k.Value, true
}

// scalar resolves a scalar by its tag. Custom tags and tags JSON has no
// type for (timestamps, binary) keep their text.
func scalar(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		switch strings.ToLower(n.Value) {
		case "true", "yes", "on", "y":
			return true
		}
		return false
	case "!!int":
		if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			return float64(i)
		}
		if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err == nil && !math.IsInf(f, 0) {
			return f
		}
	case "!!float":
		if f, ok := parseFloat(n.Value); ok {
			return f
		}
	}
	return n.Value
}

// parseFloat parses a YAML float. Infinities and NaN have no JSON form and
// stay text.
func parseFloat(s string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// nodeKindName names a node's kind the way messages do.
func nodeKindName(n *yaml.Node) string {
	switch deref(n).Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "scalar"
}

// lookup walks from the document root along a JSON pointer's segments,
// with the same alias and merge rules as converter. It returns the node at
// the end and, when the last segment is a mapping key, that key's node.
func lookup(root *yaml.Node, segs []string) (node, key *yaml.Node) {
	n := deref(root)
	if n != nil && n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return root, nil
		}
		n = deref(n.Content[0])
	}
	for _, seg := range segs {
		if n == nil {
			return nil, nil
		}
		switch n.Kind {
		case yaml.MappingNode:
			k, v := findKey(n, seg, 0)
			if v == nil {
				return n, nil
			}
			key, n = k, deref(v)
		case yaml.SequenceNode:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(n.Content) {
				return n, nil
			}
			key, n = nil, deref(n.Content[i])
		default:
			return n, nil
		}
	}
	return n, key
}

// findKey finds key in mapping m: written keys first, then merged ones.
func findKey(m *yaml.Node, key string, depth int) (k, v *yaml.Node) {
	if depth > maxDepth {
		return nil, nil
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if isMerge(m.Content[i]) {
			merges = append(merges, m.Content[i+1])
			continue
		}
		if s, ok := keyString(m.Content[i]); ok && s == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	for _, mv := range merges {
		for _, src := range mergeSources(mv) {
			if k, v := findKey(src, key, depth+1); v != nil {
				return k, v
			}
		}
	}
	return nil, nil
}
