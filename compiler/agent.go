package compiler

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
)

// An agent.yaml (docs/spec.md §8) compiles into the same plan as the
// Kubernetes resources. A connector with sandbox: true gives the sandbox
// the catalog's placeholder variable; the proxy substitutes the
// Connection's credential for the placeholder in request headers, only to
// the connector's hosts, and only for the catalog's read-only requests.
//
// Resolution of `connection: <label>`: the label names a Connection. When
// the repository's keyhole.yaml sets a namespace, the agent lives there and
// the Connection must too; otherwise the label must name exactly one
// Connection in the input, in any namespace, and the agent's sandbox takes
// that namespace. The credential is the Connection's Secret key that its
// inject entries read, when they read exactly one; otherwise the key
// "token".

const (
	codeAgentConnectorUnknown  = "AgentConnectorUnknown"
	codeAgentSandboxMissing    = "AgentSandboxMissing"
	codeAgentConnectionMissing = "AgentConnectionMissing"
	// A tools-only connector's label, which the sandbox does not use.
	codeAgentConnectionUnresolved = "AgentConnectionUnresolved"
	codeAgentAllowedDomain        = "AgentAllowedDomainInvalid"
	codeAgentToolUnknown          = "AgentToolUnknown"
	codeAgentSetupWithout         = "AgentSetupWithoutSandbox"
	codeAgentReadOnlyUnenforced   = "AgentReadOnlyUnenforceable"
	// The Connection's rules and the catalog's, where one is set aside.
	codeAgentConnectionRulesIgnored = "AgentConnectionRulesIgnored"
	codeAgentConnectorUnrestricted  = "AgentConnectorUnrestricted"
	codeAgentConnectorHostUncovered = "AgentConnectorHostUncovered"
)

// defaultCredentialKey is the Secret key an agent connector's credential
// is read from when the Connection does not say.
const defaultCredentialKey = "token"

type agentWire struct {
	Name           string `yaml:"name"`
	Sandbox        string `yaml:"sandbox"`
	SandboxOptions struct {
		Setup []string `yaml:"setup"`
	} `yaml:"sandbox_options"`
	Connectors     []agentConnectorWire `yaml:"connectors"`
	AllowedDomains []string             `yaml:"allowed_domains"`
}

// agentConnectorWire is one of an agent's connectors.
type agentConnectorWire struct {
	Name       string   `yaml:"name"`
	Connection string   `yaml:"connection"`
	Sandbox    bool     `yaml:"sandbox"`
	ReadOnly   flag     `yaml:"read_only"`
	Tools      []string `yaml:"tools"`
}

// readOnly reports whether the connector keeps the sandbox to the
// catalog's read-only rules, as it does unless it says read_only: false.
func (c *agentConnectorWire) readOnly() bool { return c.ReadOnly != flagFalse }

// flag is an optional boolean as a plain value: unset, true or false.
type flag int8

const (
	flagUnset flag = iota
	flagTrue
	flagFalse
)

func (f *flag) UnmarshalYAML(n *yaml.Node) error {
	var b bool
	if err := n.Decode(&b); err != nil {
		return err
	}
	*f = flagFalse
	if b {
		*f = flagTrue
	}
	return nil
}

type agent struct {
	item
	w *agentWire
}

func agentPath(elems ...any) path { return path(elems) }

