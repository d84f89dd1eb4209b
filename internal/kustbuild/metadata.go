package kustbuild

import (
	"bytes"
	"slices"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/types"
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
