package access

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// Ceiling is what no sandbox may ever be allowed, whatever its
// Connections and agents say: a list of limits, each binding the
// sandboxes its selector matches. A platform team keeps it in
// keyhole.yaml; check proves every sandbox's access stays under it, and
// diff tells a widening that stays under it from one that breaks it.
type Ceiling struct {
	Limits []Limit
}

// Limit is one "never": no request to one of Hosts that matches Methods,
// the paths and Body may be allowed (with Credential, may carry a
// credential) for a sandbox Sandboxes selects. Empty Methods is every
// method; no paths is every path; no Body is every body.
type Limit struct {
	// Sandboxes selects the sandboxes the limit binds; the zero value
	// selects every sandbox.
	Sandboxes Selector
	// Hosts are canonical host names ("api.github.com", or "host:port"
	// for another port), at least one.
	Hosts []string
	// Methods, PathPrefixes, PathPatterns and Body say which requests to
	// those hosts, as a rule's fields do (proxy/config.Rule).
	Methods      []string
	PathPrefixes []string
	PathPatterns []string
	Body         map[string][]string
	// EncodedSlash lets PathPrefixes and PathPatterns spell an encoded
	// '/' (%2F) as a rule with encodedSlash: segment does. Whatever it
	// says, the limit covers a request whose path holds %2F when it
	// covers the path as sent or with each %2F read as '/' (its own
	// %2F read so too), so that no rule gets from under it by spelling a
	// '/' encoded.
	EncodedSlash string
	// GraphQL, when set, are the GraphQL operation types the limit
	// forbids ("mutation"): it covers a POST whose body is a GraphQL
	// request with a document that holds one of them, alone or beside
	// others, a batch holding such a request, and a persisted query,
	// whose document the proxy cannot see. A body that is not a GraphQL
	// request is not covered, nor is another method: GraphQL over HTTP
	// sends a document in a body with POST only, and a server must not
	// run a mutation sent with GET. A limit sets Body or GraphQL, not
	// both.
	GraphQL []string
	// MCPTools, when set, are MCP tools the limit forbids: it covers a
	// POST whose body is an MCP message, or a batch of them, that the
	// proxy reads (policy.CheckMCP) and that calls one of them
	// (tools/call). A limit sets one of Body, GraphQL and MCPTools.
	MCPTools []string
	// WebSocket limits only WebSocket handshakes the proxy upgrades (a
	// rule's websocket: true): "no WebSocket on host X". A limit
	// without it covers a handshake as the GET it also is.
	WebSocket bool
	// Credential limits only requests the proxy puts a credential on:
	// "no credential on host X". A passthrough host's tunnel carries
	// none, so it stays under such a limit.
	Credential bool
	// Audit forbids audit mode on the hosts (a Connection's
	// enforcement: audit, config.Host.Audit): "no audit mode on host
	// X", whatever the requests. A limit with it names hosts and
	// sandboxes only. A limit without it already covers what audit mode
	// forwards, as the requests they are.
	Audit bool
}

// Selector picks sandboxes by namespace, name and labels; an empty field
// matches every sandbox.
type Selector struct {
	Namespace string
	// Name is a pattern as path.Match reads it: "support-*".
	Name string
	// Labels must all be on the sandbox's declaring object, with these
	// values.
	Labels map[string]string
}

// Sandbox is what a selector looks at.
type Sandbox struct {
	Namespace, Name string
	Labels          map[string]string
}

