package compiler

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// Gate is what, besides the objects themselves, decides what keyhole
// check reads and reports: the governing Config's ceiling, exclude and
// include patterns, ignore entries and other settings, and the ignore
// annotations objects carry. Each entry is one line, so that keyhole diff
// can tell a change to the gate itself from a change to what it judges;
// sorted, each once.
type Gate []GateEntry

// GateEntry is one setting of the gate.
type GateEntry struct {
	// What is the kind of entry: one of the Gate* constants.
	What string `json:"what"`
	// Value is the entry on one line: a ceiling entry or an ignore entry
	// as JSON, a pattern, "KIND NAMESPACE/NAME: CODE" for an annotation,
	// "FIELD: JSON" for another setting.
	Value string `json:"value"`
}

// The kinds of gate entry.
const (
	GateCeiling    = "ceiling"    // an entry of the Config's ceiling
	GateExclude    = "exclude"    // a pattern of the Config's exclude
	GateInclude    = "include"    // a pattern of the Config's include
	GateIgnore     = "ignore"     // an entry of the Config's ignore
	GateAnnotation = "annotation" // a code of an object's keyhole.dev/ignore
	GateSetting    = "setting"    // any other field of the Config
)

// gateOf reads the gate of the documents: the Configs' settings (the
// loader keeps only the governing one) and the ignore annotations of the
// others, their digests dgs.
func gateOf(docs []*source.Document, configs []*source.Document, dgs digests) Gate {
	var g Gate
	for _, d := range configs {
		g = append(g, configGate(d.Node)...)
	}
	for _, d := range docs {
		if d.Node == nil && !d.Released() {
			continue
		}
		o := d.Object()
		if isConfig(o) {
			continue
		}
		var codes []string
		if dg := dgs.of(d); dg != nil {
			codes = dg.ignoreList()
		} else if d.Node != nil {
			codes = ignoreList(annotations(d.Node))
		}
		for _, c := range codes {
			id := o.Name
			if o.Namespace != "" {
				id = o.Namespace + "/" + o.Name
			}
			g = append(g, GateEntry{What: GateAnnotation, Value: printable(o.Kind + " " + id + ": " + c)})
		}
	}
	slices.SortFunc(g, func(a, b GateEntry) int {
		if c := strings.Compare(a.What, b.What); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	return slices.Compact(g)
}

// configGate is the gate entries of one Config document.
func configGate(n *yaml.Node) Gate {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var g Gate
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		switch {
		case k == "apiVersion" || k == "kind" || k == "metadata":
		case (k == "ceiling" || k == "ignore") && v.Kind == yaml.SequenceNode:
			for _, e := range v.Content {
				g = append(g, GateEntry{What: k, Value: oneLine(e)})
			}
		case (k == "exclude" || k == "include") && v.Kind == yaml.SequenceNode:
			for _, e := range v.Content {
				g = append(g, GateEntry{What: k, Value: oneLine(e)})
			}
		default:
			g = append(g, GateEntry{What: GateSetting, Value: k + ": " + oneLine(v)})
		}
	}
	return g
}

// oneLine writes a node as compact JSON (mapping keys sorted), or, when
// it has no JSON form, as YAML's flow style.
func oneLine(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		return printable(n.Value)
	}
	var v any
	if err := n.Decode(&v); err == nil {
		if b, err := json.Marshal(v); err == nil {
			return string(b)
		}
	}
	c := *n
	c.Style = yaml.FlowStyle
	b, _ := yaml.Marshal(&c)
	return strings.TrimSpace(string(b))
}

// printable is s, or s quoted when it holds a control character: an
// entry is one line.
func printable(s string) string {
	if strings.ContainsFunc(s, unicode.IsControl) {
		return strconv.Quote(s)
	}
	return s
}
