package render

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/schema"
)

// agent compiles one agent.yaml agent into a SandboxClass (unless the
// input has it) and a Connection per sandbox connector, and binds them in
// spec.sandbox of the agent's own AgentRuntime from the input: the
// operator's fields of an AgentRuntime (its PromptPack, its facades) are
// the user's, and an AgentRuntime without them is one the operator
// refuses.
func (r *omniaRender) agent(a compiler.Agent) error {
	ns := cmp.Or(a.Namespace, r.opts.DefaultNamespace)
	if !r.op.Sandbox {
		r.report(codeOmniaSandboxUnsupported, a.Source, a.Pos,
			"agent %s gives its sandbox connectors, but %s has no sandbox feature to run them with; keep the default kubernetes target for this agent, or declare an operator version that serves the sandbox feature",
			a.Name, r.op)
		return nil
	}
	runtime := r.runtime(a, ns)
	if runtime == nil {
		return nil
	}
	class := r.classes[ns+"/"+a.Sandbox]
	if class == nil {
		spec := obj{}
		if a.Image != "" {
			spec["image"] = a.Image
		}
		class = &omniaObject{kind: "SandboxClass", namespace: ns, name: a.Sandbox, src: a.Source, pos: a.Pos, compiled: true,
			o: obj{"apiVersion": schema.Group, "kind": "SandboxClass", "metadata": obj{"name": a.Sandbox, "namespace": ns}, "spec": spec}}
		if _, err := r.add(class); err != nil {
			return err
		}
	}
	var bindings list
	for _, c := range a.Connectors {
		name := a.Name + "-" + c.Name
		if c.Writable {
			r.report(codeOmniaConnectorWritable, a.Source, a.Pos,
				"connector %s of agent %s says read_only: false, and the omnia target compiles an agent's connectors into Connections with the catalog's read-only rules only; bind Connection %s from the agent's AgentRuntime instead (spec.sandbox.connections), or keep the default kubernetes target",
				c.Name, a.Name, c.Connection.Name)
			continue
		}
		conn, ok := r.connection(a, c, ns, name)
		if !ok {
			continue
		}
		added, err := r.add(conn)
		if err != nil {
			return err
		}
		if !added {
			continue
		}
		if !r.declareRole(class, c.Name, a) {
			continue
		}
		bindings = append(bindings, obj{"sandbox": a.Sandbox, "role": c.Name, "connection": name})
	}
	sandbox := obj{"enabled": true}
	if len(bindings) > 0 {
		sandbox["connections"] = bindings
	}
	spec, _ := runtime.o["spec"].(obj)
	if spec == nil {
		spec = obj{}
		runtime.o["spec"] = spec
	}
	spec["sandbox"] = sandbox
	return nil
}

// runtime returns the input's AgentRuntime that agent a composes with:
// the one of its name in its namespace. It reports, and returns nil,
// when there is none or it binds its sandbox itself.
func (r *omniaRender) runtime(a compiler.Agent, ns string) *omniaObject {
	for _, o := range r.objs {
		if o.kind != "AgentRuntime" || o.namespace != ns || o.name != a.Name || o.compiled {
			continue
		}
		if spec, _ := o.o["spec"].(obj); spec != nil && spec["sandbox"] != nil {
			r.report(codeOmniaRuntimeBound, a.Source, a.Pos,
				"agent %s would bind its sandbox connectors in spec.sandbox of AgentRuntime %s/%s (%s), which binds its sandbox itself; bind in one place: remove spec.sandbox from the AgentRuntime, or sandbox: true from the agent's connectors",
				a.Name, ns, a.Name, o.src)
			return nil
		}
		return o
	}
	r.report(codeOmniaRuntimeMissing, a.Source, a.Pos,
		"agent %s has a sandbox, but the input has no AgentRuntime %s/%s to bind it in: the operator runs an agent from its AgentRuntime, whose promptPackRef and facades keyhole cannot invent; add that AgentRuntime (without spec.sandbox) to the repository, and the omnia target fills in its spec.sandbox from agent.yaml",
		a.Name, ns, a.Name)
	return nil
}

