package compiler

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
)

// Codes of the agent-sandbox checks: a Sandbox, SandboxTemplate,
// SandboxClaim or SandboxWarmPool that agent-sandbox's API server would
// refuse, and a sandbox pod that takes in a Secret the egress proxy is
// there to keep out.
const (
	codeAgentSandboxSchemaInvalid = "AgentSandboxSchemaInvalid"
	codeAgentSandboxSecretExposed = "AgentSandboxSecretExposed"
)

// agentSandboxChecks are the rows of the agent-sandbox checks in the
// check table.
func agentSandboxChecks() []Check {
	return []Check{
		{Code: codeAgentSandboxSchemaInvalid, Severity: diag.Error,
			Purpose: fmt.Sprintf("A Sandbox, SandboxTemplate, SandboxClaim or SandboxWarmPool that agent-sandbox's API server would refuse, judged from that project's own CRDs (%s): a required field missing (`podTemplate`, `warmPoolRef`, `sandboxTemplateRef`), an undeclared field, a wrong type, a value outside an enum, or a CEL rule of the CRD that fails.", schema.AgentSandboxVersion),
			Help:    "Correct the field named in the message; agent-sandbox's CRDs (`kubectl explain sandboxtemplate.spec`) say what each field takes."},
		{Code: codeAgentSandboxSecretExposed, Severity: diag.Error, run: checkAgentSandboxSecrets,
			Purpose: "A SandboxTemplate's or Sandbox's pod takes in a Secret that a Connection of its namespace reads (`envFrom[].secretRef`, `env[].valueFrom.secretKeyRef`, a `secret` or projected `secret` volume): the credential the egress proxy injects would sit in the sandbox in plain text, where the code it runs can read it and send it anywhere.",
			Help:    "Remove the reference: the Connection's placeholder (`placeholderEnv`, or the connector's variable) is what the sandbox holds, and `keyhole render --target agent-sandbox` adds it with the proxy that swaps it for the credential."},
	}
}

// podSecretUse is where a sandbox pod names a Secret: the Secret, the
// field path and its position, and what takes it in, for the message.
type podSecretUse struct {
	secret string
	path   string
	line   int
	column int
	what   string
}

// isAgentSandboxKind reports whether k is one of agent-sandbox's kinds.
func isAgentSandboxKind(k schema.Kind) bool {
	return slices.Contains(schema.AgentSandboxKinds(), k)
}

// digestAgentSandbox checks an agent-sandbox object against its CRD and
// notes, for a Sandbox or SandboxTemplate, the Secrets its pod names.
func digestAgentSandbox(v *schema.Validator, dg *digested, k schema.Kind, n *yaml.Node) {
	if vs := v.ValidateAgentSandbox(k, n); len(vs) > 0 {
		dg.extra().agentSandbox = vs
		return
	}
	if k == schema.KindSandbox || k == schema.KindSandboxTemplate {
		pod := kid(n, "spec")
		pod = kid(pod, "podTemplate")
		pod = kid(pod, "spec")
		if uses := podSecretUses(pod, "spec.podTemplate.spec"); len(uses) > 0 {
			dg.extra().podSecrets = uses
		}
	}
}

