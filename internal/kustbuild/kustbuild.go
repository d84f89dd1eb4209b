// Package kustbuild runs kustomize as keyhole builds a kustomization:
// Build, with plugins off, on a file system confined to the repository's
// tree whatever the load restrictions (confine.go), with keyhole's limits
// on what it reads (Budget),
// the loader's own rules for each file it reads (Rules), remote bases
// refused unless allowed (RemoteEntry), and origin annotations asked for
// (WithBuildMetadata). It also keeps Secret values out of kustomize's
// messages (Redact) and reads what a failed build's error says
// (failure.go), from kustomize's typed errors where it returns them and
// from its messages where it does not. The loader (package source) turns
// what a build returns into documents and diagnostics, with positions.
package kustbuild

import (
	"errors"
	"slices"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/konfig"
)

// Redacted stands in for a Secret value in a kustomize error.
const Redacted = "[redacted]"

// IsKustomizationName reports whether a file name is one kustomize reads
// as a kustomization.
func IsKustomizationName(name string) bool {
	return slices.Contains(konfig.RecognizedKustomizationFileNames(), name)
}

// DecodeYAML decodes the next document of dec into n; a panic of the YAML
// library is an error, never repeating its value, which may quote the
// input. The loader decodes with it too.
func DecodeYAML(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("yaml: the YAML parser failed on this input")
		}
	}()
	return dec.Decode(n)
}

// Lookup returns the value node of key in mapping m, or nil when m is not
// a mapping or has no such key; yaml.v3 offers no equivalent. source.Lookup
// is this function.
func Lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if k.Kind == yaml.ScalarNode && k.Value == key && k.ShortTag() == "!!str" {
			return m.Content[i+1]
		}
	}
	return nil
}