// declareRole makes sure class declares role: a compiled class gains it,
// an input class that lacks it is an error, since the input is the
// user's and the operator would refuse the binding.
func (r *omniaRender) declareRole(class *omniaObject, role string, a compiler.Agent) bool {
	spec, _ := class.o["spec"].(obj)
	if spec == nil {
		spec = obj{}
		class.o["spec"] = spec
	}
	roles, _ := spec["connections"].(list)
	var names []string
	for _, x := range roles {
		if m, ok := x.(obj); ok {
			if s, ok := m["role"].(string); ok {
				names = append(names, s)
			}
		}
	}
	if slices.Contains(names, role) {
		return true
	}
	if !class.compiled {
		r.report(codeOmniaClassRoleMissing, a.Source, a.Pos,
			"agent %s binds connector %s as role %q of SandboxClass %s/%s, which the input declares without that role (it has: %s); add {role: %s} to its spec.connections",
			a.Name, role, role, class.namespace, class.name, cmp.Or(strings.Join(names, ", "), "none"), role)
		return false
	}
	roles = append(roles, obj{"role": role})
	slices.SortFunc(roles, func(x, y any) int {
		return strings.Compare(x.(obj)["role"].(string), y.(obj)["role"].(string))
	})
	spec["connections"] = roles
	return true
}

// connection compiles one sandbox connector into a Connection named
// name: the catalog's hosts, the labelled Connection's Secret, one inject
// entry per way the catalog presents the credential and set of read-only
// rules, and for each host the catalog's read-only rules that hold on it
// and that an omnia Connection can express. ok is false when the
// connector cannot be kept read-only, which is reported.
func (r *omniaRender) connection(a compiler.Agent, c compiler.AgentConnector, ns, name string) (*omniaObject, bool) {
	hostRules, ok := r.rules(a, c)
	if !ok {
		return nil, false
	}
	var hosts []string
	// Hosts share a header entry when they take the same header and hold
	// the same rules.
	type headerKey struct{ name, prefix, rules string }
	headers := map[headerKey][]string{}
	var headerOrder []headerKey
	var basics list
	for _, h := range c.Connector.Hosts {
		hosts = append(hosts, h.Host)
		rules := hostRules[h.Host]
		switch in := h.Inject; {
		case in.Header != nil:
			// A host that takes either gets the header: the operator
			// injects one way per host, and the API is what it serves.
			k := headerKey{in.Header.Name, in.Header.ValuePrefix, rules.key}
			if _, seen := headers[k]; !seen {
				headerOrder = append(headerOrder, k)
			}
			headers[k] = append(headers[k], h.Host)
		case in.Basic != nil:
			user, ok := c.UsernameKeys[h.Host]
			if !ok {
				r.report(codeOmniaBasicUsernameMiss, a.Source, a.Pos,
					"connector %s sends basic auth to %s, but Connection %s has no basic entry for that host to take the user name key from; %s is left out of Connection %s/%s, and the operator's proxy will not inject there",
					c.Name, h.Host, c.Connection, h.Host, ns, name)
				continue
			}
			basics = append(basics, obj{"hosts": []string{h.Host}, "basic": obj{"usernameKey": user, "passwordKey": c.Key}, "rules": rules.list()})
		}
	}
	var inject list
	for i, k := range headerOrder {
		e := obj{"hosts": headers[k], "header": k.name, "value": k.prefix + "{{ ." + c.Key + " }}", "rules": hostRules[headers[k][0]].list()}
		// One placeholder variable per Connection: the first entry sets it.
		if i == 0 {
			e["placeholderEnv"] = []string{c.Connector.Env}
		}
		inject = append(inject, e)
	}
	inject = append(inject, basics...)
	secretRef := obj{"name": c.SecretName}
	if c.SecretNamespace != "" {
		secretRef["namespace"] = c.SecretNamespace
	}
	spec := obj{
		"hosts":      hosts,
		"credential": obj{"kind": "secret", "secretRef": secretRef},
		"placement":  obj{},
	}
	if len(inject) > 0 {
		spec["placement"] = obj{"inject": inject}
	}
	return &omniaObject{kind: "Connection", namespace: ns, name: name, src: a.Source, pos: a.Pos,
		o: obj{"apiVersion": schema.Group, "kind": "Connection", "metadata": obj{"name": name, "namespace": ns}, "spec": spec}}, true
}

// omniaRules are the rules of one host of an omnia Connection: the
// catalog rules (by index) that hold on it and that the Connection can
// express. key names the set, for hosts to share an inject entry.
type omniaRules struct {
	rules []schema.Rule
	key   string
}

