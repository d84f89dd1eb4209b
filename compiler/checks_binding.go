package compiler

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// Codes of the binding checks: what an AgentRuntime's or ToolRegistry's
// spec.sandbox.connections names, and how the Connections bound to one
// sandbox fit together.
const (
	codeBindingClassMissing      = "BindingSandboxClassMissing"
	codeBindingRoleUndeclared    = "BindingRoleUndeclared"
	codeBindingConnectionMissing = "BindingConnectionMissing"
	codeBindingHostConflict      = "BindingHostConflict"
	codeBindingEnvConflict       = "BindingEnvConflict"
	codeConnectionUnbound        = "ConnectionUnbound"
	codeSandboxNameInvalid       = "SandboxNameInvalid"
)

// SandboxNameSuffix is the longest suffix render appends to a sandbox's
// name in the names of its objects (<name>-egress-proxy, a Service): a
// Service's name and a label's value hold at most 63 characters, so a
// sandbox's name holds at most MaxSandboxName.
const (
	SandboxNameSuffix = "-egress-proxy"
	MaxSandboxName    = 63 - len(SandboxNameSuffix)
)

// CheckSandboxName reports a sandbox name render cannot name objects
// after: one that is not a DNS label, or longer than MaxSandboxName.
func CheckSandboxName(name string) error {
	if len(name) > MaxSandboxName {
		return fmt.Errorf("it is %d characters, and render names its objects <name>%s, which a Service's name limits to 63: at most %d", len(name), SandboxNameSuffix, MaxSandboxName)
	}
	if !isDNSLabel(name) {
		return errors.New("it is not a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit), as the names render gives its objects must be")
	}
	return nil
}

// CheckNamespace reports a namespace render cannot place objects in: one
// that is not a DNS label of at most 63 characters (--namespace).
func CheckNamespace(ns string) error {
	if len(ns) > 63 || !isDNSLabel(ns) {
		return errors.New("not a DNS label (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)")
	}
	return nil
}