// podSecretUses lists the Secrets a pod spec takes in: through its
// containers' env and envFrom, and through its volumes.
func podSecretUses(pod *yaml.Node, at string) []podSecretUse {
	var uses []podSecretUse
	add := func(n *yaml.Node, p, what string) {
		if n != nil && n.Kind == yaml.ScalarNode && n.Value != "" {
			uses = append(uses, podSecretUse{secret: n.Value, path: p, line: n.Line, column: n.Column, what: what})
		}
	}
	for _, list := range [...]string{"initContainers", "containers"} {
		cs := kid(pod, list)
		if cs == nil || cs.Kind != yaml.SequenceNode {
			continue
		}
		for i, c := range cs.Content {
			c = deref(c)
			cname := kidValue(c, "name")
			cp := fmt.Sprintf("%s.%s[%d]", at, list, i)
			if ef := kid(c, "envFrom"); ef != nil && ef.Kind == yaml.SequenceNode {
				for j, e := range ef.Content {
					e = deref(e)
					ref := kid(e, "secretRef")
					n := kid(ref, "name")
					add(n, fmt.Sprintf("%s.envFrom[%d].secretRef.name", cp, j), fmt.Sprintf("container %q takes every key of it as environment variables", cname))
				}
			}
			if env := kid(c, "env"); env != nil && env.Kind == yaml.SequenceNode {
				for j, e := range env.Content {
					e = deref(e)
					vf := kid(e, "valueFrom")
					ref := kid(vf, "secretKeyRef")
					n := kid(ref, "name")
					variable := kidValue(e, "name")
					add(n, fmt.Sprintf("%s.env[%d].valueFrom.secretKeyRef.name", cp, j), fmt.Sprintf("container %q takes a key of it as %s", cname, clip(variable)))
				}
			}
		}
	}
	if vols := kid(pod, "volumes"); vols != nil && vols.Kind == yaml.SequenceNode {
		for i, v := range vols.Content {
			v = deref(v)
			volume := kidValue(v, "name")
			what := fmt.Sprintf("volume %q mounts it", clip(volume))
			sec := kid(v, "secret")
			n := kid(sec, "secretName")
			add(n, fmt.Sprintf("%s.volumes[%d].secret.secretName", at, i), what)
			proj := kid(v, "projected")
			srcs := kid(proj, "sources")
			if srcs != nil && srcs.Kind == yaml.SequenceNode {
				for j, s := range srcs.Content {
					s = deref(s)
					sec := kid(s, "secret")
					n := kid(sec, "name")
					add(n, fmt.Sprintf("%s.volumes[%d].projected.sources[%d].secret.name", at, i, j), what)
				}
			}
		}
	}
	return uses
}

// kid is the value of key in mapping n, aliases followed; nil when none.
func kid(n *yaml.Node, key string) *yaml.Node {
	v, _ := child(deref(n), key)
	return deref(v)
}

// kidValue is the text of key's value in mapping n, "" when none.
func kidValue(n *yaml.Node, key string) string {
	if v := kid(n, key); v != nil {
		return v.Value
	}
	return ""
}

// deref follows an alias to what it names (the API server sees the
// document with its aliases expanded), a few levels at most.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; i < 8 && n != nil && n.Kind == yaml.AliasNode; i++ {
		n = n.Alias
	}
	return n
}

// addAgentSandbox reads one agent-sandbox object: its CRD findings, or,
// when it passed, the object kept for the agent-sandbox target and its
// pod's Secrets kept for AgentSandboxSecretExposed.
func (p *pass) addAgentSandbox(it *item, dg *digested, kind schema.Kind) {
	p.count(it.doc)
	if p.duplicate(kind, it, dg) {
		return
	}
	if dg == nil {
		return
	}
	if dg.more != nil && len(dg.more.agentSandbox) > 0 {
		for _, vi := range dg.more.agentSandbox {
			pos, msg := violationAt(it.doc, vi.Line, vi.Column, vi.Path,
				fmt.Sprintf("%s (%s CRD of agent-sandbox %s)", vi.Message, kind, schema.AgentSandboxVersion))
			p.diags = append(p.diags, p.diagnostic(codeAgentSandboxSchemaInvalid, it, pos, vi.Path, msg))
		}
		return
	}
	p.keep(it)
	if dg.more != nil && len(dg.more.podSecrets) > 0 {
		p.sandboxPods = append(p.sandboxPods, sandboxPod{item: *it, uses: dg.more.podSecrets})
	}
}

// sandboxPod is a Sandbox or SandboxTemplate whose pod names Secrets.
type sandboxPod struct {
	item
	uses []podSecretUse
}

// checkAgentSandboxSecrets reports each Secret a sandbox pod takes in
// that a Connection of its namespace reads.
func checkAgentSandboxSecrets(p *pass) {
	if len(p.sandboxPods) == 0 {
		return
	}
	guarded := map[ref][]string{}
	for _, c := range p.connList {
		r := ref{c.ns, c.secretName()}
		guarded[r] = append(guarded[r], c.obj().Name)
	}
	for i := range p.sandboxPods {
		sp := &p.sandboxPods[i]
		for _, u := range sp.uses {
			conns := guarded[ref{sp.ns, u.secret}]
			if len(conns) == 0 {
				continue
			}
			slices.Sort(conns)
			conns = slices.Compact(conns)
			pos, msg := violationAt(sp.doc, u.line, u.column, u.path,
				fmt.Sprintf("Secret %q is the credential of Connection %s, and %s: the sandbox would hold what the egress proxy injects, defeating it; remove the reference and let the proxy inject it",
					clip(u.secret), strings.Join(conns, ", "), u.what))
			p.diags = append(p.diags, p.diagnostic(codeAgentSandboxSecretExposed, &sp.item, pos, u.path, msg))
		}
	}
}
