package schema

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Limits on one document. The loader resolves aliases with its own budget;
// these keep Validate safe on a node tree built any other way, such as a
// billion-laughs alias tree or a hand-made cycle.
// maxNodes counts nodes as visited, aliases expanded: 2^17 is a document
// of a megabyte or two, far past any real resource, and small enough that
// a document at the limit checks in milliseconds.
const (
	maxDepth = 100
	maxNodes = 1 << 17
)

// converter turns a YAML node tree into the values encoding/json would
// decode the equivalent JSON into, which is what the JSON Schema validator
// takes. Problems JSON cannot represent (non-string keys, duplicate keys,
// infinities and NaN) become violations; the rest is the schema's to judge.
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
		tag := n.ShortTag()
		if tag == "!!float" && nonFinite(n.Value) {
			// Not quoted: the value may be a Secret's.
			c.fail(n, "infinity and NaN are numbers JSON has no form for; quote the value if it is text")
			return n.Value
		}
		if n.Style&yaml.TaggedStyle != 0 && !tagHolds(n, tag) {
			// Not quoted either: the value may be a Secret's.
			c.fail(n, fmt.Sprintf("the text tagged %s is not a value of that type, and YAML 1.2 readers (kustomize, Flux, keyhole) refuse the document; drop the tag, or write %s", tag, tagExample(tag)))
			return n.Value
		}
		return scalar(n, tag)
	}
	return nil
}

// tagHolds reports whether a scalar whose tag was written explicitly is
// a value of that tag as yaml.v3, the reader of kustomize, Flux and
// keyhole's own decoder, resolves it: `!!bool yes` is YAML 1.1's, and
// they refuse it where a schema reading it as true would pass it.
func tagHolds(n *yaml.Node, tag string) bool {
	switch tag {
	case "!!bool", "!!int", "!!float", "!!null":
		var v any
		return n.Decode(&v) == nil
	}
	return true
}

// tagExample is what a value of tag looks like, for messages.
func tagExample(tag string) string {
	switch tag {
	case "!!bool":
		return "true or false"
	case "!!null":
		return "null"
	}
	return "a number"
}

// nonFinite reports whether the text of a !!float is a YAML infinity or
// NaN (.inf, -.Inf, .NAN...), a number JSON cannot hold: Kubernetes'
// YAML-to-JSON conversion refuses a document with one, wherever it is.
func nonFinite(text string) bool {
	switch strings.ToLower(strings.TrimLeft(text, "+-")) {
	case ".inf", ".nan":
		return true
	}
	return false
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
			// An unquoted {{ .key }} is this mapping of a mapping: the
			// schema's finding on the value says so, once.
			if _, tmpl := unquotedTemplate(n); !tmpl {
				c.fail(k, "a mapping key must be a string, not a "+nodeKindName(k))
			}
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
			if c.overflow {
				return
			}
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

// scalar resolves a scalar by its tag, n.ShortTag(). Custom tags and tags
// JSON has no type for (timestamps, binary) keep their text.
func scalar(n *yaml.Node, tag string) any {
	switch tag {
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

// parseFloat parses a YAML float. Infinities and NaN have no JSON form:
// the converter reports them (nonFinite), and here they stay text.
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

// keyIndex maps each key of a mapping, merged keys included, to its key
// and value nodes.
type keyIndex map[string][2]*yaml.Node

// nodeIndex finds nodes by path after a failed validation. Each mapping's
// keys are indexed once, on first use, so that a mapping with thousands of
// bad fields costs linear time, not quadratic.
type nodeIndex struct {
	root *yaml.Node
	maps map[*yaml.Node]keyIndex
}

// lookup walks from the document root along a JSON pointer's segments,
// with the same alias and merge rules as converter. It returns the node at
// the end and, when the last segment is a mapping key, that key's node;
// where the path leaves the tree, the last node it reached.
func (x *nodeIndex) lookup(segs []string) (node, key *yaml.Node) {
	n := deref(x.root)
	if n != nil && n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return x.root, nil
		}
		n = deref(n.Content[0])
	}
	for _, seg := range segs {
		if n == nil {
			return nil, nil
		}
		switch n.Kind {
		case yaml.MappingNode:
			kv, ok := x.keys(n, 0)[seg]
			if !ok {
				return n, nil
			}
			key, n = kv[0], deref(kv[1])
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

// keys returns m's index: written keys first (the first of duplicates
// wins, as in converter), then merged keys not written.
func (x *nodeIndex) keys(m *yaml.Node, depth int) keyIndex {
	if idx, ok := x.maps[m]; ok {
		return idx
	}
	if x.maps == nil {
		x.maps = map[*yaml.Node]keyIndex{}
	}
	idx := keyIndex{}
	// Stored before merges are read, so a merge cycle ends here.
	x.maps[m] = idx
	var merges []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if isMerge(k) {
			merges = append(merges, m.Content[i+1])
			continue
		}
		if s, ok := keyString(k); ok {
			if _, dup := idx[s]; !dup {
				idx[s] = [2]*yaml.Node{k, m.Content[i+1]}
			}
		}
	}
	if depth > maxDepth {
		return idx
	}
	for _, mv := range merges {
		for _, src := range mergeSources(mv) {
			for s, kv := range x.keys(src, depth+1) {
				if _, ok := idx[s]; !ok {
					idx[s] = kv
				}
			}
		}
	}
	return idx
}
