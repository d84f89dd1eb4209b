// Package compiler resolves the checked inputs into one Plan and runs the
// semantic checks, each a row in one table with its code and purpose.
package compiler

import (
	"slices"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
)

// Plan is the one compiled result every output is rendered from: per
// sandbox, which hosts it reaches, how each is injected and under which
// rules, and which placeholders its environment holds. No output
// re-derives policy from the inputs.
type Plan struct {
	// Sandboxes are sorted by namespace, then name.
	Sandboxes []Sandbox
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
