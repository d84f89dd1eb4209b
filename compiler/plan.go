// Package compiler resolves the checked inputs into one Plan and runs the
// semantic checks, each a row in one table with its code and purpose.
package compiler

import (
	"slices"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/access"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// Plan is the one compiled result every output is rendered from: per
// sandbox, which hosts it reaches, how each is injected and under which
// rules, and which placeholders its environment holds. No output
// re-derives policy from the inputs.
type Plan struct {
	// Sandboxes are sorted by namespace, then name.
	Sandboxes []Sandbox
	// Objects are the input's Connection, SandboxClass, AgentRuntime and
	// ToolRegistry objects, and agent-sandbox's Sandbox, SandboxTemplate,
	// SandboxClaim and SandboxWarmPool objects, that passed their schema,
	// in input order, for targets that re-emit them (render --target
	// omnia, --target agent-sandbox), left empty
	// when Options.OmitObjects says so. Secrets are never listed: they hold
	// values, and the Plan holds none.
	Objects []Object
	// Agents are the agent.yaml agents with a sandbox, resolved, in input
	// order, for targets that re-express them as omnia resources rather
	// than as rendered sandboxes.
	Agents []Agent
	// Operator is the omnia operator the input was checked for: the
	// declared version, else schema.DefaultOperator, which the zero value
	// also stands for. Targets that emit the operator's resources refuse
	// what it cannot serve.
	Operator schema.Operator
	// Ceiling is keyhole.yaml's ceiling: what no sandbox may be allowed,
	// which check proves (AccessAboveCeiling) and diff weighs a widening
	// against.
	Ceiling access.Ceiling
}

// Object is one input object of an omnia or agent-sandbox kind.
type Object struct {
	Source diag.Object
	Pos    diag.Pos
	// Node is the object's YAML mapping as it was read, nil when the
	// loader released it (see Digest): Tree reads it either way. Callers
	// must not modify it: it is the loaded document itself.
	Node *yaml.Node
	doc  *source.Document
}

// Tree returns the object's YAML mapping: Node, or the tree read again
// from its file when the loader released it.
func (o Object) Tree() (*yaml.Node, error) {
	if o.Node != nil || o.doc == nil {
		return o.Node, nil
	}
	return o.doc.Tree()
}

// Agent is an agent.yaml agent with a sandbox, with every sandbox
// connector whose connection label resolved.
type Agent struct {
	// Name is the agent's name; Namespace the namespace its sandbox
	// takes (keyhole.yaml's, else its Connections'), empty when neither
	// says.
	Name      string
	Namespace string
	Source    diag.Object
	Pos       diag.Pos
	// Sandbox is the agent's sandbox provider, e.g. daytona.
	Sandbox string
	// Image is the sandbox image keyhole.yaml sets; empty when it sets none.
	Image      string
	Connectors []AgentConnector
}

// AgentConnector is one connector of an agent with sandbox: true, and
// the Connection its label names. It holds names only, never a value.
type AgentConnector struct {
	// Name is the connector's name, e.g. github.
	Name string
	// Connector is its catalog entry (built in, or keyhole.yaml's).
	Connector schema.Connector
	// Connection is the Connection the label resolved to.
	Connection diag.Object
	// SecretName and SecretNamespace are that Connection's
	// credential.secretRef; SecretNamespace is empty when it names none.
	SecretName      string
	SecretNamespace string
	// Key is the Secret key holding the credential.
	Key string
	// UsernameKeys maps each host the Connection injects with basic auth
	// to the Secret key of its user name.
	UsernameKeys map[string]string
	// Writable is set where agent.yaml says read_only: false: the
	// Connection's own rules decide on the connector's hosts.
	Writable bool
}

// Sandbox is one sandbox (a claim): an AgentRuntime's or ToolRegistry's
// binding to a SandboxClass, or an agent.yaml agent with a sandbox.
type Sandbox struct {
	// Name is the claim name rendered objects derive theirs from:
	// <Name>-sandbox, <Name>-egress-ca, <Name>-egress-trust.
	Name      string
	Namespace string
	// Source is the object that declared the sandbox, and Pos where.
	Source diag.Object
	Pos    diag.Pos
	// Class names the SandboxClass (or the agent.yaml sandbox provider).
	Class string
	// Image is the sandbox container image, from the SandboxClass or the
	// repository's defaults; empty when neither names one.
	Image string
	// Proxy is exactly the config the sandbox's proxy loads.
	Proxy config.Config
	// Env holds the placeholder variables, sorted by name. The proxy and
	// CA-bundle variables are the renderer's to add.
	Env []EnvVar
	// ClientForms says, per injected host of an agent connector, how a
	// client in the sandbox presents the placeholder there (from the
	// connector catalog), for explain and docs; the proxy substitutes the
	// placeholder wherever it appears in a header.
	ClientForms map[string]string
	// Labels are the labels of the object that declares the sandbox, for
	// the ceiling's selectors; read only when there is a ceiling.
	Labels map[string]string
	// ProxyAnnotations are the annotations of the proxy's ServiceAccount
	// that its Connections of identity workload name (workload.go):
	// AnnotationEKSRoleARN, AnnotationGKEServiceAccount. nil when none.
	ProxyAnnotations map[string]string
}

// Workload reports whether a Connection of the sandbox is the proxy's
// own identity: its proxy then runs with that identity.
func (s Sandbox) Workload() bool {
	for _, h := range s.Proxy.Hosts {
		if h.Inject.Workload() {
			return true
		}
	}
	return false
}

// EnvVar is one placeholder variable in the sandbox's environment.
type EnvVar struct {
	Name string
	// Value is the placeholder, omnia-injected-<connection>; never a secret.
	Value string
	// Connection is the Connection (or connector) the placeholder stands for.
	Connection string
}

// SecretKeys is a Secret and the keys of it the proxy needs mounted.
type SecretKeys struct {
	Name string
	Keys []string
}

// Secrets lists, sorted, the Secret keys the sandbox's proxy reads: the
// only ones a rendered proxy mounts.
func (s Sandbox) Secrets() []SecretKeys {
	keys := map[string][]string{}
	for _, h := range s.Proxy.Hosts {
		in := h.Inject
		var ks []string
		switch {
		case in.Header != nil:
			// A template that does not parse never reaches a plan.
			if t, err := config.ParseTemplate(in.Header.Value); err == nil {
				ks = t.Keys()
			}
		case in.Basic != nil:
			ks = []string{in.Basic.UsernameKey, in.Basic.PasswordKey}
		case in.Substitute != nil:
			ks = []string{in.Substitute.Key}
		case in.AWSSigV4 != nil:
			ks = []string{in.AWSSigV4.AccessKeyIDKey, in.AWSSigV4.SecretAccessKeyKey}
			if in.AWSSigV4.SessionTokenKey != "" {
				ks = append(ks, in.AWSSigV4.SessionTokenKey)
			}
		case in.OAuth2 != nil:
			ks = slices.DeleteFunc([]string{in.OAuth2.ClientIDKey, in.OAuth2.ClientSecretKey, in.OAuth2.RefreshTokenKey}, func(k string) bool { return k == "" })
		case in.Google != nil:
			ks = []string{in.Google.KeyKey}
		}
		if in.Workload() {
			continue // the proxy's own identity: no Secret
		}
		keys[in.Secret] = append(keys[in.Secret], ks...)
	}
	var out []SecretKeys
	for name, ks := range keys {
		slices.Sort(ks)
		out = append(out, SecretKeys{Name: name, Keys: slices.Compact(ks)})
	}
	slices.SortFunc(out, func(a, b SecretKeys) int { return cmpString(a.Name, b.Name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
