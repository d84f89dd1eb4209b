package schema

import (
	"embed"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// kubernetes-sigs/agent-sandbox owns Sandbox, SandboxTemplate,
// SandboxClaim and SandboxWarmPool. keyhole checks them against that
// project's own published CRDs, copied verbatim into
// agentsandbox/<version>/ (provenance and license beside them), and
// render --target agent-sandbox writes into a repository's
// SandboxTemplate. keyhole never publishes a CRD for those kinds.

//go:embed agentsandbox/*/*.yaml
var agentSandboxFS embed.FS

// AgentSandboxVersion is the agent-sandbox release whose CRDs keyhole
// carries: the Go module sigs.k8s.io/agent-sandbox at that version.
const AgentSandboxVersion = "v1.0.1"

// The API versions of agent-sandbox's kinds: Sandbox is the core API's,
// the others the extensions'.
const (
	AgentSandboxCoreAPIVersion       = "agents.x-k8s.io/v1beta1"
	AgentSandboxExtensionsAPIVersion = "extensions.agents.x-k8s.io/v1beta1"
)

// agent-sandbox's kinds.
const (
	KindSandbox         Kind = "Sandbox"
	KindSandboxTemplate Kind = "SandboxTemplate"
	KindSandboxClaim    Kind = "SandboxClaim"
	KindSandboxWarmPool Kind = "SandboxWarmPool"
)

// AgentSandboxKinds are agent-sandbox's kinds, in the order docs list them.
func AgentSandboxKinds() []Kind {
	return []Kind{KindSandbox, KindSandboxTemplate, KindSandboxClaim, KindSandboxWarmPool}
}

// AgentSandboxAPIVersion is the apiVersion an agent-sandbox kind is
// served at.
func AgentSandboxAPIVersion(k Kind) string {
	if k == KindSandbox {
		return AgentSandboxCoreAPIVersion
	}
	return AgentSandboxExtensionsAPIVersion
}

// agentSandboxFile is each kind's CRD file name, as the project names it.
func agentSandboxFile(k Kind) (string, bool) {
	switch k {
	case KindSandbox:
		return "agents.x-k8s.io_sandboxes.yaml", true
	case KindSandboxTemplate:
		return "extensions.agents.x-k8s.io_sandboxtemplates.yaml", true
	case KindSandboxClaim:
		return "extensions.agents.x-k8s.io_sandboxclaims.yaml", true
	case KindSandboxWarmPool:
		return "extensions.agents.x-k8s.io_sandboxwarmpools.yaml", true
	}
	return "", false
}

// LookupAgentSandbox reports whether apiVersion and kind name one of
// agent-sandbox's kinds at the version keyhole carries.
func LookupAgentSandbox(apiVersion, kind string) (Kind, bool) {
	k := Kind(kind)
	if _, ok := agentSandboxFile(k); !ok {
		return "", false
	}
	return k, apiVersion == AgentSandboxAPIVersion(k)
}

// AgentSandboxCRDs returns agent-sandbox's four CRDs as published, one
// YAML stream: what a cluster running that release serves, for tests that
// install them.
func AgentSandboxCRDs() ([]byte, error) {
	return crdStream(AgentSandboxKinds(), agentSandboxCRD)
}

func agentSandboxCRD(k Kind) ([]byte, error) {
	name, ok := agentSandboxFile(k)
	if !ok {
		return nil, fmt.Errorf("%s is not an agent-sandbox kind", k)
	}
	b, err := agentSandboxFS.ReadFile("agentsandbox/" + AgentSandboxVersion + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("the %s CRD of agent-sandbox %s: %w", k, AgentSandboxVersion, err)
	}
	return b, nil
}

// agentSandboxRoot adjusts the top of a converted agent-sandbox schema:
// the API server validates metadata itself, and status is the
// controller's to write.
func agentSandboxRoot(js map[string]any, tree *crdNode) {
	crdRoot(js, tree)
}

// ValidateAgentSandbox checks a Sandbox, SandboxTemplate, SandboxClaim
// or SandboxWarmPool document against agent-sandbox's own CRD, as its
// API server would with strict field validation: defaults applied, then
// required fields, undeclared fields, types, enums, patterns and limits,
// then the CRD's CEL rules that can run offline. It returns the
// violations sorted by position; nil means the server would accept the
// document's spec.
func (v *Validator) ValidateAgentSandbox(k Kind, doc *yaml.Node) []Violation {
	if doc == nil {
		return []Violation{{Message: "the document is empty"}}
	}
	sch, err := v.agentSandbox(k)
	if err != nil {
		return []Violation{{Line: doc.Line, Column: doc.Column, Message: "cannot check against agent-sandbox's schema: " + err.Error()}}
	}
	return sch.validate(k, doc)
}

// agentSandbox returns the compiled schema of kind k, compiling it once.
func (v *Validator) agentSandbox(k Kind) (*operatorSchema, error) {
	v.opMu.Lock()
	defer v.opMu.Unlock()
	key := "agent-sandbox/" + string(k)
	if o, ok := v.ops[key]; ok {
		return o.schema, o.err
	}
	b, err := agentSandboxCRD(k)
	if err != nil {
		return nil, err
	}
	o, err := compileCRDs(map[Kind][]byte{k: b}, AgentSandboxAPIVersion(k), agentSandboxRoot)
	if err != nil {
		err = fmt.Errorf("agent-sandbox %s: %w", AgentSandboxVersion, err)
	}
	if v.ops == nil {
		v.ops = map[string]compiledOperator{}
	}
	v.ops[key] = compiledOperator{schema: o, err: err}
	return o, err
}