// Matches reports whether s selects sb.
func (s Selector) Matches(sb Sandbox) bool {
	if s.Namespace != "" && s.Namespace != sb.Namespace {
		return false
	}
	if s.Name != "" {
		if ok, err := path.Match(s.Name, sb.Name); err != nil || !ok {
			return false
		}
	}
	for k, v := range s.Labels {
		if got, ok := sb.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Validate reports what makes a ceiling unusable: a limit without hosts,
// a host that is not canonical, a method, path or selector name the
// rules' own checks refuse.
func (c Ceiling) Validate() error {
	var errs []string
	for i, l := range c.Limits {
		at := fmt.Sprintf("ceiling[%d]", i)
		if len(l.Hosts) == 0 {
			errs = append(errs, at+": names no host")
		}
		for _, h := range l.Hosts {
			if canon, err := policy.CanonicalHost(h, "443"); err != nil || canon != h {
				errs = append(errs, fmt.Sprintf("%s: host %q is not a canonical host name (lower case, no trailing dot, no :443)", at, policy.Clip(h)))
			}
		}
		for _, m := range l.Methods {
			if m == "" || strings.ToUpper(m) != m || strings.ContainsAny(m, " \t/") {
				errs = append(errs, fmt.Sprintf("%s: %q is not an upper-case HTTP method", at, policy.Clip(m)))
			}
		}
		if l.EncodedSlash != "" && !slices.Contains(config.EncodedSlashModes(), l.EncodedSlash) {
			errs = append(errs, fmt.Sprintf("%s: encodedSlash %q is not a mode; want %s", at, policy.Clip(l.EncodedSlash), strings.Join(config.EncodedSlashModes(), ", ")))
		}
		for _, p := range l.PathPrefixes {
			if err := config.CheckRulePath(p, false, l.EncodedSlash); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", at, err))
			}
		}
		for _, p := range l.PathPatterns {
			if err := config.CheckRulePath(p, true, l.EncodedSlash); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", at, err))
			}
		}
		for f, vs := range l.Body {
			if f == "" || len(vs) == 0 {
				errs = append(errs, at+": a body field with no name or no values")
			}
		}
		if l.GraphQL != nil {
			if len(l.Body) > 0 {
				errs = append(errs, at+": sets both body and graphql; an entry has one body condition, so split it into two")
			}
			if len(l.GraphQL) == 0 {
				errs = append(errs, at+": graphql names no operation type; want some of "+strings.Join(config.GraphQLOperations(), ", "))
			}
			seen := map[string]bool{}
			for _, op := range l.GraphQL {
				if !slices.Contains(config.GraphQLOperations(), op) {
					errs = append(errs, fmt.Sprintf("%s: %q is not a GraphQL operation type; want one of %s", at, policy.Clip(op), strings.Join(config.GraphQLOperations(), ", ")))
				} else if seen[op] {
					errs = append(errs, fmt.Sprintf("%s: graphql lists %s twice", at, op))
				}
				seen[op] = true
			}
		}
		if l.MCPTools != nil {
			if len(l.Body) > 0 || l.GraphQL != nil {
				errs = append(errs, at+": sets mcp beside body or graphql; an entry has one body condition, so split it into two")
			}
			if len(l.MCPTools) == 0 {
				errs = append(errs, at+": mcp names no tool")
			}
			for _, t := range l.MCPTools {
				if t == "" {
					errs = append(errs, at+": mcp names an empty tool")
				}
			}
		}
		if l.Audit && (len(l.Methods) > 0 || len(l.PathPrefixes) > 0 || len(l.PathPatterns) > 0 || len(l.Body) > 0 || l.GraphQL != nil || l.EncodedSlash != "" || l.MCPTools != nil || l.Credential || l.WebSocket) {
			errs = append(errs, at+": audit takes hosts and sandboxes only: it forbids audit mode on its hosts whatever the request, so write the requests audit mode must never forward as an entry of their own")
		}
		if _, err := path.Match(l.Sandboxes.Name, ""); err != nil {
			errs = append(errs, fmt.Sprintf("%s: sandbox name pattern %q: %v", at, policy.Clip(l.Sandboxes.Name), err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", config.ErrInvalid, strings.Join(errs, "; "))
	}
	return nil
}

// rule is the limit's requests as a rule the class walk refines by, for
// one method: the limit's own, or the request's when it names none.
func (l Limit) rule(method string) config.Rule {
	r := config.Rule{Methods: l.Methods, PathPrefixes: l.PathPrefixes, PathPatterns: l.PathPatterns, EncodedSlash: l.EncodedSlash, Body: l.Body}
	if len(r.Methods) == 0 {
		r.Methods = []string{method}
	}
	if len(r.PathPrefixes) == 0 && len(r.PathPatterns) == 0 {
		r.PathPrefixes = []string{"/"}
	}
	if len(l.GraphQL) > 0 {
		// As far as the class walk goes, a GraphQL condition that
		// reads batches: its classes are every set of operation types,
		// a persisted query, and batches of those.
		r.GraphQL = &config.GraphQL{Operations: l.GraphQL, PersistedQueries: true, Batches: true}
	}
	if len(l.MCPTools) > 0 {
		// As far as the class walk goes: a call of each tool.
		r.MCP = &config.MCP{Methods: []string{config.MCPToolsCall}, Tools: l.MCPTools}
	}
	return r
}

// coversMCP reports whether body is an MCP POST body the proxy reads
// that calls one of the limit's tools.
func (l Limit) coversMCP(body []byte) bool {
	if body == nil {
		return false
	}
	called, err := policy.MCPToolsCalled(jsonBody(body))
	return err == nil && slices.ContainsFunc(called, func(t string) bool { return slices.Contains(l.MCPTools, t) })
}

// coversGraphQL reports whether body is a GraphQL request that holds
// one of the limit's operation types, or a persisted query: one the
// proxy reads as a GraphQL request with every type allowed, and not with
// the other types alone.
func (l Limit) coversGraphQL(body []byte) bool {
	if body == nil {
		return false
	}
	b := jsonBody(body)
	anything := config.GraphQL{Operations: config.GraphQLOperations(), PersistedQueries: true, Batches: true}
	if policy.CheckGraphQL(anything, b) != nil {
		return false
	}
	var others []string
	for _, op := range config.GraphQLOperations() {
		if !slices.Contains(l.GraphQL, op) {
			others = append(others, op)
		}
	}
	return len(others) == 0 || policy.CheckGraphQL(config.GraphQL{Operations: others, Batches: true}, b) != nil
}

// Contains reports whether the limit covers a request (to one of its
// hosts) with this method, path (as policy.TargetPath returns it) and
// JSON body (nil for none); whether it carries a credential is the
// caller's to weigh (Credential).
func (l Limit) Contains(method, path string, body []byte) bool {
	r := l.rule(method)
	if len(l.MCPTools) > 0 {
		r.MCP = nil // for the class walk; what the limit covers is coversMCP's
		return method == "POST" && l.matches(r, method, path, body) && l.coversMCP(body)
	}
	if len(l.GraphQL) == 0 {
		return l.matches(r, method, path, body)
	}
	// The rule's GraphQL condition is for the class walk; what the
	// limit covers is coversGraphQL's.
	r.GraphQL = nil
	return method == "POST" && l.matches(r, method, path, body) && l.coversGraphQL(body)
}

// matches reports whether the limit's rule r covers the request read
// either way an upstream may read an encoded '/' in its path: as sent,
// and with each %2F read as '/', r's own %2F read so too (a "*" piece
// then a "*" segment).
func (l Limit) matches(r config.Rule, method, path string, body []byte) bool {
	if policy.MatchRule(r, method, path, jsonBody(body)) {
		return true
	}
	if !config.HasEncodedSlash(path) {
		return false
	}
	dec := func(ps []string) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = decodeSlashes(p)
		}
		return out
	}
	r.PathPrefixes, r.PathPatterns, r.EncodedSlash = dec(r.PathPrefixes), dec(r.PathPatterns), ""
	return policy.MatchRule(r, method, decodeSlashes(path), jsonBody(body))
}

// decodeSlashes reads each encoded '/' of p (%2F, either case) as '/'.
func decodeSlashes(p string) string {
	return strings.NewReplacer("%2F", "/", "%2f", "/").Replace(p)
}

// Violation is one request a sandbox's config allows above the ceiling:
// the smallest such request per limit and host.
type Violation struct {
	// Limit is the index of the limit it breaks, in Ceiling.Limits.
	Limit int
	// Host is the canonical host the request goes to.
	Host string
	// Method, URL and Body are the request (Body is JSON, "" for none).
	Method, URL, Body string
	// Decision is the proxy's verdict on it: tunnel, forward or inject.
	Decision policy.Decision
	// Rule is the index of the host's first rule that allows it, -1 when
	// the host has no rules (every request is allowed) or is passed
	// through.
	Rule int
	// AuditMode is set when the limit forbids audit mode (Limit.Audit)
	// and the host is in it; no request is named then.
	AuditMode bool
}

// Request is the violation's request on one line: METHOD URL [body].
func (v Violation) Request() string {
	if v.Body == "" {
		return v.Method + " " + v.URL
	}
	return v.Method + " " + v.URL + " " + v.Body
}

// Check proves that cfg, the proxy config of sandbox sb, allows nothing
// above the ceiling, and returns the violations when it does not: per
// limit that selects sb and per host of the limit, the smallest request
// the proxy's decision function allows that the limit covers, with the
// rule that allows it. undecided names the hosts whose rules exceed the
// class bounds, for which no proof was possible.
//
// It is exact in the way keyhole diff is (docs/diff.md): the limit is a
// rule as far as the class walk goes, so the classes of the host's rules
// and the limit's together hold requests that the proxy decides alike
// and the limit covers alike, and one request of each decides them all.
func (c Ceiling) Check(sb Sandbox, cfg *config.Config) (violations []Violation, undecided []string, err error) {
	p, err := policy.NewPolicy(cfg)
	if err != nil {
		return nil, nil, err
	}
	hosts := map[string]*config.Host{}
	for i := range cfg.Hosts {
		hosts[cfg.Hosts[i].Name] = &cfg.Hosts[i]
	}
	for li, l := range c.Limits {
		if !l.Sandboxes.Matches(sb) {
			continue
		}
		for _, host := range l.Hosts {
			v, why, found := c.checkHost(p, hosts[host], host, li, l)
			if why != "" {
				undecided = append(undecided, fmt.Sprintf("host %s: %s", host, why))
			}
			if found {
				violations = append(violations, v)
			}
		}
	}
	return violations, undecided, nil
}

// checkHost finds the smallest request to host that l covers and p
// allows.
func (c Ceiling) checkHost(p *policy.Policy, h *config.Host, host string, li int, l Limit) (Violation, string, bool) {
	if l.Audit {
		if h == nil || !h.Audit {
			return Violation{}, "", false
		}
		return Violation{Limit: li, Host: host, URL: "https://" + host + "/", Rule: -1, AuditMode: true,
			Decision: policy.Decision{Action: policy.ActionAudit, Host: host, Connection: h.Connection}}, "", true
	}
	var rules []config.Rule
	if h != nil {
		rules = slices.Clone(h.Rules)
	}
	// The limit refines the classes as a rule would; a limit without
	// methods covers every method, which the classes' fresh method and
	// the rules' own stand for.
	lr := l.rule("GET")
	if len(l.Methods) == 0 {
		lr.Methods = nil
		if len(l.GraphQL) > 0 || len(l.MCPTools) > 0 {
			// Only a POST carries a GraphQL document or an MCP call
			// the limit covers.
			lr.Methods = []string{"POST"}
		}
	}
	reqs, why := Classes(append(rules, lr))
	if why != "" {
		return Violation{}, why, false
	}
	// A plain http:// request is decided by the host alone: forwarded to
	// a passthrough host without a credential, refused elsewhere.
	plain := []Request{{Method: "GET", Path: "/"}}
	if len(l.Methods) > 0 {
		plain[0].Method = l.Methods[0]
	}
	if len(l.PathPrefixes) > 0 {
		plain[0].Path = l.PathPrefixes[0]
	} else if len(l.PathPatterns) > 0 {
		plain[0].Path = concrete(l.PathPatterns[0])
	}
	if len(l.GraphQL) > 0 {
		plain[0].Method, plain[0].Body = "POST", []byte(`{"query":"`+l.GraphQL[0]+`{__typename}"}`)
	}
	if len(l.MCPTools) > 0 {
		name, _ := json.Marshal(l.MCPTools[0])
		plain[0].Method, plain[0].Body = "POST", []byte(`{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{},"name":`+string(name)+`}}`)
	}
	var best *Violation
	var bestReq Request
	for _, try := range []struct {
		scheme string
		reqs   []Request
	}{{"https", reqs}, {"http", plain}} {
		for _, r := range try.reqs {
			if !l.Contains(r.Method, r.Path, r.Body) || l.WebSocket && !r.WebSocket {
				continue
			}
			url := r.Scheme(try.scheme) + "://" + host + r.Path
			d := p.DecideURL(r.Method, url, r.Body)
			if !d.Allowed() || l.Credential && d.Action != policy.ActionInject || l.WebSocket && !d.WebSocket {
				continue
			}
			if best != nil && (try.scheme == "http" || r.Compare(bestReq) >= 0) {
				continue
			}
			v := Violation{Limit: li, Host: host, Method: r.Method, URL: url, Body: string(r.Body), Decision: d, Rule: -1}
			if h != nil && d.Action == policy.ActionInject {
				for i, rule := range h.Rules {
					if policy.RuleAllows(rule, r.Method, r.Path, jsonBody(r.Body)) && (!d.WebSocket || rule.WebSocket) {
						v.Rule = i
						break
					}
				}
			}
			best, bestReq = &v, r
		}
	}
	if best == nil {
		return Violation{}, "", false
	}
	return *best, "", true
}

func jsonBody(b []byte) policy.Body {
	out := policy.Body{Data: b, Complete: true}
	if b != nil {
		out.ContentType = []string{"application/json"}
	}
	return out
}

// concrete turns a path pattern into one path it matches: "*" and a
// final "**" become "x".
func concrete(pattern string) string {
	return strings.NewReplacer("**", "x", "*", "x").Replace(pattern)
}

// Describe writes the limit on one line, as check and diff show it.
func (l Limit) Describe() string {
	if l.Audit {
		return "no audit mode on " + strings.Join(l.Hosts, ", ")
	}
	var b strings.Builder
	if l.Credential {
		b.WriteString("no credential on ")
	} else {
		b.WriteString("nothing on ")
	}
	b.WriteString(strings.Join(l.Hosts, ", "))
	if len(l.Methods) > 0 {
		b.WriteString(" for " + strings.Join(l.Methods, ","))
	}
	if paths := slices.Concat(l.PathPrefixes, l.PathPatterns); len(paths) > 0 {
		b.WriteString(" under " + strings.Join(paths, ", "))
	}
	if l.EncodedSlash != "" {
		b.WriteString(" (encodedSlash: " + l.EncodedSlash + ")")
	}
	if l.WebSocket {
		b.WriteString(" upgraded to a WebSocket")
	}
	if len(l.Body) > 0 {
		var conds []string
		for _, k := range slices.Sorted(maps.Keys(l.Body)) {
			conds = append(conds, fmt.Sprintf("%s in [%s]", k, strings.Join(l.Body[k], ",")))
		}
		b.WriteString(" with JSON body " + strings.Join(conds, ", "))
	}
	if len(l.GraphQL) > 0 {
		b.WriteString(" with a GraphQL " + strings.Join(l.GraphQL, " or ") + " (or a persisted query)")
	}
	if len(l.MCPTools) > 0 {
		b.WriteString(" calling the MCP tool " + strings.Join(l.MCPTools, " or "))
	}
	if s := l.Sandboxes; s.Namespace != "" || s.Name != "" || len(s.Labels) > 0 {
		var sel []string
		if s.Namespace != "" {
			sel = append(sel, "namespace "+s.Namespace)
		}
		if s.Name != "" {
			sel = append(sel, "name "+s.Name)
		}
		for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
			sel = append(sel, "label "+k+"="+s.Labels[k])
		}
		b.WriteString(" (sandboxes: " + strings.Join(sel, ", ") + ")")
	}
	return b.String()
}
