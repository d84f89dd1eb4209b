package compiler

import (
	"slices"
	"sync"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/schema"
)

// interner keeps one copy of the strings that recur from document to
// document: apiVersion, kind, namespace, header names, value templates,
// rule methods, Secret keys, SandboxClass roles. The YAML parser gives
// each scalar its own string, and a digest keeps them for the whole run:
// at a hundred thousand objects, tens of megabytes of "team-01" and
// "Authorization". Names and hosts, which seldom recur, are not passed
// to it. It is safe for concurrent use (the loader's workers share one),
// and holds at most internMax strings, past which it returns its input.
//
// It also holds the arenas the digests are copied into (see arena), under
// the same lock: an interned string is kept as the arenas' copy.
type interner struct {
	mu sync.Mutex
	m  map[string]string
	arenas
}

// arenas are where the digests keep what they hold, one arena per type.
type arenas struct {
	strs        stringArena
	lists       arena[string]
	values      arena[string]
	digests     arena[digested]
	more        arena[digestMore]
	connections arena[connectionWire]
	injects     arena[injectWire]
	basics      arena[basicWire]
	githubApps  arena[githubAppWire]
	oauth2s     arena[oauth2Wire]
	googles     arena[googleWire]
	rules       arena[ruleWire]
	classes     arena[sandboxClassWire]
	roles       arena[roleWire]
	agents      arena[agentWire]
	connectors  arena[agentConnectorWire]
	owners      arena[bindingOwnerWire]
	bindings    arena[bindingWire]
	flags       arena[bool]
	secrets     arena[secretDigest]
	refused     arena[refusedKeyLists]
	keyLists    arena[secretKey]
}

const internMax = 1 << 14

func newInterner() *interner { return &interner{m: map[string]string{}} }

func (in *interner) str(s string) string {
	if in == nil {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[s]; ok {
		return v
	}
	if len(in.m) < internMax {
		s = in.strs.str(s)
		in.m[s] = s
	}
	return s
}

// scalar interns the value of n when it is a scalar.
func (in *interner) scalar(n *yaml.Node) {
	if n != nil && n.Kind == yaml.ScalarNode {
		n.Value = in.str(n.Value)
	}
}

// at interns the scalar value of key in the mapping n, if any.
func (in *interner) at(n *yaml.Node, key string) {
	v, _ := child(n, key)
	in.scalar(v)
}

// items interns every scalar item of the sequence n.
func (in *interner) items(n *yaml.Node) {
	if n != nil && n.Kind == yaml.SequenceNode {
		for _, it := range n.Content {
			in.scalar(it)
		}
	}
}

// keys interns the keys of the mapping n, never its values.
func (in *interner) keys(n *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		in.scalar(n.Content[i])
	}
}