func isDNSLabel(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// checkSandboxNames reports each sandbox the plan would hold whose name
// render refuses, so that check fails where render would: a binding's
// sandbox is named <owner>-<SandboxClass>, an agent's <name>-<sandbox>.
func checkSandboxNames(p *pass) {
	p.bindingSandboxes(func(o *owner, j int, class string) {
		name := o.obj().Name + "-" + class
		if err := CheckSandboxName(name); err != nil {
			p.report(codeSandboxNameInvalid, &o.item, bindingPath(j).with("sandbox"), false,
				"the sandbox of %s %s and SandboxClass %s is named %s, which render cannot use: %s; rename the %s or the SandboxClass (or change the kustomize namePrefix or nameSuffix that lengthens both)",
				o.obj().Kind, o.obj().Name, class, name, err, o.obj().Kind)
		}
	})
	for _, a := range p.agents {
		aw := a.w
		if aw.Sandbox == "" {
			continue
		}
		name := aw.Name + "-" + aw.Sandbox
		if err := CheckSandboxName(name); err != nil {
			p.report(codeSandboxNameInvalid, &a.item, path{"name"}, false,
				"the sandbox of agent %s is named %s, which render cannot use: %s; rename the agent or its sandbox", aw.Name, name, err)
		}
	}
}

func bindingPath(j int) path { return path{"spec", "sandbox", "connections", j} }

func checkBindingRefs(p *pass) {
	for _, o := range p.owners {
		ns := o.ns
		for j, b := range o.w.Spec.Sandbox.Connections {
			class := p.classes[ref{ns, b.Sandbox}]
			if class == nil && p.invalid["SandboxClass/"+ref{ns, b.Sandbox}.String()] {
				// the class's own findings say what is wrong
			} else if class == nil {
				msg := fmt.Sprintf("SandboxClass %s is not in the input", ref{ns, b.Sandbox})
				p.report(codeBindingClassMissing, &o.item, bindingPath(j).with("sandbox"), false, "%s%s%s", msg, p.bindingHint(o, "SandboxClass", "sandbox", b.Sandbox, namesIn(p.classes, ns)), p.unreadNote())
			} else if roles := class.roles(); !slices.Contains(roles, b.Role) {
				p.report(codeBindingRoleUndeclared, &o.item, bindingPath(j).with("role"), false,
					"SandboxClass %s declares no role %q (it declares: %s); declare it in the class's spec.connections or bind a declared role%s",
					class.ref(), b.Role, listOrNone(roles), didYouMean(b.Role, roles))
			}
			if p.conns.get(ref{ns, b.Connection}) == nil && !p.invalid["Connection/"+ref{ns, b.Connection}.String()] {
				names := p.connNames(ns)
				hint := p.bindingHint(o, "Connection", "connection", b.Connection, names)
				if elsewhere := p.connNamespaces(b.Connection, ns); hint == "" && len(elsewhere) > 0 {
					hint = fmt.Sprintf("; a Connection %s is in namespace %s, and a binding names a Connection of its own namespace", b.Connection, strings.Join(elsewhere, ", "))
				} else if hint == "" && len(names) > 0 {
					hint = fmt.Sprintf("; the Connections of namespace %s are: %s", ns, capList(names))
				}
				p.report(codeBindingConnectionMissing, &o.item, bindingPath(j).with("connection"), false,
					"Connection %s is not in the input%s%s", ref{ns, b.Connection}, hint, p.unreadNote())
			}
		}
	}
}

// claims holds, for each name of one sandbox (a host injected, a
// placeholder variable set), the Connection that claimed it first and by
// which binding or connector: the plan keeps that one.
type claims map[string]claim

type claim struct {
	connection string
	by         int // the binding's or the connector's index
}

// take records connection's claim on name by binding or connector by,
// unless name is claimed already; it returns the first claim when that
// was another Connection's.
func (cs claims) take(name, connection string, by int) (first claim, clash bool) {
	first, ok := cs[name]
	if !ok {
		cs[name] = claim{connection, by}
	}
	return first, ok && first.connection != connection
}

// checkBindingConflicts finds two Connections bound to one sandbox that
// inject the same host or set the same placeholder variable: the proxy can
// apply only one, and which would be an accident of ordering.
func checkBindingConflicts(p *pass) {
	for _, o := range p.owners {
		ns := o.ns
		hosts := map[string]claims{} // sandbox → host → first claim
		envs := map[string]claims{}
		for j, b := range o.w.Spec.Sandbox.Connections {
			c := p.conns.get(ref{ns, b.Connection})
			if c == nil {
				continue
			}
			// The sandbox is named after its owner and class, as
			// checkSandboxNames says.
			sandbox := fmt.Sprintf("%s-%s (SandboxClass %s)", o.obj().Name, b.Sandbox, b.Sandbox)
			if hosts[b.Sandbox] == nil {
				hosts[b.Sandbox], envs[b.Sandbox] = claims{}, claims{}
			}
			for _, in := range c.w.Spec.Placement.Inject {
				for _, h := range in.Hosts {
					if first, clash := hosts[b.Sandbox].take(h, c.obj().Name, j); clash {
						p.report(codeBindingHostConflict, &o.item, bindingPath(j).with("connection"), false,
							"Connections %s (binding %d) and %s both inject %s in sandbox %s; the proxy can apply only one, so bind one of them", first.connection, first.by, c.obj().Name, h, sandbox)
					}
				}
				for _, e := range in.PlaceholderEnv {
					if first, clash := envs[b.Sandbox].take(e, c.obj().Name, j); clash {
						p.report(codeBindingEnvConflict, &o.item, bindingPath(j).with("connection"), false,
							"Connections %s (binding %d) and %s both set %s in sandbox %s; rename one placeholderEnv", first.connection, first.by, c.obj().Name, e, sandbox)
					}
				}
			}
		}
	}
}

// checkUnbound reports Connections nothing binds, in an input that binds
// some: a repository of Connections alone is bound from elsewhere. An
// agent.yaml connector's connection label binds too.
func checkUnbound(p *pass) {
	if len(p.owners) == 0 {
		return
	}
	bound := map[ref]bool{}
	for _, a := range p.agents {
		aw := a.w
		for _, c := range aw.Connectors {
			if cn, err := p.agentConnection(a, c.Connection); err == nil {
				bound[cn.ref()] = true
			}
		}
	}
	for _, o := range p.owners {
		for _, b := range o.w.Spec.Sandbox.Connections {
			bound[ref{o.ns, b.Connection}] = true
		}
	}
	for _, c := range p.connList {
		if !bound[c.ref()] {
			p.report(codeConnectionUnbound, &c.item, path{"metadata", "name"}, false,
				"no AgentRuntime, ToolRegistry or agent.yaml in the input binds Connection %s, so no sandbox uses it", c.ref())
		}
	}
}

func (c *sandboxClass) roles() []string {
	var roles []string
	for _, r := range c.w.Spec.Connections {
		roles = append(roles, r.Role)
	}
	return roles
}

// bindingHint is what a binding's message suggests for name, of kind,
// which its field names and which is none of names: the one of names a
// kustomize namePrefix or nameSuffix made of it, as kustomize renames
// the object but follows a reference only CRDs know only when a
// nameReference entry tells it to; else a near name.
func (p *pass) bindingHint(o *owner, kind, field, name string, names []string) string {
	renamed := ""
	if nameTransformed(&o.item) {
		renamed = p.renamedName(name, o.obj().Name, names)
	}
	if renamed == "" {
		return didYouMean(name, names)
	}
	return fmt.Sprintf("; did you mean %q? A kustomize namePrefix or nameSuffix renamed the %s but not this reference, which kustomize follows only with a nameReference entry for kind %s at %s's spec/sandbox/connections/%s in the kustomization's configurations",
		renamed, kind, kind, o.obj().Kind, field)
}

// nameTransformed reports whether the object's metadata.name is not as
// its file wrote it: its build's namePrefix or nameSuffix (or another
// transformer) set it. Where the build renamed nothing, a name that
// merely shares the referrer's prefix is no rename.
func nameTransformed(it *item) bool {
	tree, err := it.doc.Tree()
	if err != nil || tree == nil {
		return false
	}
	n := source.Lookup(source.Lookup(tree, "metadata"), "name")
	if n == nil {
		return false
	}
	_, note := it.doc.Where(n)
	return note != ""
}

func (p *pass) connNames(ns string) []string {
	var names []string
	for _, c := range p.conns {
		if r := c.ref(); r.namespace == ns {
			names = append(names, r.name)
		}
	}
	return names
}

// didYouMean returns "; did you mean X?" for a near candidate, or "".
func didYouMean(word string, candidates []string) string {
	if near := diag.Suggest(word, candidates); near != "" {
		return fmt.Sprintf("; did you mean %q?", near)
	}
	return ""
}

// connNamespaces lists the namespaces other than ns holding a Connection
// named name, sorted.
func (p *pass) connNamespaces(name, ns string) []string {
	var out []string
	for _, c := range p.conns {
		if r := c.ref(); r.name == name && r.namespace != ns && !slices.Contains(out, r.namespace) {
			out = append(out, r.namespace)
		}
	}
	slices.Sort(out)
	return out
}
