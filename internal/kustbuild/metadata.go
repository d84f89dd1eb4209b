package kustbuild

import (
	"bytes"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/api/types"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// kustomize enables origin tracking only from the kustomization file
// (krusty.Options has no switch for it) and hands the setting down to
// every base; the loader adds it to the root kustomization it builds, and
// reads the annotations it makes.
const (
	buildMetadataField   = "buildMetadata"
	originAnnotationsOpt = types.OriginAnnotations
	transformerAnnotsOpt = types.TransformerAnnotations
)

// WithBuildMetadata returns the kustomization data with origin and
// transformer annotations enabled, keeping the options it already sets.
// Data that is not a YAML mapping is returned as it is, for kustomize to
// report.
func WithBuildMetadata(data []byte) []byte {
	var doc yaml.Node
	if err := DecodeYAML(yaml.NewDecoder(bytes.NewReader(data)), &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return data
	}
	root := doc.Content[0]
	seq := Lookup(root, buildMetadataField)
	if seq == nil || seq.Kind != yaml.SequenceNode {
		seq = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == buildMetadataField {
				root.Content = slices.Delete(root.Content, i, i+2)
				break
			}
		}
		root.Content = append(root.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: buildMetadataField}, seq)
	}
	for _, opt := range []string{originAnnotationsOpt, transformerAnnotsOpt} {
		if !slices.ContainsFunc(seq.Content, func(n *yaml.Node) bool { return n.Value == opt }) {
			seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: opt})
		}
	}
	explicitNulls(root)
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return data
	}
	return out
}

// explicitNulls writes ~ for every null that the input left empty, such as
// the value of resources in the flow mapping {resources}: yaml.v3 would
// marshal it as a quoted empty string, which kustomize reads as a string
// where a list belongs and refuses, where it accepts the null.
func explicitNulls(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Value == "" && n.ShortTag() == "!!null" {
		n.Value = "~"
		return
	}
	for _, c := range n.Content {
		explicitNulls(c)
	}
}

// The annotations kustomize writes when buildMetadata asks for them. They
// say where a built object came from; keyhole reads them and strips them
// from the node the compiler sees.
// (kustomize keeps their names in an internal package.)
const (
	originAnnotation = "config.kubernetes.io/origin"
	// TransformationsAnnotation lists the transformers that changed a
	// built object, each with the kustomization that configured it.
	TransformationsAnnotation = "alpha.config.kubernetes.io/transformations"
)

// BuiltNode is a copy of the built resource's mapping node, or nil when it
// is not a mapping, its values as the engine applies them (Written). The
// copy is taken from kustomize's own node rather than by parsing
// Resource.AsYAML, whose JSON round trip cost about as much as the rest
// of the mapping of a built object to its source.
func BuiltNode(r *resource.Resource) *yaml.Node {
	n := r.YNode()
	for n != nil && n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	return copyNode(n)
}

// copyNode copies n deeply, as a plain tree: the positions of the copy
// are set by the mapping to sources, never kustomize's.
func copyNode(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return copyNode(n.Alias)
	}
	c := &yaml.Node{Kind: n.Kind, Style: n.Style, Tag: n.Tag, Value: n.Value}
	if w := Written(n); w != n.Value {
		// A literal block writes the value as it is: what keyhole
		// writes of it again reads the same.
		c.Value, c.Style = w, yaml.LiteralStyle
	}
	if len(n.Content) > 0 {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, k := range n.Content {
			c.Content[i] = copyNode(k)
		}
	}
	return c
}

// StripBuildMetadata removes kustomize's origin and transformation
// annotations, and the annotations mapping when nothing else is left.
func StripBuildMetadata(n *yaml.Node) {
	md := Lookup(n, "metadata")
	ann := Lookup(md, "annotations")
	if ann == nil || ann.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(ann.Content); {
		switch ann.Content[i].Value {
		case originAnnotation, TransformationsAnnotation:
			ann.Content = slices.Delete(ann.Content, i, i+2)
		default:
			i += 2
		}
	}
	if len(ann.Content) == 0 {
		for i := 0; i+1 < len(md.Content); i += 2 {
			if md.Content[i].Value == "annotations" {
				md.Content = slices.Delete(md.Content, i, i+2)
				break
			}
		}
	}
}

// Written is the value of scalar n as the engine applies it. kustomize
// build and kustomize-controller write each built object out
// (Resource.AsYAML: kyaml's encoder, read back into JSON), and go-yaml's
// emitter writes a folded scalar (>) with a line break before each line
// that is more indented than the first, where YAML reads that line's
// break alone: the object applied holds a blank line there. That is n's
// value as written then read back; for any other scalar, n's value.
func Written(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode || n.Style&yaml.FoldedStyle == 0 || n.ShortTag() != "!!str" || !strings.Contains(n.Value, "\n") {
		return n.Value
	}
	out, err := kyaml.Marshal(&yaml.Node{Kind: yaml.ScalarNode, Style: n.Style, Tag: n.Tag, Value: n.Value})
	if err != nil {
		return n.Value
	}
	var back string
	if err := kyaml.Unmarshal(out, &back); err != nil {
		return n.Value
	}
	return back
}