// sequence returns the items of n when it is a sequence.
func sequence(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// document interns, in a document's tree, what recurs in documents of
// its kind, before the digest and the loader take their strings from
// it. Only scalar values change, to equal strings. Each mapping on the
// way is looked up once: this runs for every document of the input.
func (in *interner) document(kind string, n *yaml.Node) {
	in.at(n, "apiVersion")
	in.at(n, "kind")
	md, _ := child(n, "metadata")
	in.at(md, "namespace")
	spec, _ := child(n, "spec")
	switch schema.Kind(kind) {
	case schema.KindConnection:
		cred, _ := child(spec, "credential")
		in.at(cred, "kind")
		placement, _ := child(spec, "placement")
		inject, _ := child(placement, "inject")
		for _, e := range sequence(inject) {
			in.at(e, "header")
			in.at(e, "value")
			basic, _ := child(e, "basic")
			in.at(basic, "usernameKey")
			in.at(basic, "passwordKey")
			rules, _ := child(e, "rules")
			for _, r := range sequence(rules) {
				methods, _ := child(r, "methods")
				in.items(methods)
				prefixes, _ := child(r, "pathPrefixes")
				in.items(prefixes)
			}
		}
	case schema.KindSecret:
		for _, f := range []string{"data", "stringData"} {
			v, _ := child(n, f)
			in.keys(v)
		}
	case schema.KindSandboxClass:
		in.at(spec, "image")
		conns, _ := child(spec, "connections")
		for _, c := range sequence(conns) {
			in.at(c, "role")
		}
	case schema.KindAgentRuntime, schema.KindToolRegistry:
		sandbox, _ := child(spec, "sandbox")
		conns, _ := child(sandbox, "connections")
		for _, c := range sequence(conns) {
			in.at(c, "sandbox")
			in.at(c, "role")
		}
	}
}

// The copies below are of what a digest keeps: each returns its input
// copied into the arenas, every string and list its own, so that nothing
// it holds shares a span with the parser's garbage. Those that take the
// lock say so; the others expect the caller to hold it.

// keep returns the interned copy of s, else a copy in the arenas.
func (in *interner) keep(s string) string {
	if v, ok := in.m[s]; ok {
		return v
	}
	return in.strs.str(s)
}

// list returns a copy of xs, nil for nil.
func (in *interner) list(xs []string) []string {
	c := in.lists.clone(xs)
	for i := range c {
		c[i] = in.keep(c[i])
	}
	return c
}

func (in *interner) metadata(m metadata) metadata {
	return metadata{Name: in.keep(m.Name), Namespace: in.keep(m.Namespace)}
}

// connection takes the lock.
func (in *interner) connection(w *connectionWire) *connectionWire {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := *w
	c.Metadata = in.metadata(w.Metadata)
	sp := &c.Spec
	sp.Hosts = in.list(w.Spec.Hosts)
	sp.Credential.Kind = in.keep(sp.Credential.Kind)
	sp.Credential.SecretRef.Name = in.keep(sp.Credential.SecretRef.Name)
	sp.Credential.SecretRef.Namespace = in.keep(sp.Credential.SecretRef.Namespace)
	sp.Enforcement = in.keep(sp.Enforcement)
	if g := w.Spec.Credential.GitHubApp; g != nil {
		sp.Credential.GitHubApp = in.githubApps.new(githubAppWire{
			AppID: g.AppID, InstallationID: g.InstallationID,
			Owner: in.keep(g.Owner), PrivateKeyKey: in.keep(g.PrivateKeyKey), API: in.keep(g.API),
		})
	}
	if a := w.Spec.Credential.AWSSigV4; a != nil {
		sp.Credential.AWSSigV4 = &awsSigV4Wire{
			AccessKeyIDKey: in.keep(a.AccessKeyIDKey), SecretAccessKeyKey: in.keep(a.SecretAccessKeyKey),
			SessionTokenKey: in.keep(a.SessionTokenKey), Region: in.keep(a.Region), Service: in.keep(a.Service),
			Identity: in.keep(a.Identity), RoleARN: in.keep(a.RoleARN),
		}
	}
	if o := w.Spec.Credential.OAuth2; o != nil {
		sp.Credential.OAuth2 = in.oauth2s.new(oauth2Wire{
			TokenURL: in.keep(o.TokenURL), Grant: in.keep(o.Grant), ClientIDKey: in.keep(o.ClientIDKey),
			ClientSecretKey: in.keep(o.ClientSecretKey), RefreshTokenKey: in.keep(o.RefreshTokenKey),
			Scopes: in.list(o.Scopes), Audience: in.keep(o.Audience), Resource: in.keep(o.Resource),
		})
	}
	if g := w.Spec.Credential.Google; g != nil {
		sp.Credential.Google = in.googles.new(googleWire{
			KeyKey: in.keep(g.KeyKey), TokenURL: in.keep(g.TokenURL), Scopes: in.list(g.Scopes), Audience: in.keep(g.Audience),
			Identity: in.keep(g.Identity), ServiceAccount: in.keep(g.ServiceAccount),
		})
	}
	sp.Placement.Inject = in.injects.clone(w.Spec.Placement.Inject)
	for i := range sp.Placement.Inject {
		e := &sp.Placement.Inject[i]
		if len(e.Hosts) > 0 && slices.Equal(e.Hosts, w.Spec.Hosts) {
			// Most entries name the Connection's hosts: one copy, capacity
			// cut to length, serves both.
			e.Hosts = sp.Hosts
		} else {
			e.Hosts = in.list(e.Hosts)
		}
		e.Header = in.keep(e.Header)
		if e.Value != nil {
			e.Value = in.values.new(in.keep(*e.Value))
		}
		if e.Basic != nil {
			e.Basic = in.basics.new(basicWire{UsernameKey: in.keep(e.Basic.UsernameKey), PasswordKey: in.keep(e.Basic.PasswordKey)})
		}
		e.PlaceholderEnv = in.list(e.PlaceholderEnv)
		e.Rules = in.rules.clone(e.Rules)
		for j := range e.Rules {
			r := &e.Rules[j]
			r.Methods, r.PathPrefixes, r.PathPatterns, r.EncodedSlash = in.list(r.Methods), in.list(r.PathPrefixes), in.list(r.PathPatterns), in.keep(r.EncodedSlash)
			if r.MCP != nil {
				r.MCP = in.mcp(r.MCP)
			}
		}
	}
	return in.connections.new(c)
}

// mcp copies a rule's MCP condition. Few rules have one: it is
// allocated plainly, its strings and lists kept as the rules' are.
func (in *interner) mcp(m *schema.MCP) *schema.MCP {
	c := &schema.MCP{Methods: in.list(m.Methods), Tools: in.list(m.Tools), Resources: in.list(m.Resources), Responses: m.Responses}
	if m.Arguments != nil {
		c.Arguments = make(map[string]map[string][]string, len(m.Arguments))
		for tool, fields := range m.Arguments {
			var cf map[string][]string
			if fields != nil {
				cf = make(map[string][]string, len(fields))
				for f, vs := range fields {
					cf[in.keep(f)] = in.list(vs)
				}
			}
			c.Arguments[in.keep(tool)] = cf
		}
	}
	return c
}

// sandboxClass takes the lock.
func (in *interner) sandboxClass(w *sandboxClassWire) *sandboxClassWire {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := *w
	c.Metadata = in.metadata(w.Metadata)
	c.Spec.Image = in.keep(w.Spec.Image)
	c.Spec.Connections = in.roles.clone(w.Spec.Connections)
	for i := range c.Spec.Connections {
		c.Spec.Connections[i].Role = in.keep(c.Spec.Connections[i].Role)
	}
	return in.classes.new(c)
}

// agent takes the lock.
func (in *interner) agent(w *agentWire) *agentWire {
	in.mu.Lock()
	defer in.mu.Unlock()
	a := *w
	a.Name, a.Sandbox = in.keep(w.Name), in.keep(w.Sandbox)
	a.SandboxOptions.Setup = in.list(w.SandboxOptions.Setup)
	a.Connectors = in.connectors.clone(w.Connectors)
	for i := range a.Connectors {
		c := &a.Connectors[i]
		c.Name, c.Connection, c.Tools = in.keep(c.Name), in.keep(c.Connection), in.list(c.Tools)
	}
	a.AllowedDomains = in.list(w.AllowedDomains)
	return in.agents.new(a)
}

// owner takes the lock.
func (in *interner) owner(w *bindingOwnerWire) *bindingOwnerWire {
	in.mu.Lock()
	defer in.mu.Unlock()
	o := *w
	o.Metadata = in.metadata(w.Metadata)
	sb := &o.Spec.Sandbox
	if sb.Enabled != nil {
		sb.Enabled = in.flags.new(*sb.Enabled)
	}
	sb.Connections = in.bindings.clone(sb.Connections)
	for i := range sb.Connections {
		b := &sb.Connections[i]
		b.Sandbox, b.Role, b.Connection = in.keep(b.Sandbox), in.keep(b.Role), in.keep(b.Connection)
	}
	return in.owners.new(o)
}

// secret returns the digest of a Secret: md names it, values are its
// keys, refused those of w the API server refuses (see refusedKeys). It
// takes the lock.
func (in *interner) secret(md metadata, values secretKeys, refused secretWire) *secretDigest {
	in.mu.Lock()
	defer in.mu.Unlock()
	sd := secretDigest{metadata: in.metadata(md), values: in.keyLists.clone(values)}
	for i := range sd.values {
		sd.values[i].name = in.keep(sd.values[i].name)
	}
	if refused.Data != nil || refused.StringData != nil {
		sd.refusedKeys = in.refused.new(refusedKeyLists{data: in.list(sortedKeys(refused.Data)), stringData: in.list(sortedKeys(refused.StringData))})
	}
	return in.secrets.new(sd)
}

// digest returns a copy of dg in the arenas, and of what more it keeps.
// It takes the lock.
func (in *interner) digest(dg *digested) *digested {
	in.mu.Lock()
	defer in.mu.Unlock()
	if dg.more != nil {
		m := *dg.more
		m.agentName = in.keep(m.agentName)
		m.ignore = in.list(m.ignore)
		dg.more = in.more.new(m)
	}
	return in.digests.new(*dg)
}
