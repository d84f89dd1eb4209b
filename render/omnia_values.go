package render

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/source"
)

// decodeInput reads an input object's tree, node, as a generic map (its
// metadata is read from it) and its spec as a plain value, nil when it
// has none.
func decodeInput(in compiler.Object, node *yaml.Node) (raw map[string]any, spec any, err error) {
	if err := node.Decode(&raw); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrInvalidPlan, in.Source, err)
	}
	if n := source.Lookup(node, "spec"); n != nil {
		if spec, err = plainValue(n); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: spec: %w", ErrInvalidPlan, in.Source, err)
		}
	}
	return raw, spec, nil
}

// carried is an input object as a target carries it: apiVersion, kind,
// the metadata reduced to name, namespace (ns), labels and the
// annotations droppedAnnotation keeps, and spec as decodeInput read it.
func carried(in compiler.Object, apiVersion, kind, ns string, raw map[string]any, spec any) obj {
	md := obj{"name": in.Source.Name, "namespace": ns}
	meta, _ := raw["metadata"].(map[string]any)
	if labels := stringMap(meta["labels"], nil); len(labels) > 0 {
		md["labels"] = labels
	}
	if ann := stringMap(meta["annotations"], droppedAnnotation); len(ann) > 0 {
		md["annotations"] = ann
	}
	o := obj{"apiVersion": apiVersion, "kind": kind, "metadata": md}
	if spec != nil {
		o["spec"] = spec
	}
	return o
}

// droppedAnnotation reports the annotations the omnia target leaves out:
// keyhole's own suppression list, which means nothing to the operator,
// and the KRM orchestrator's bookkeeping, which kustomize re-assigns.
func droppedAnnotation(k string) bool {
	return k == compiler.IgnoreAnnotation ||
		strings.HasPrefix(k, "config.kubernetes.io/") ||
		strings.HasPrefix(k, "internal.config.kubernetes.io/")
}

// stringMap returns v's string entries as an obj, minus those drop says.
func stringMap(v any, drop func(string) bool) obj {
	m, _ := v.(map[string]any)
	out := obj{}
	for k, val := range m {
		s, ok := val.(string)
		if ok && (drop == nil || !drop(k)) {
			out[k] = s
		}
	}
	return out
}

// maxDepth bounds the nesting plainValue follows, and maxNodes the nodes
// it visits, counting each alias expansion: YAML aliases let a few lines
// stand for millions of nodes, which an operator's spec never needs.
const (
	maxDepth = 100
	maxNodes = 100_000
)

// plainValue converts a YAML node into the values emitYAML writes: maps
// with string keys, sequences, strings, booleans, and numbers or nulls as
// rawScalar in YAML's canonical spelling, so that an operator's open spec
// field is carried with its type unchanged. A timestamp is carried as
// the string it is written as, which is what the API server stores. The
// caller has decoded n with yaml.v3 first, which refuses alias bombs.
func plainValue(n *yaml.Node) (any, error) {
	var w walker
	return w.plainAt(n, 0)
}

// walker counts the nodes one plainValue call visits.
type walker struct{ nodes int }

func (w *walker) plainAt(n *yaml.Node, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	if w.nodes++; w.nodes > maxNodes {
		return nil, fmt.Errorf("more than %d values (aliases expanded)", maxNodes)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("a document of %d nodes", len(n.Content))
		}
		return w.plainAt(n.Content[0], depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("an alias to nothing")
		}
		return w.plainAt(n.Alias, depth+1)
	case yaml.MappingNode:
		out := make(obj, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				return nil, fmt.Errorf("line %d: only string map keys are carried (merge keys and other keys are not)", k.Line)
			}
			v, err := w.plainAt(n.Content[i+1], depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k.Value, err)
			}
			out[k.Value] = v
		}
		return out, nil
	case yaml.SequenceNode:
		out := make(list, len(n.Content))
		for i, c := range n.Content {
			v, err := w.plainAt(c, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = v
		}
		return out, nil
	case yaml.ScalarNode:
		return plainScalar(n)
	}
	return nil, fmt.Errorf("line %d: a YAML node of kind %d cannot be carried", n.Line, n.Kind)
}

// plainScalar converts one scalar by its resolved tag.
func plainScalar(n *yaml.Node) (any, error) {
	var err error
	switch n.ShortTag() {
	case "!!null":
		return rawScalar("null"), nil
	case "!!bool":
		var b bool
		if err = n.Decode(&b); err == nil {
			return b, nil
		}
	case "!!int":
		var v any
		if err = n.Decode(&v); err == nil {
			switch v := v.(type) {
			case int:
				return rawScalar(strconv.Itoa(v)), nil
			case int64:
				return rawScalar(strconv.FormatInt(v, 10)), nil
			case uint64:
				return rawScalar(strconv.FormatUint(v, 10)), nil
			case float64:
				return rawScalar(floatScalar(v)), nil
			}
			err = fmt.Errorf("an integer read as %T", v)
		}
	case "!!float":
		var f float64
		if err = n.Decode(&f); err == nil {
			return rawScalar(floatScalar(f)), nil
		}
	default:
		// Strings, timestamps, binary and custom tags: the text as written.
		return n.Value, nil
	}
	return nil, fmt.Errorf("line %d: %w", n.Line, err)
}

// floatScalar spells f as YAML reads back a float: special values in
// YAML's words, and a fraction or exponent always present so that 1.0
// does not come back as the integer 1.
func floatScalar(f float64) string {
	switch {
	case math.IsNaN(f):
		return ".nan"
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}
