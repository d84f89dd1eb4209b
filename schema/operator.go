package schema

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The omnia operator owns AgentRuntime and ToolRegistry. keyhole checks
// them against the operator's own published CRDs, copied verbatim for
// each release it knows into operator/<version>/ (provenance and license
// beside them), so that a repository learns in CI what the operator's API
// server would refuse. keyhole never publishes a CRD for those kinds.

//go:embed operator/*/omnia.altairalabs.ai_agentruntimes.yaml operator/*/omnia.altairalabs.ai_toolregistries.yaml
var operatorFS embed.FS

// ErrUnknownOperator is returned for an operator version keyhole carries
// no schema for.
var ErrUnknownOperator = errors.New("unknown operator version")

// Operator is the omnia operator a repository is checked and rendered
// for: whose AgentRuntime and ToolRegistry schemas apply, and whether it
// serves the sandbox feature (the Connection and SandboxClass kinds and
// spec.sandbox on AgentRuntime and ToolRegistry).
type Operator struct {
	// Version is the release whose CRD schemas apply.
	Version string
	// Sandbox is true when the operator serves the sandbox feature.
	Sandbox bool
	// Declared is true when the repository named the version; false for
	// DefaultOperator.
	Declared bool
}

// String names the operator in messages.
func (o Operator) String() string {
	if !o.Declared {
		return "operator " + o.Version + " schemas with the sandbox feature (no operator version declared)"
	}
	return "operator " + o.Version
}

// operatorRelease is one operator release keyhole carries the CRDs of.
type operatorRelease struct {
	version string
	// sandbox: the release serves Connection, SandboxClass and
	// spec.sandbox. No public release does yet.
	sandbox bool
}

// operatorReleases lists the releases keyhole knows, newest first. Each
// has a directory operator/<version>/ with its two CRDs. The first is
// also the default's (DefaultOperator).
func operatorReleases() []operatorRelease {
	return []operatorRelease{
		// The operator's main branch after v0.9.0-beta.17, named as Go
		// names an untagged commit (a pseudo-version): promptPackRef.track,
		// externalAuth.clientKeys in place of apiKeys and sharedToken,
		// custom facades, a ToolRegistry's probe and no handler selector.
		{version: "v0.9.0-beta.17.0.20260724164730-c7428e31ec64"},
		{version: "v0.9.0-beta.17"},
	}
}

// OperatorVersions lists the operator versions keyhole can check
// against, newest first.
func OperatorVersions() []string {
	var vs []string
	for _, r := range operatorReleases() {
		vs = append(vs, r.version)
	}
	return vs
}

// DefaultOperator is what a repository that declares no operator version
// is checked for: the newest AgentRuntime and ToolRegistry schemas
// keyhole carries, with the sandbox feature the Connection contract
// describes (docs/schema.md says why).
func DefaultOperator() Operator {
	return Operator{Version: operatorReleases()[0].version, Sandbox: true}
}

// LookupOperator returns the declared operator version; an unknown one is
// an ErrUnknownOperator error listing the known ones.
func LookupOperator(version string) (Operator, error) {
	for _, r := range operatorReleases() {
		if r.version == version {
			return Operator{Version: r.version, Sandbox: r.sandbox, Declared: true}, nil
		}
	}
	return Operator{}, fmt.Errorf("%w %q: keyhole knows %s", ErrUnknownOperator, version, strings.Join(OperatorVersions(), ", "))
}

// operatorFiles maps each operator kind to its CRD file name.
func operatorFile(k Kind) (string, bool) {
	switch k {
	case KindAgentRuntime:
		return "omnia.altairalabs.ai_agentruntimes.yaml", true
	case KindToolRegistry:
		return "omnia.altairalabs.ai_toolregistries.yaml", true
	}
	return "", false
}

// OperatorKinds are the kinds the operator owns the shape of.
func OperatorKinds() []Kind { return []Kind{KindAgentRuntime, KindToolRegistry} }

// OperatorCRDs returns the operator's CRDs of version, as published, one
// YAML stream: what a cluster running that release serves, for tests that
// install them next to keyhole's.
func OperatorCRDs(version string) ([]byte, error) {
	if _, err := LookupOperator(version); err != nil {
		return nil, err
	}
	return crdStream(OperatorKinds(), func(k Kind) ([]byte, error) { return operatorCRD(version, k) })
}

// crdStream joins the CRD of each of kinds, as crd reads it, into one
// YAML stream, each document starting with "---".
func crdStream(kinds []Kind, crd func(Kind) ([]byte, error)) ([]byte, error) {
	var out bytes.Buffer
	for _, k := range kinds {
		b, err := crd(k)
		if err != nil {
			return nil, err
		}
		if !bytes.HasPrefix(b, []byte("---")) {
			out.WriteString("---\n")
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}

func operatorCRD(version string, k Kind) ([]byte, error) {
	name, ok := operatorFile(k)
	if !ok {
		return nil, fmt.Errorf("%s is not an operator kind", k)
	}
	b, err := operatorFS.ReadFile("operator/" + version + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("the %s CRD of operator %s: %w", k, version, err)
	}
	return b, nil
}

// crdDoc is the part of a CustomResourceDefinition keyhole reads.
type crdDoc struct {
	Spec struct {
		Group    string       `yaml:"group"`
		Versions []crdVersion `yaml:"versions"`
	} `yaml:"spec"`
}

type crdVersion struct {
	Name   string `yaml:"name"`
	Served bool   `yaml:"served"`
	Schema struct {
		OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
	} `yaml:"schema"`
}

// crdSchema returns the openAPIV3Schema that a CRD serves for
// apiVersion (group/version).
func crdSchema(crd []byte, apiVersion string) (map[string]any, error) {
	var doc crdDoc
	if err := yaml.Unmarshal(crd, &doc); err != nil {
		return nil, err
	}
	group, version, _ := strings.Cut(apiVersion, "/")
	if doc.Spec.Group != group {
		return nil, fmt.Errorf("the CRD's group is %q, want %q", doc.Spec.Group, group)
	}
	i := slices.IndexFunc(doc.Spec.Versions, func(v crdVersion) bool { return v.Name == version && v.Served })
	if i < 0 || doc.Spec.Versions[i].Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("the CRD serves no schema for %s", version)
	}
	return doc.Spec.Versions[i].Schema.OpenAPIV3Schema, nil
}
