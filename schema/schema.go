// Package schema owns the shape of every document keyhole reads: the CUE
// schemas (schema.cue, the single source of truth), the JSON Schema and
// CRDs generated from them, the connector catalog, and the validator that
// turns a YAML document into violations with positions and readable
// messages.
//
// Validation does not evaluate CUE at run time: `go generate ./schema`
// turns the CUE into one JSON Schema document, which NewValidator compiles
// once. That is several times faster than unifying each document with the
// CUE definitions (see docs/schema.md for the figures), and tests fail when
// the generated files drift from the CUE.
package schema

import (
	_ "embed"
	"slices"
)

//go:embed schema.cue
var cueSource []byte

//go:embed schema.json
var jsonSchemaSource []byte

//go:embed crds/all.yaml
var crdSource []byte

// CUE returns the CUE source of the schemas, for `keyhole schema`.
func CUE() []byte { return clone(cueSource) }

// JSONSchema returns the JSON Schema (draft 2020-12) generated from the
// CUE: one document with every kind under $defs, for `keyhole schema`.
func JSONSchema() []byte { return clone(jsonSchemaSource) }

// CRDs returns the CustomResourceDefinitions of the kinds keyhole owns the
// shape of, Connection and SandboxClass, as one multi-document YAML
// stream, their structural schemas generated from the same CUE. There is
// none for AgentRuntime or ToolRegistry: the operator ships those, and
// applying a CRD of keyhole's would replace the operator's (OperatorCRDs
// returns the operator's own, for tests).
func CRDs() []byte { return clone(crdSource) }

// clone keeps callers from writing into the embedded bytes, which every
// other caller shares.
func clone(b []byte) []byte { return append([]byte(nil), b...) }

// Kind names a schema: a document kind keyhole validates.
type Kind string

// The kinds keyhole has a schema for. Their values are the names of the
// CUE definitions (#Connection, ...) and of the JSON Schema $defs.
const (
	KindConnection   Kind = "Connection"
	KindSandboxClass Kind = "SandboxClass"
	KindAgentRuntime Kind = "AgentRuntime"
	KindToolRegistry Kind = "ToolRegistry"
	KindSecret       Kind = "Secret"
	// KindAgent is an agent.yaml file, which has no apiVersion or kind.
	KindAgent Kind = "Agent"
	// KindConnector is one entry of the connector catalog, as a
	// repository's catalog extension writes it.
	KindConnector Kind = "Connector"
	// KindFluxConfig is the flux field of keyhole.yaml's Config.
	KindFluxConfig Kind = "FluxConfig"
	// KindArgoCDConfig is the argocd field of keyhole.yaml's Config.
	KindArgoCDConfig Kind = "ArgoCDConfig"
)

// Group is the API group and version of the omnia resources.
const Group = "omnia.altairalabs.ai/v1alpha1"

// kinds lists every Kind, in the order documentation lists them: first
// the kinds of Group (groupKinds), then the Secret, then those without an
// apiVersion.
var kinds = [...]Kind{KindConnection, KindSandboxClass, KindAgentRuntime, KindToolRegistry, KindSecret, KindAgent, KindConnector, KindFluxConfig, KindArgoCDConfig}

// groupKinds is how many of kinds are Group's.
const groupKinds = 4

// Kinds returns every Kind keyhole has a schema for, in the order
// documentation lists them: the one list of keyhole's kinds, which
// Lookup answers from.
func Kinds() []Kind { return slices.Clone(kinds[:]) }

// GroupKinds returns the kinds of Group: the omnia objects, which a kind
// field alone names as keyhole's.
func GroupKinds() []Kind { return slices.Clone(kinds[:groupKinds]) }

// Lookup maps a document's apiVersion and kind to a schema kind; agent.yaml
// files are looked up as ("", "Agent") and catalog entries as
// ("", "Connector"), keyhole.yaml's flux field as ("", "FluxConfig"), its argocd field as ("", "ArgoCDConfig"). Documents of other kinds are not keyhole's to check.
func Lookup(apiVersion, kind string) (Kind, bool) {
	switch apiVersion {
	case Group:
		if slices.Contains(kinds[:groupKinds], Kind(kind)) {
			return Kind(kind), true
		}
	case "v1":
		if Kind(kind) == KindSecret {
			return KindSecret, true
		}
	case "":
		switch Kind(kind) {
		case KindAgent, KindConnector, KindFluxConfig, KindArgoCDConfig:
			return Kind(kind), true
		}
	}
	return "", false
}