func (o omniaRules) list() list {
	out := make(list, 0, len(o.rules))
	for _, rule := range o.rules {
		out = append(out, obj{"methods": slices.Clone(rule.Methods), "pathPrefixes": slices.Clone(rule.PathPrefixes)})
	}
	return out
}

// rules returns, for each of the connector's hosts, the catalog's
// read-only rules that hold on it and that an omnia Connection can
// express: methods on path prefixes. A rule with a body or GraphQL
// condition is left out whole, since dropping the condition would widen
// it, and so is one with encodedSlash, whose prefixes the operator would
// read otherwise; a rule's path patterns are left out and its prefixes kept, which
// only narrows it. Each loss is a warning saying what the operator will
// refuse. ok is false when a host is left with no rule, since a
// Connection entry without rules allows every request.
func (r *omniaRender) rules(a compiler.Agent, c compiler.AgentConnector) (map[string]omniaRules, bool) {
	for _, rule := range c.Connector.ReadOnly {
		if len(rule.Body) > 0 || rule.GraphQL != nil || rule.MCP != nil || len(rule.PathPatterns) > 0 || rule.EncodedSlash != "" {
			r.report(codeOmniaRuleDropped, a.Source, a.Pos,
				"connector %s's read-only rule %s cannot be expressed by an omnia Connection (methods and path prefixes only) and is left out of Connection %s-%s: %s",
				c.Name, describeRule(rule), a.Name, c.Name, refusedBy(rule))
		}
	}
	out := map[string]omniaRules{}
	for _, h := range c.Connector.Hosts {
		var o omniaRules
		readOnly, index := c.Connector.ReadOnlyOn(h.Host)
		for k, rule := range readOnly {
			if len(rule.Body) > 0 || rule.GraphQL != nil || rule.MCP != nil || rule.EncodedSlash != "" || len(rule.PathPrefixes) == 0 {
				continue
			}
			o.rules = append(o.rules, rule)
			o.key += strconv.Itoa(index[k]) + ","
		}
		if len(o.rules) == 0 {
			r.report(codeOmniaReadOnlyUnexpressed, a.Source, a.Pos,
				"no read-only rule of connector %s that holds on %s can be expressed by an omnia Connection, and one without rules would allow every request, writes included; give the connector a rule of methods and path prefixes in keyhole.yaml's catalog, or keep the default kubernetes target",
				c.Name, h.Host)
			return nil, false
		}
		out[h.Host] = o
	}
	return out, true
}

// describeRule names a catalog rule in a message.
func describeRule(rule schema.Rule) string {
	s := strings.Join(rule.Methods, ",")
	if paths := slices.Concat(rule.PathPrefixes, rule.PathPatterns); len(paths) > 0 {
		s += " " + strings.Join(paths, " ")
	}
	if rule.EncodedSlash != "" {
		s += " with encodedSlash: " + rule.EncodedSlash
	}
	if len(rule.Body) > 0 {
		keys := make([]string, 0, len(rule.Body))
		for k := range rule.Body {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var conds []string
		for _, k := range keys {
			conds = append(conds, k+" in ["+strings.Join(rule.Body[k], ",")+"]")
		}
		s += " with body " + strings.Join(conds, ", ")
	}
	if rule.GraphQL != nil {
		s += " with GraphQL " + strings.Join(rule.GraphQL.Operations, ",") + " only"
	}
	if rule.MCP != nil {
		s += " with MCP " + strings.Join(rule.MCP.Methods, ",") + " only"
	}
	return s
}

// refusedBy says what the operator's proxy refuses once rule is gone.
func refusedBy(rule schema.Rule) string {
	joined := strings.Join(rule.PathPatterns, " ")
	switch {
	case rule.GraphQL != nil:
		return "GraphQL reads (gh issue list, gh pr view) will be refused by the operator's proxy; keep the default kubernetes target for them"
	case rule.MCP != nil:
		return "its MCP server's tools will be refused by the operator's proxy; keep the default kubernetes target for them"
	case strings.Contains(joined, "/info/lfs/"):
		return "Git LFS downloads (git lfs pull) will be refused by the operator's proxy; keep the default kubernetes target for Git LFS"
	case strings.Contains(joined, "git-upload-pack"):
		return "git clone and fetch over HTTPS will be refused by the operator's proxy; keep the default kubernetes target for git"
	}
	return "the requests it allowed will be refused by the operator's proxy; keep the default kubernetes target for them"
}
