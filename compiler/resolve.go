package compiler

import (
	"cmp"
	"slices"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
)

// PlaceholderPrefix starts every placeholder: the sandbox holds
// omnia-injected-<connection> where the credential would be.
const PlaceholderPrefix = "omnia-injected-"

// Placeholder returns the placeholder for a Connection.
func Placeholder(connection string) string { return PlaceholderPrefix + connection }

// resolve turns every sandbox binding into a Sandbox of the plan. A
// binding that names something missing is left out; the checks report it.
func (p *pass) resolve() {
	for _, o := range p.owners {
		sb := o.w.Spec.Sandbox
		if sb.Enabled != nil && !*sb.Enabled {
			continue
		}
		// One claim per SandboxClass the owner binds, in order of first use.
		var classes []string
		byClass := map[string][]bindingWire{}
		for _, b := range sb.Connections {
			if _, ok := byClass[b.Sandbox]; !ok {
				classes = append(classes, b.Sandbox)
			}
			byClass[b.Sandbox] = append(byClass[b.Sandbox], b)
		}
		for _, class := range classes {
			p.plan.Sandboxes = append(p.plan.Sandboxes, p.sandbox(o, class, byClass[class]))
		}
	}
	for _, a := range p.agents {
		if s, ok := p.agentSandbox(a); ok {
			p.plan.Sandboxes = append(p.plan.Sandboxes, s)
			p.plan.Agents = append(p.plan.Agents, p.planAgent(a, s))
		}
	}
	slices.SortFunc(p.plan.Sandboxes, func(a, b Sandbox) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
}

func (p *pass) sandbox(o *owner, class string, bindings []bindingWire) Sandbox {
	// The plan keeps the namespace as written (render places a sandbox
	// without one in its default namespace), or, where an engine applies
	// the unit in a namespace of its own (an Argo CD destination, a
	// HelmRelease's target), that one, as render writes it: explain,
	// diff and the ceiling then see the namespace the cluster does.
	// References resolve in the namespace the owner is in.
	ns := o.obj().Namespace
	if p.unit != nil && p.unit.Namespace != "" {
		ns = o.ns
	}
	s := Sandbox{
		Name:      o.obj().Name + "-" + class,
		Namespace: ns,
		Source:    o.obj(),
		Pos:       o.doc.Pos,
		Class:     class,
	}
	if c := p.classes[ref{o.ns, class}]; c != nil {
		s.Image = c.w.Spec.Image
	}
	s.Proxy = config.Config{
		APIVersion: config.APIVersion,
		Kind:       config.Kind,
		Sandbox:    config.SandboxRef{Namespace: ns, Name: s.Name},
	}
	injected := map[string]bool{}
	passthrough := map[string]bool{}
	// Hosts the proxy may dial at internal addresses: an injected host
	// when the Connection that injects it says so, a passthrough host
	// when any Connection listing it does (it carries no credential).
	internal, internalPass := map[string]bool{}, map[string]bool{}
	envs := map[string]bool{}
	// The plan of every sandbox is kept to the end: its lists are made
	// to size, not grown by doubling.
	var hosts, env int
	wires := make([]*connectionWire, len(bindings))
	for i, b := range bindings {
		if c := p.conns.get(ref{o.ns, b.Connection}); c != nil {
			wires[i] = c.w
			for _, in := range wires[i].Spec.Placement.Inject {
				hosts, env = hosts+len(in.Hosts), env+len(in.PlaceholderEnv)
			}
		}
	}
	if hosts > 0 {
		s.Proxy.Hosts = make([]config.Host, 0, hosts)
	}
	if env > 0 {
		s.Env = make([]EnvVar, 0, env)
	}
	for i, b := range bindings {
		c, w := p.conns.get(ref{o.ns, b.Connection}), wires[i]
		if c == nil {
			continue
		}
		var scope githubScope
		app := w.githubApp()
		if app != nil {
			scope = githubAppScope(w, app.api())
		}
		token := w.tokenInject()
		if c != nil {
			s.ProxyAnnotations = workloadAnnotations(s.ProxyAnnotations, c)
		}
		// The hosts this Connection injected, and the form of the entry
		// that injected each first: a later entry on the host adds its
		// rules, in its own form (formsplit.go).
		own := map[string]int{}
		ownForm := map[string]string{}
		for ii, in := range w.Spec.Placement.Inject {
			inject := config.Inject{Secret: w.Spec.Credential.SecretRef.Name}
			switch {
			case app != nil:
				// Set per host below: the scheme depends on it.
			case token != nil:
				inject = *token
			case w.Spec.Credential.Kind == CredentialKindAWSSigV4:
				// Set per host below: the scope depends on it.
			case w.minted():
				continue // no usable githubApp, oauth2 or googleServiceAccount; the checks report it
			case in.Basic != nil:
				inject.Basic = &config.BasicInject{UsernameKey: in.Basic.UsernameKey, PasswordKey: in.Basic.PasswordKey}
			case in.Value != nil:
				inject.Header = &config.HeaderInject{Name: cmp.Or(in.Header, "Authorization"), Value: *in.Value}
			default:
				continue
			}
			rules := make([]config.Rule, 0, len(in.Rules))
			for _, r := range in.Rules {
				rules = append(rules, r.proxy())
			}
			if len(rules) == 0 {
				rules = nil
			}
			form := injectForm(w.Spec.Credential.Kind, &in)
			for _, h := range in.Hosts {
				if at, ok := own[h]; ok {
					hp := &s.Proxy.Hosts[at]
					switch {
					case ownForm[h] == form:
						// One form: the union of the two entries.
						if hp.Rules == nil || rules == nil {
							hp.Rules = nil
						} else {
							hp.Rules = slices.Concat(hp.Rules, rules)
						}
					case hp.Rules != nil && rules != nil:
						ri := inject
						for _, r := range rules {
							r.Inject = &ri
							hp.Rules = append(hp.Rules, r)
						}
					}
					// An entry without rules beside one of another
					// form is ambiguous; the checks report it.
					continue
				}
				if injected[h] {
					continue // two Connections for one host; the checks report it
				}
				if a := w.awsSigV4(); a != nil {
					if _, _, ok := a.scope(h); !ok {
						continue // no service or region to sign for; the checks report it
					}
				}
				injected[h] = true
				own[h], ownForm[h] = len(s.Proxy.Hosts), form
				p.origin(&s, h, origin{it: &c.item, at: path{"spec", "placement", "inject", ii}, rules: true})
				internal[h] = w.Spec.AllowInternalAddresses
				hi := inject
				if app != nil {
					hi.GitHubApp = githubAppInject(w, h, scope)
				}
				if a := w.awsSigV4(); a != nil {
					hi.AWSSigV4 = awsSigV4Inject(a, h)
				}
				s.Proxy.Hosts = append(s.Proxy.Hosts, config.Host{Name: h, Connection: c.obj().Name, Inject: hi, Rules: rules, Audit: w.Spec.Enforcement == EnforcementAudit})
			}
			for _, e := range in.PlaceholderEnv {
				if !envs[e] {
					envs[e] = true
					s.Env = append(s.Env, EnvVar{Name: e, Value: Placeholder(c.obj().Name), Connection: c.obj().Name})
				}
			}
		}
		for j, h := range w.Spec.Hosts {
			if !passthrough[h] {
				p.origin(&s, h, origin{it: &c.item, at: path{"spec", "hosts", j}})
			}
			passthrough[h] = true
			internalPass[h] = internalPass[h] || w.Spec.AllowInternalAddresses
		}
	}
	for h := range passthrough {
		if !injected[h] {
			s.Proxy.Passthrough = append(s.Proxy.Passthrough, h)
		}
		if internal[h] || !injected[h] && internalPass[h] {
			s.Proxy.InternalHosts = append(s.Proxy.InternalHosts, h)
		}
	}
	slices.Sort(s.Proxy.Passthrough)
	slices.Sort(s.Proxy.InternalHosts)
	slices.SortFunc(s.Proxy.Hosts, func(a, b config.Host) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.Env, func(a, b EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return s
}
