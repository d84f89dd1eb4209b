package cli

import (
	"encoding/json"
	"io"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/diff"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// explain --format json: what the text says, as one JSON object on stdout,
// for scripts and policy engines. Hosts, injections and rules are written
// as the proxy config (docs/proxy.md) writes them; a credential appears by
// Secret and key names, never by value. docs/diff.md documents the shapes.

// explainSandboxJSON is one sandbox: who declared it and what it may reach.
type explainSandboxJSON struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Source      explainSource     `json:"source"`
	Class       string            `json:"class"`
	Unit        string            `json:"unit,omitempty"`
	Mode        string            `json:"proxyMode,omitempty"`
	Env         []explainEnv      `json:"placeholders,omitempty"`
	Hosts       []explainHostJSON `json:"hosts,omitempty"`
	Clients     map[string]string `json:"clientsSend,omitempty"`
	Passthrough []string          `json:"passthrough,omitempty"`
}

type explainSource struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

type explainEnv struct {
	Name       string `json:"name"`
	Value      string `json:"value"`
	Connection string `json:"connection"`
}

// explainHostJSON is an injected host as the proxy config writes it, and
// whether it forwards every request: a host without rules does.
type explainHostJSON struct {
	config.Host
	EveryRequest bool `json:"everyRequest"`
}

// explainDecisionJSON is the proxy's decision on one request.
type explainDecisionJSON struct {
	Action     policy.Action `json:"action"`
	Allowed    bool          `json:"allowed"`
	Host       string        `json:"host,omitempty"`
	Status     int           `json:"status,omitempty"`
	Reason     policy.Reason `json:"reason,omitempty"`
	Message    string        `json:"message,omitempty"`
	Connection string        `json:"connection,omitempty"`
	// Inject is how the credential is put on the request, for an
	// injection: the host's entry of the proxy config.
	Inject *config.Inject `json:"inject,omitempty"`
	// WebSocket is set when the request is a WebSocket handshake the
	// proxy upgrades.
	WebSocket bool `json:"websocket,omitempty"`
}

func sandboxJSON(s compiler.Sandbox, unit, mode string) explainSandboxJSON {
	j := explainSandboxJSON{
		Namespace:   s.Namespace,
		Name:        s.Name,
		Source:      sourceJSON(s.Source, s.Pos),
		Class:       s.Class,
		Unit:        unit,
		Mode:        mode,
		Clients:     s.ClientForms,
		Passthrough: s.Proxy.Passthrough,
	}
	for _, h := range s.Proxy.Hosts {
		j.Hosts = append(j.Hosts, explainHostJSON{Host: h, EveryRequest: len(h.Rules) == 0})
	}
	for _, v := range s.Env {
		j.Env = append(j.Env, explainEnv{Name: v.Name, Value: v.Value, Connection: v.Connection})
	}
	return j
}

func sourceJSON(o diag.Object, p diag.Pos) explainSource {
	return explainSource{Kind: o.Kind, Name: o.Name, File: p.File, Line: p.Line}
}

func decisionJSON(s compiler.Sandbox, d policy.Decision) *explainDecisionJSON {
	j := &explainDecisionJSON{Action: d.Action, Allowed: d.Allowed(), Host: d.Host, Connection: d.Connection, WebSocket: d.WebSocket}
	if d.Action == policy.ActionRefuse {
		j.Status, j.Reason, j.Message = d.Reason.Status(), d.Reason, d.Message
	}
	if d.Action == policy.ActionAudit {
		// What enforcement would refuse it for; the sandbox gets the
		// upstream's answer.
		j.Reason, j.Message = d.Reason, d.Message
	}
	if hp := d.HostPolicy(); d.Action == policy.ActionInject && hp != nil {
		// The form the rule that allowed the request injects.
		in := hp.Inject
		j.Inject = &in
	}
	return j
}

// explainListJSON is explain without --sandbox.
type explainListJSON struct {
	Sandboxes []explainSandboxJSON `json:"sandboxes"`
}

// explainOneJSON is explain --sandbox, with --request its decision.
type explainOneJSON struct {
	Sandbox  explainSandboxJSON   `json:"sandbox"`
	Request  string               `json:"request,omitempty"`
	Decision *explainDecisionJSON `json:"decision,omitempty"`
}

// explainChangeListJSON is explain --base without --sandbox: each
// sandbox's access verdict between the two refs.
type explainChangeListJSON struct {
	Base      diff.Ref             `json:"base"`
	Head      diff.Ref             `json:"head"`
	Sandboxes []explainVerdictJSON `json:"sandboxes"`
}

type explainVerdictJSON struct {
	Sandbox string       `json:"sandbox"`
	Verdict diff.Verdict `json:"verdict"`
}

// explainChangeJSON is explain --base --sandbox: the sandbox's change as
// keyhole diff --format json gives it, and with --request each side's
// decision (null where the sandbox does not exist).
type explainChangeJSON struct {
	Base     diff.Ref           `json:"base"`
	Head     diff.Ref           `json:"head"`
	Sandbox  diff.SandboxChange `json:"sandbox"`
	Request  string             `json:"request,omitempty"`
	Decision *explainSidesJSON  `json:"decision,omitempty"`
}

type explainSidesJSON struct {
	Base *explainDecisionJSON `json:"base"`
	Head *explainDecisionJSON `json:"head"`
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
