package diff

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"keyhole.dev/keyhole/access"
	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/proxy/config"
)

// SandboxChange is what changed in what one sandbox may reach: the
// policy its proxy enforces and the placeholders its environment holds.
// It names hosts, Secrets, keys, header templates and variable names,
// never a value.
type SandboxChange struct {
	// Unit is the deploy unit the sandbox is in, when the repository has
	// several (Side.Unit).
	Unit      string `json:"unit,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Change    Change `json:"change"`
	// Hosts are the injected hosts added, removed or changed, by name.
	Hosts []HostChange `json:"hosts,omitempty"`
	// PassthroughAdded and PassthroughRemoved are the hosts tunnelled
	// untouched (no injection, no rules) that were added and removed.
	PassthroughAdded   []string `json:"passthroughAdded,omitempty"`
	PassthroughRemoved []string `json:"passthroughRemoved,omitempty"`
	// InternalAdded and InternalRemoved are the hosts the proxy now dials,
	// or no longer dials, at internal addresses (metadata, loopback,
	// private ranges: a Connection's spec.allowInternalAddresses).
	InternalAdded   []string `json:"internalAdded,omitempty"`
	InternalRemoved []string `json:"internalRemoved,omitempty"`
	// EnvAdded and EnvRemoved are the placeholder variables added and
	// removed, as NAME=placeholder.
	EnvAdded   []string `json:"envAdded,omitempty"`
	EnvRemoved []string `json:"envRemoved,omitempty"`
	// BaseImage and HeadImage are the sandbox's image on each side when
	// it changed.
	BaseImage string `json:"baseImage,omitempty"`
	HeadImage string `json:"headImage,omitempty"`
	// Access is the verdict on what the sandbox may now do, with
	// witnesses. Placeholder variables and the image do not enter it:
	// they change what the sandbox holds, not what its proxy lets through.
	Access
	// Ceiling says, for a sandbox whose access may widen on a head with
	// a ceiling (keyhole.yaml), whether the head keeps it under the
	// ceiling: CeilingUnder, CeilingAbove (AboveCeiling says what breaks
	// it) or CeilingUnproven; empty otherwise.
	Ceiling      string           `json:"ceiling,omitempty"`
	AboveCeiling []CeilingWitness `json:"aboveCeiling,omitempty"`
}

// The ceiling's verdicts on a widened sandbox.
const (
	CeilingUnder    = "under"
	CeilingAbove    = "above"
	CeilingUnproven = "unproven"
)

// CeilingWitness is the smallest request the head allows above one limit
// of its ceiling.
type CeilingWitness struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	Body   string `json:"body,omitempty"`
	// Limit is the ceiling entry it breaks, as a sentence.
	Limit string `json:"limit"`
}

// ceilingVerdict weighs a widened sandbox's head against the head's
// ceiling.
func ceilingVerdict(c *SandboxChange, ceiling access.Ceiling, sb *compiler.Sandbox) {
	if len(ceiling.Limits) == 0 || !c.Verdict.MayWiden() {
		return
	}
	vs, undecided, err := ceiling.Check(access.Sandbox{Namespace: sb.Namespace, Name: sb.Name, Labels: sb.Labels}, &sb.Proxy)
	switch {
	case err != nil || len(undecided) > 0:
		c.Ceiling = CeilingUnproven
	case len(vs) > 0:
		c.Ceiling = CeilingAbove
	default:
		c.Ceiling = CeilingUnder
	}
	for _, v := range vs {
		c.AboveCeiling = append(c.AboveCeiling, CeilingWitness{Method: v.Method, URL: v.URL, Body: v.Body, Limit: ceiling.Limits[v.Limit].Describe()})
	}
}

// HostChange is one injected host's change.
type HostChange struct {
	Host   string `json:"host"`
	Change Change `json:"change"`
	// BaseInject and HeadInject describe the Connection and the
	// injection on each side (empty on a side without the host, and on
	// both when they did not change).
	BaseInject string `json:"baseInject,omitempty"`
	HeadInject string `json:"headInject,omitempty"`
	// RulesAdded and RulesRemoved are the rules the host gained and lost.
	// A side without rules forwards every request, shown as the rule
	// AnyRequest, so a widening reads as one.
	RulesAdded   []string `json:"rulesAdded,omitempty"`
	RulesRemoved []string `json:"rulesRemoved,omitempty"`
}

// AnyRequest stands for a host without rules: every request is forwarded.
const AnyRequest = "any method, any path (no rules)"

// ID is namespace/name, and the deploy unit when there is one.
func (s SandboxChange) ID() string {
	id := s.Name
	if s.Namespace != "" {
		id = s.Namespace + "/" + s.Name
	}
	if s.Unit != "" {
		id += " (unit " + s.Unit + ")"
	}
	return id
}

// unionKeys returns the keys of a and b, sorted, each once.
func unionKeys[V1, V2 any](a map[string]V1, b map[string]V2) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func comparePolicies(base, head Side) []SandboxChange {
	b, h := sandboxes(base), sandboxes(head)
	ids := unionKeys(b, h)
	cache := newAccessCache()
	var out []SandboxChange
	for _, id := range ids {
		bs, inBase := b[id]
		hs, inHead := h[id]
		var empty compiler.Sandbox
		c := SandboxChange{Change: Changed}
		switch {
		case !inBase:
			c.Change, bs = Added, &empty
			c.Namespace, c.Name = hs.Namespace, hs.Name
		case !inHead:
			c.Change, hs = Removed, &empty
			c.Namespace, c.Name = bs.Namespace, bs.Name
		default:
			c.Namespace, c.Name = hs.Namespace, hs.Name
		}
		c.Hosts = compareHosts(bs.Proxy.Hosts, hs.Proxy.Hosts)
		c.PassthroughAdded, c.PassthroughRemoved = added(bs.Proxy.Passthrough, hs.Proxy.Passthrough), added(hs.Proxy.Passthrough, bs.Proxy.Passthrough)
		c.InternalAdded, c.InternalRemoved = added(bs.Proxy.InternalHosts, hs.Proxy.InternalHosts), added(hs.Proxy.InternalHosts, bs.Proxy.InternalHosts)
		be, he := envStrings(bs.Env), envStrings(hs.Env)
		c.EnvAdded, c.EnvRemoved = added(be, he), added(he, be)
		if bs.Image != hs.Image && inBase && inHead {
			c.BaseImage, c.HeadImage = bs.Image, hs.Image
		}
		if c.Change == Changed && len(c.Hosts)+len(c.PassthroughAdded)+len(c.PassthroughRemoved)+len(c.InternalAdded)+len(c.InternalRemoved)+len(c.EnvAdded)+len(c.EnvRemoved) == 0 && c.BaseImage == c.HeadImage {
			continue
		}
		var bp, hp *config.Config
		if inBase {
			bp = &bs.Proxy
		}
		if inHead {
			hp = &hs.Proxy
		}
		c.Access = cache.compare(bp, hp)
		if inHead {
			ceilingVerdict(&c, head.Ceiling, hs)
		}
		out = append(out, c)
	}
	return out
}

// sandboxes indexes a side's sandboxes by namespace/name, the namespace
// defaulted as the render defaulted it.
func sandboxes(s Side) map[string]*compiler.Sandbox {
	out := map[string]*compiler.Sandbox{}
	for i := range s.Sandboxes {
		sb := s.Sandboxes[i]
		sb.Namespace = s.namespace(sb)
		out[sb.Namespace+"/"+sb.Name] = &sb
	}
	return out
}

func (s Side) namespace(sb compiler.Sandbox) string {
	return cmp.Or(sb.Namespace, s.DefaultNamespace, "default")
}

// SandboxID names one of the side's sandboxes as the reports do, as
// SandboxChange.ID: namespace/name, the namespace defaulted as the render
// defaulted it, and the side's deploy unit when it names one.
func (s Side) SandboxID(sb compiler.Sandbox) string {
	return SandboxChange{Namespace: s.namespace(sb), Name: sb.Name, Unit: s.Unit}.ID()
}

// SandboxNamespace is the namespace the side's render placed sb in.
func (s Side) SandboxNamespace(sb compiler.Sandbox) string { return s.namespace(sb) }

func compareHosts(base, head []config.Host) []HostChange {
	b, h := map[string]config.Host{}, map[string]config.Host{}
	for _, x := range base {
		b[x.Name] = x
	}
	for _, x := range head {
		h[x.Name] = x
	}
	names := unionKeys(b, h)
	var out []HostChange
	for _, n := range names {
		bh, inBase := b[n]
		hh, inHead := h[n]
		c := HostChange{Host: n}
		switch {
		case !inBase:
			c.Change, c.HeadInject, c.RulesAdded = Added, describeInject(hh), rules(hh.Rules)
		case !inHead:
			c.Change, c.BaseInject, c.RulesRemoved = Removed, describeInject(bh), rules(bh.Rules)
		default:
			c.Change = Changed
			if bi, hi := describeInject(bh), describeInject(hh); bi != hi {
				c.BaseInject, c.HeadInject = bi, hi
			}
			br, hr := rules(bh.Rules), rules(hh.Rules)
			c.RulesAdded, c.RulesRemoved = added(br, hr), added(hr, br)
			if c.BaseInject == "" && len(c.RulesAdded)+len(c.RulesRemoved) == 0 {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// added returns what is in to and not in from, sorted.
func added(from, to []string) []string {
	var out []string
	for _, s := range to {
		if !slices.Contains(from, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func envStrings(env []compiler.EnvVar) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}

// describeInject says which Connection's credential reaches the host and
// how: the header and its template (which names Secret keys, never
// values), basic auth's keys, or the placeholder substituted.
func describeInject(h config.Host) string {
	return fmt.Sprintf("connection %s, %s", h.Connection, describeCredential(h.Inject))
}

// describeCredential says which Secret an injection reads and how.
func describeCredential(in config.Inject) string {
	var how string
	switch {
	case in.Header != nil:
		how = fmt.Sprintf("header %s: %s", in.Header.Name, strconv.Quote(in.Header.Value))
	case in.Basic != nil:
		how = fmt.Sprintf("basic auth, user key %s, password key %s", in.Basic.UsernameKey, in.Basic.PasswordKey)
	case in.Substitute != nil:
		how = fmt.Sprintf("placeholder %s replaced by key %s in %s", in.Substitute.Placeholder, in.Substitute.Key, strings.Join(in.Substitute.HeaderNames(), ", "))
	case in.GitHubApp != nil:
		g := in.GitHubApp
		how = fmt.Sprintf("GitHub App %d installation %s token minted from key %s, sent as %s, scoped to %s", g.AppID, g.Installation(), g.PrivateKeyKey, g.Scheme, g.Scope())
	case in.AWSSigV4 != nil:
		how = in.AWSSigV4.Describe()
	case in.OAuth2 != nil:
		o := in.OAuth2
		how = fmt.Sprintf("OAuth 2.0 token from %s by the %s grant (keys %s), sent as Bearer, asking for %s", o.TokenURL, o.Grant, strings.Join(oauthKeys(o), ", "), o.Scope())
	case in.Google != nil:
		g := in.Google
		how = fmt.Sprintf("Google service account token from %s minted with key %s, sent as Bearer, %s", g.TokenURL, g.KeyKey, g.Scope())
	default:
		how = "no injection"
	}
	return fmt.Sprintf("Secret %s: %s", in.Secret, how)
}

// oauthKeys lists the Secret keys an OAuth 2.0 injection reads.
func oauthKeys(o *config.OAuth2Inject) []string {
	var keys []string
	for _, k := range []string{o.ClientIDKey, o.ClientSecretKey, o.RefreshTokenKey} {
		if k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// rules describes each rule on one line, sorted; no rules is AnyRequest.
func rules(rs []config.Rule) []string {
	if len(rs) == 0 {
		return []string{AnyRequest}
	}
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, DescribeRule(r))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// DescribeRule writes a rule on one line, as diff and explain both show
// it: methods, paths (a comma between them), how an encoded '/' is read
// ("(encodedSlash: segment)"), whether a WebSocket may upgrade
// ("(websocket)"), body conditions
// ("GET,HEAD /repos/a, /repos/b with JSON body action in [opened,closed]";
// "POST /graphql with GraphQL query only"; "POST /mcp with MCP
// tools/list,tools/call, tools get_issue").
func DescribeRule(r config.Rule) string {
	paths := append(slices.Clone(r.PathPrefixes), r.PathPatterns...)
	s := strings.Join(r.Methods, ",") + " " + strings.Join(paths, ", ")
	if r.EncodedSlash != "" {
		s += " (encodedSlash: " + r.EncodedSlash + ")"
	}
	if r.WebSocket {
		s += " (websocket)"
	}
	if r.Inject != nil {
		s += " (injects " + describeCredential(*r.Inject) + ")"
	}
	var conds []string
	for _, k := range slices.Sorted(maps.Keys(r.Body)) {
		conds = append(conds, fmt.Sprintf("%s in [%s]", k, strings.Join(r.Body[k], ",")))
	}
	if len(conds) > 0 {
		s += " with JSON body " + strings.Join(conds, ", ")
	}
	if g := r.GraphQL; g != nil {
		s += " with GraphQL " + strings.Join(g.Operations, ",") + " only"
		if g.PersistedQueries {
			s += ", persisted queries"
		}
		if g.Batches {
			s += ", batches"
		}
	}
	if m := r.MCP; m != nil {
		s += " with MCP " + strings.Join(m.Methods, ",")
		if m.Tools != nil {
			s += ", tools " + strings.Join(m.Tools, ",")
		}
		for _, t := range slices.Sorted(maps.Keys(m.Arguments)) {
			var conds []string
			for _, k := range slices.Sorted(maps.Keys(m.Arguments[t])) {
				conds = append(conds, fmt.Sprintf("%s in [%s]", k, strings.Join(m.Arguments[t][k], ",")))
			}
			s += ", " + t + " arguments " + strings.Join(conds, ", ")
		}
		if m.Resources != nil {
			s += ", resources " + strings.Join(m.Resources, ",")
		}
		if m.Responses {
			s += ", responses"
		}
	}
	return s
}