// hostname is a lowercase DNS name, as the proxy matches hosts.
var hostname = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`)

func checkAgents(p *pass) {
	for _, a := range p.agents {
		aw := a.w
		// What the agent's sandbox connectors claim, first come: the
		// plan keeps the first connector on a host and the first
		// placeholder of a variable, so a later one with another
		// Connection would be dropped unseen.
		hosts, envs := claims{}, claims{}
		if len(aw.SandboxOptions.Setup) > 0 && aw.Sandbox == "" {
			p.report(codeAgentSetupWithout, &a.item, agentPath("sandbox_options", "setup"), true,
				"sandbox_options.setup runs in a sandbox, but the agent has none; add sandbox (e.g. daytona) or remove the setup")
		}
		for i, d := range aw.AllowedDomains {
			if len(d) > 253 || !hostname.MatchString(d) {
				p.report(codeAgentAllowedDomain, &a.item, agentPath("allowed_domains", i), false,
					"%q is not a hostname: want a lowercase DNS name without scheme, port, path or wildcard, e.g. pypi.org", clip(d))
			}
		}
		for i, c := range aw.Connectors {
			at := agentPath("connectors", i)
			conn, ok := p.catalog[c.Name]
			if !ok {
				p.report(codeAgentConnectorUnknown, &a.item, at.with("name"), false,
					"connector %q is not in the catalog (it has: %s)%s; extend the catalog in keyhole.yaml for your own connectors",
					c.Name, strings.Join(p.catalogNames(), ", "), didYouMean(c.Name, p.catalogNames()))
				continue
			}
			for j, tool := range c.Tools {
				if !slices.Contains(conn.Tools, tool) {
					p.report(codeAgentToolUnknown, &a.item, at.with("tools", j), false,
						"connector %s does not offer the tool %q%s", c.Name, clip(tool), didYouMean(tool, conn.Tools))
				}
			}
			if !c.Sandbox {
				// The agent's tools use the connection; its sandbox
				// does not, so a label naming none is no failure
				// keyhole renders, but it is the mistake the platform
				// meets when a tool first runs.
				// A unit that did not build reads no Connection: its
				// error is the one to act on.
				if c.Connection != "" && !p.invalid["Connection/"+c.Connection] && p.buildFailedNote() == "" {
					if _, err := p.agentConnection(a, c.Connection); err != nil {
						p.report(codeAgentConnectionUnresolved, &a.item, at.with("connection"), false,
							"%v; this connector has no sandbox: true, so the sandbox gets nothing of it and keyhole renders nothing of it, but the agent's tools call %s with the connection this label names", err, c.Name)
					}
				}
				continue
			}
			if aw.Sandbox == "" {
				p.report(codeAgentSandboxMissing, &a.item, at.with("sandbox"), false,
					"sandbox: true gives code in the agent's sandbox the connector's placeholder, but the agent has no sandbox; add sandbox (e.g. daytona) to the agent")
			}
			if conn.ReadOnly == nil && c.readOnly() {
				p.report(codeAgentReadOnlyUnenforced, &a.item, at.with("sandbox"), false,
					"connector %s cannot tell reads from writes by method and path, so the proxy cannot keep code in the sandbox to reads; remove sandbox: true, or give the connector readOnly rules in keyhole.yaml's catalog", c.Name)
			}
			cn, err := p.agentConnection(a, c.Connection)
			if err != nil {
				if !p.invalid["Connection/"+c.Connection] {
					p.report(codeAgentConnectionMissing, &a.item, cmpPath(c.Connection != "", at.with("connection"), at), false, "%v", err)
				}
				continue
			}
			if aw.Sandbox == "" {
				continue
			}
			if p.proxyHeldConnector(&a.item, cmpPath(c.Connection != "", at.with("connection"), at), c.Name, cn) {
				continue
			}
			p.checkConnectorRules(a, i, c, conn, cn)
			name := cn.obj().Name
			var clash []string
			var first claim
			for _, h := range conn.Hosts {
				if f, taken := hosts.take(h.Host, name, i); taken {
					clash, first = append(clash, h.Host), f
				}
			}
			if len(clash) > 0 {
				p.report(codeBindingHostConflict, &a.item, at.with("connection"), false,
					"connectors %d and %d inject %s in the sandbox, with Connections %s and %s; the proxy can apply only one, so connector %d would go unused: give both one connection, or remove one",
					first.by, i, strings.Join(clash, ", "), first.connection, name, i)
			}
			if f, taken := envs.take(conn.Env, name, i); taken {
				p.report(codeBindingEnvConflict, &a.item, at.with("connection"), false,
					"connectors %d and %d both set %s in the sandbox, to the placeholders of Connections %s and %s; it can hold only one",
					f.by, i, conn.Env, f.connection, name)
			}
		}
	}
}

func cmpPath(cond bool, a, b path) path {
	if cond {
		return a
	}
	return b
}

// agentConnection resolves a connector's connection label, by the rules
// in this file's comment.
func (p *pass) agentConnection(a *agent, label string) (*connection, error) {
	if label == "" {
		return nil, fmt.Errorf("the connector has sandbox: true but names no connection; add connection: <label> naming a Connection")
	}
	if ns, ok := p.configNamespace(); ok {
		if c := p.conns.get(ref{ns, label}); c != nil {
			return c, nil
		}
		if hint := p.agentConnElsewhere(label, ns); hint != "" {
			return nil, fmt.Errorf("connection %q resolves to nothing in %s, where the agent is%s", label, unitPhrase(p.unit), hint)
		}
		return nil, fmt.Errorf("connection %q resolves to nothing: no Connection %s in the input%s%s", label, ref{ns, label}, p.agentConnHint(label, p.connNames(ns)), p.buildFailedNote())
	}
	var found []*connection
	var names []string
	for _, c := range p.connList {
		names = append(names, c.obj().Name)
		if c.obj().Name == label {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		if hint := p.agentConnElsewhere(label, ""); hint != "" {
			return nil, fmt.Errorf("connection %q resolves to nothing in %s, where the agent is%s", label, unitPhrase(p.unit), hint)
		}
		return nil, fmt.Errorf("connection %q resolves to nothing: no Connection of that name in the input%s%s", label, p.agentConnHint(label, names), p.buildFailedNote())
	}
	var refs []string
	for _, c := range found {
		refs = append(refs, c.ref().String())
	}
	return nil, fmt.Errorf("connection %q names %d Connections (%s); set namespace in keyhole.yaml to say which is the agent's", label, len(found), strings.Join(refs, ", "))
}

// credentialKey is the Secret key an agent connector substitutes.
func (c *connection) credentialKey() string {
	inject := c.w.Spec.Placement.Inject
	var keys []string
	for i := range inject {
		for _, u := range keysUsed(&inject[i], i) {
			if !slices.Contains(keys, u.key) {
				keys = append(keys, u.key)
			}
		}
	}
	// basic reads a user and a password key; the password is the token.
	for _, in := range inject {
		if in.Basic != nil && in.Value == nil {
			return in.Basic.PasswordKey
		}
	}
	if len(keys) == 1 {
		return keys[0]
	}
	return defaultCredentialKey
}

// substituteHeaders are the headers the proxy substitutes the placeholder
// in on a host: those the catalog says clients send the credential in.
// Nowhere else, so that a header an upstream echoes back (X-Request-Id,
// Origin) never carries the credential to the sandbox.
func substituteHeaders(in schema.ConnectorInject) []string {
	var names []string
	add := func(n string) {
		if !slices.ContainsFunc(names, func(m string) bool { return strings.EqualFold(m, n) }) {
			names = append(names, n)
		}
	}
	if in.Header != nil {
		add(in.Header.Name)
	}
	if in.Basic != nil {
		add("Authorization")
	}
	return names
}

// clientForm describes how a client sends the placeholder on a host.
func clientForm(in schema.ConnectorInject, env string) string {
	var forms []string
	if h := in.Header; h != nil {
		forms = append(forms, fmt.Sprintf("header %s: %s$%s", h.Name, h.ValuePrefix, env))
	}
	if b := in.Basic; b != nil {
		forms = append(forms, fmt.Sprintf("basic auth, user %s, password $%s (git: https://%s:$%s@host/...)", b.Username, env, b.Username, env))
	}
	return strings.Join(forms, ", or ")
}

func (p *pass) catalogNames() []string {
	names := make([]string, 0, len(p.catalog))
	for n := range p.catalog {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// substitutedConnector is one of an agent's sandbox connectors whose
// credential the proxy substitutes: where agent.yaml lists it, its
// catalog entry and the Connection it resolves to.
type substitutedConnector struct {
	index int
	wire  agentConnectorWire
	conn  schema.Connector
	cn    *connection
}

// substitutedConnectors lists, in agent.yaml's order, the agent's sandbox
// connectors that the catalog has and whose connection resolves to a
// Connection whose Secret the proxy substitutes; a proxy-held credential's
// Secret never is, and the checks report the rest.
func (p *pass) substitutedConnectors(a *agent) []substitutedConnector {
	var out []substitutedConnector
	for i, c := range a.w.Connectors {
		conn, ok := p.catalog[c.Name]
		if !ok || !c.Sandbox {
			continue
		}
		cn, err := p.agentConnection(a, c.Connection)
		if err != nil || proxyOnlyCredential(cn.w.Spec.Credential.Kind) {
			continue
		}
		out = append(out, substitutedConnector{index: i, wire: c, conn: conn, cn: cn})
	}
	return out
}

// agentSandbox compiles an agent with a sandbox into a Sandbox of the plan.
func (p *pass) agentSandbox(a *agent) (Sandbox, bool) {
	aw := a.w
	if aw.Sandbox == "" {
		return Sandbox{}, false
	}
	ns, _ := p.configNamespace()
	s := Sandbox{
		Name:   aw.Name + "-" + aw.Sandbox,
		Source: a.obj(),
		Pos:    a.doc.Pos,
		Class:  aw.Sandbox,
		Image:  p.config.sandboxImage,
	}
	injected := map[string]bool{}
	for _, sc := range p.substitutedConnectors(a) {
		ci, c, conn, cn := sc.index, sc.wire, sc.conn, sc.cn
		ns = cmp.Or(ns, cn.obj().Namespace)
		placeholder := Placeholder(cn.obj().Name)
		for _, h := range conn.Hosts {
			if injected[h.Host] {
				continue
			}
			// Each host gets the rules that hold on it. A host none holds
			// on (keyhole.yaml's check reports it) gets no credential: a
			// proxy host without rules would allow every request.
			var rules []config.Rule
			var index []int
			if c.readOnly() {
				var readOnly []schema.Rule
				readOnly, index = conn.ReadOnlyOn(h.Host)
				if len(readOnly) == 0 {
					continue
				}
				rules = make([]config.Rule, 0, len(readOnly))
				for _, r := range readOnly {
					rules = append(rules, ProxyRule(r))
				}
			} else {
				// Not read-only: the Connection's entry for the host
				// decides, and a host it has no entry for gets no
				// credential (checkConnectorRules says so).
				in := cn.entryFor(h.Host)
				if in == nil {
					continue
				}
				rules = connectionRules(in.Rules)
			}
			injected[h.Host] = true
			p.origin(&s, h.Host, origin{it: &a.item, at: path{"connectors", ci}, connector: c.Name, catalogRule: index})
			if s.ClientForms == nil {
				s.ClientForms = map[string]string{}
			}
			s.ClientForms[h.Host] = clientForm(h.Inject, conn.Env)
			s.Proxy.Hosts = append(s.Proxy.Hosts, config.Host{
				Name:       h.Host,
				Connection: cn.obj().Name,
				Inject: config.Inject{
					Secret:     cn.secretName(),
					Substitute: &config.SubstituteInject{Placeholder: placeholder, Key: cn.credentialKey(), Headers: substituteHeaders(h.Inject)},
				},
				Rules: rules,
			})
		}
		if !slices.ContainsFunc(s.Env, func(e EnvVar) bool { return e.Name == conn.Env }) {
			s.Env = append(s.Env, EnvVar{Name: conn.Env, Value: placeholder, Connection: cn.obj().Name})
		}
	}
	for k, d := range aw.AllowedDomains {
		if hostname.MatchString(d) && !injected[d] && !slices.Contains(s.Proxy.Passthrough, d) {
			s.Proxy.Passthrough = append(s.Proxy.Passthrough, d)
			p.origin(&s, d, origin{it: &a.item, at: path{"allowed_domains", k}})
		}
	}
	s.Namespace = ns
	s.Proxy.APIVersion, s.Proxy.Kind = config.APIVersion, config.Kind
	s.Proxy.Sandbox = config.SandboxRef{Namespace: ns, Name: s.Name}
	slices.Sort(s.Proxy.Passthrough)
	slices.SortFunc(s.Proxy.Hosts, func(a, b config.Host) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.Env, func(a, b EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return s, true
}

// planAgent lists an agent's resolved sandbox connectors for the Plan, in
// the order agent.yaml writes them; s is the sandbox it compiled into.
func (p *pass) planAgent(a *agent, s Sandbox) Agent {
	aw := a.w
	out := Agent{Name: aw.Name, Namespace: s.Namespace, Source: a.obj(), Pos: a.doc.Pos, Sandbox: aw.Sandbox, Image: s.Image}
	for _, sc := range p.substitutedConnectors(a) {
		c, conn, cn := sc.wire, sc.conn, sc.cn
		secretName, secretNamespace := cn.w.Spec.Credential.SecretRef.Name, cn.w.Spec.Credential.SecretRef.Namespace
		ac := AgentConnector{
			Name:            c.Name,
			Connector:       conn,
			Connection:      cn.obj(),
			SecretName:      secretName,
			SecretNamespace: secretNamespace,
			Key:             cn.credentialKey(),
			Writable:        !c.readOnly(),
		}
		for _, in := range cn.w.Spec.Placement.Inject {
			if in.Basic == nil {
				continue
			}
			for _, h := range in.Hosts {
				if ac.UsernameKeys == nil {
					ac.UsernameKeys = map[string]string{}
				}
				if _, seen := ac.UsernameKeys[h]; !seen {
					ac.UsernameKeys[h] = in.Basic.UsernameKey
				}
			}
		}
		out.Connectors = append(out.Connectors, ac)
	}
	return out
}

// ProxyRule is a catalog rule as the proxy reads it.
func ProxyRule(r schema.Rule) config.Rule {
	out := config.Rule{Methods: r.Methods, PathPrefixes: r.PathPrefixes, PathPatterns: r.PathPatterns, EncodedSlash: r.EncodedSlash, Body: r.Body}
	if g := r.GraphQL; g != nil {
		out.GraphQL = &config.GraphQL{Operations: g.Operations, PersistedQueries: g.PersistedQueries, Batches: g.Batches}
	}
	out.MCP = proxyMCP(r.MCP)
	return out
}

// proxyMCP is an MCP condition as the proxy reads it, nil for none.
func proxyMCP(m *schema.MCP) *config.MCP {
	if m == nil {
		return nil
	}
	return &config.MCP{Methods: slices.Clone(m.Methods), Tools: slices.Clone(m.Tools), Arguments: m.Arguments, Resources: slices.Clone(m.Resources), Responses: m.Responses}
}

// entryFor is the Connection's first inject entry that covers host, nil
// when none does.
func (c *connection) entryFor(host string) *injectWire {
	for i, in := range c.w.Spec.Placement.Inject {
		if slices.Contains(in.Hosts, host) {
			return &c.w.Spec.Placement.Inject[i]
		}
	}
	return nil
}

// connectionRules are a Connection entry's rules as the proxy reads them,
// nil for none.
func connectionRules(rs []ruleWire) []config.Rule {
	if len(rs) == 0 {
		return nil
	}
	rules := make([]config.Rule, 0, len(rs))
	for _, r := range rs {
		rules = append(rules, r.proxy())
	}
	return rules
}

// checkConnectorRules says where an agent connector's Connection and the
// catalog disagree about what the sandbox may do, since one of the two is
// set aside: a read-only connector gets the catalog's read-only rules, and
// the Connection's rules that allow other methods (POST /v1/messages) do
// not apply (a Connection without rules, written for agents, says
// nothing to set aside); a connector that is not read-only gets the Connection's entry on
// each of its hosts, none on a host the Connection has no entry for, and
// every request on one whose entry has no rules.
func (p *pass) checkConnectorRules(a *agent, i int, c agentConnectorWire, conn schema.Connector, cn *connection) {
	at := agentPath("connectors", i)
	if c.readOnly() {
		for _, h := range conn.Hosts {
			in := cn.entryFor(h.Host)
			if in == nil {
				continue
			}
			readOnly, _ := conn.ReadOnlyOn(h.Host)
			var allowed []string
			for _, r := range readOnly {
				allowed = append(allowed, r.Methods...)
			}
			var more []string
			for _, r := range in.Rules {
				for _, m := range r.Methods {
					if !slices.Contains(allowed, m) && !slices.Contains(more, m) {
						more = append(more, m)
					}
				}
			}
			if len(more) > 0 {
				p.report(codeAgentConnectionRulesIgnored, &a.item, at.with("connection"), false,
					"connector %s is read-only, so on %s the sandbox gets the catalog's read-only rules, and Connection %s's own rules there, which allow %s, do not apply; set read_only: false on the connector to let the Connection's rules decide",
					c.Name, h.Host, cn.ref(), strings.Join(more, ", "))
				return
			}
		}
		return
	}
	var missing, open []string
	for _, h := range conn.Hosts {
		switch in := cn.entryFor(h.Host); {
		case in == nil:
			missing = append(missing, h.Host)
		case len(in.Rules) == 0:
			open = append(open, h.Host)
		}
	}
	if len(open) > 0 {
		p.report(codeAgentConnectorUnrestricted, &a.item, at.with("read_only"), true,
			"connector %s is not read-only and Connection %s's entries for %s have no rules: every method on every path there carries the credential; give those entries rules",
			c.Name, cn.ref(), strings.Join(open, ", "))
	}
	if len(missing) > 0 {
		p.report(codeAgentConnectorHostUncovered, &a.item, at.with("read_only"), true,
			"connector %s is not read-only, so Connection %s's entries decide, and it has none for %s: the sandbox gets no credential there; add an entry for each host the agent needs",
			c.Name, cn.ref(), strings.Join(missing, ", "))
	}
}

// agentConnHint is the hint of a connection label that names no
// Connection: the Connection it names as its file writes it, when the
// build renamed that one alone (a per-environment namePrefix or
// nameSuffix: agent.yaml is no kustomize resource, so nothing renames
// its label with it), else the nearest name.
func (p *pass) agentConnHint(label string, names []string) string {
	var renamed []string
	for _, c := range p.connList {
		n := c.obj().Name
		if !slices.Contains(names, n) || slices.Contains(renamed, n) || !nameTransformed(&c.item) {
			continue
		}
		if strings.HasSuffix(n, "-"+label) || strings.HasPrefix(n, label+"-") || strings.Contains(n, "-"+label+"-") {
			renamed = append(renamed, n)
		}
	}
	if len(renamed) != 1 {
		return didYouMean(label, names)
	}
	return fmt.Sprintf("; the build renamed Connection %s to %s (a kustomize namePrefix or nameSuffix), and nothing renames agent.yaml's label with it, since kustomize does not read agent.yaml: write connection: %s", label, renamed[0], renamed[0])
}

// agentConnElsewhere says where a Connection the agent's label names
// is when another deploy unit holds it and the agent's own does not: an
// agent.yaml outside the kustomization that builds its Connections (at
// a GitOps repository's top, beside the Flux Kustomizations) is a loose
// file, and an agent reads only the Connections of its own unit
// (docs/inputs.md, "kustomize directories"). ns, when set, is the
// namespace keyhole.yaml puts the agent in. "" when no other unit has
// one.
func (p *pass) agentConnElsewhere(label, ns string) string {
	for _, o := range p.units {
		if o == p {
			continue
		}
		for _, c := range o.connList {
			if c.obj().Name != label || (ns != "" && c.ns != ns) {
				continue
			}
			const own = "and an agent.yaml reads only the Connections of its own deploy unit, that of the kustomization beside it"
			if o.unit.Loose() {
				return fmt.Sprintf("; Connection %s (%s) is among the files read outside any kustomization, %s: list the Connection's file in that kustomization",
					c.ref(), c.doc.Pos, own)
			}
			return fmt.Sprintf("; deploy unit %s has Connection %s (%s), %s: move the agent.yaml beside a kustomization that %s builds",
				o.unit.Name, c.ref(), c.doc.Pos, own, o.unit.Name)
		}
	}
	return ""
}

// buildFailedNote says, for an agent whose deploy unit's build failed,
// that the unit's objects are not read: an agent.yaml joins the unit
// beside its kustomization whatever the build gives, so its Connections
// are missing because of the loader's error, which is reported already.
// "" when the loader reported no error in the unit, and for the loose
// files, whose unread files unreadNote names.
func (p *pass) buildFailedNote() string {
	if p.unit.Loose() {
		return ""
	}
	for _, d := range p.opts.Loaded {
		if d.Severity == diag.Error && slices.Contains(d.Units, p.unit.Name) {
			return fmt.Sprintf("; deploy unit %s could not be built (%s at %s), so none of its objects is read: fix that first", p.unit.Name, d.Code, d.Pos)
		}
	}
	return ""
}

// proxyHeldConnector reports an agent.yaml connector naming a Connection
// whose credential only the proxy may hold (a kind it mints or signs
// with), and says whether it did. The agent.yaml route fills the
// catalog's form with the Secret's value; here that value is root
// material (spec.md §3.3–3.5), which never leaves the proxy. Where an
// AgentRuntime or ToolRegistry of the namespace binds the Connection
// already, as `keyhole init` scaffolds both, the message names it.
func (p *pass) proxyHeldConnector(it *item, at path, connector string, cn *connection) bool {
	var code, what string
	switch cn.w.Spec.Credential.Kind {
	case CredentialKindGitHubApp:
		code, what = codeGitHubAppInvalid, "a GitHub App's private key, from which the proxy mints tokens"
	case CredentialKindAWSSigV4:
		code, what = codeAWSSigV4Invalid, "an AWS access key, with which the proxy signs requests"
	case CredentialKindOAuth2:
		code, what = codeOAuth2Invalid, "an OAuth 2.0 client's secret or refresh token, which the proxy exchanges for tokens"
	case CredentialKindGoogle:
		code, what = codeGoogleInvalid, "a Google service account's key, which the proxy exchanges for tokens"
	default:
		return false
	}
	fix := "bind the Connection from an AgentRuntime's spec.sandbox.connections instead"
	if o, j := p.ownerBinding(cn); o != nil {
		fix = fmt.Sprintf("%s %s binds it already at %s, which is how it reaches a sandbox: remove this connector from the agent, or its sandbox: true",
			o.obj().Kind, o.obj().Name, posOf(&o.item, bindingPath(j).with("connection")))
	}
	p.report(code, it, at, false, "connector %s names Connection %s, whose credential (kind %s) is %s; an agent.yaml connector hands the sandbox's platform the Secret's value, which here only the proxy may read: %s",
		connector, cn.obj().Name, cn.w.Spec.Credential.Kind, what, fix)
	return true
}

// ownerBinding returns the first AgentRuntime or ToolRegistry binding of
// Connection cn, in input order, and the binding's index; nil where none
// binds it or the owner's sandbox is disabled.
func (p *pass) ownerBinding(cn *connection) (*owner, int) {
	for _, o := range p.owners {
		sb := o.w.Spec.Sandbox
		if o.ns != cn.ns || (sb.Enabled != nil && !*sb.Enabled) {
			continue
		}
		for j, b := range sb.Connections {
			if b.Connection == cn.obj().Name {
				return o, j
			}
		}
	}
	return nil, 0
}
