package cli

import (
	"cmp"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// ruleSource is one rule of a Connection's inject entry as its file
// writes it, and where.
type ruleSource struct {
	rule config.Rule
	pos  diag.Pos
}

// ruleWire is a Connection rule's fields as its YAML names them.
type ruleWire struct {
	Methods      []string `yaml:"methods"`
	PathPrefixes []string `yaml:"pathPrefixes"`
	PathPatterns []string `yaml:"pathPatterns"`
	EncodedSlash string   `yaml:"encodedSlash"`
}

// printRuleSource says, after a decision on an injected host, where the
// rule that decided is written: the rule that allowed the request with
// its file:line:col, or for a request no rule allows the Connection to
// edit and the rule nearest to the request. It prints nothing for a
// decision no rule makes (a host not allowed, plain http://).
func printRuleSource(w io.Writer, units []compiler.Unit, s compiler.Sandbox, d policy.Decision, request string, body []byte) {
	if d.Action != policy.ActionInject && d.Reason != policy.ReasonL7NotAllowed {
		return
	}
	i := slices.IndexFunc(s.Proxy.Hosts, func(h config.Host) bool { return h.Name == d.Host })
	if i < 0 {
		return
	}
	h := s.Proxy.Hosts[i]
	method, path, ok := requestPath(request)
	if !ok {
		return
	}
	conn, written, found := connectionRules(units, s.Namespace, h.Connection, h.Name)
	// Only the rules the proxy holds are the Connection's say: an
	// agent.yaml connector that is read-only holds the catalog's.
	var rules []ruleSource
	for _, r := range written {
		if slices.ContainsFunc(h.Rules, func(c config.Rule) bool { return sameRule(c, r.rule) }) {
			rules = append(rules, r)
		}
	}
	own := found && (len(rules) > 0 || len(h.Rules) == 0)
	connName := h.Connection
	if found {
		connName = fmt.Sprintf("%s (%s)", objectRef(s.Namespace, conn.Source.Name), posLine(conn.Pos))
	}
	b := policy.Body{Data: body, Complete: true, ContentType: []string{"application/json"}}
	if d.Action == policy.ActionInject {
		if len(h.Rules) == 0 {
			fmt.Fprintf(w, "rule: none on %s, so every method and path is forwarded: Connection %s\n", h.Name, connName)
			return
		}
		for _, r := range rules {
			if policy.RuleAllows(r.rule, method, path, b) {
				fmt.Fprintf(w, "rule: %s, at %s (Connection %s)\n", rule(r.rule), r.pos, objectRef(s.Namespace, conn.Source.Name))
				return
			}
		}
		for _, r := range h.Rules {
			if policy.RuleAllows(r, method, path, b) {
				fmt.Fprintf(w, "rule: %s, of the connector catalog's read-only rules, not of Connection %s (an agent.yaml connector without read_only: false)\n", rule(r), connName)
				return
			}
		}
		return
	}
	if !own {
		fmt.Fprintf(w, "to allow it: the rules on %s are the connector catalog's read-only rules, not those of Connection %s; read_only: false on the agent.yaml connector lets the Connection's rules decide\n", h.Name, connName)
		return
	}
	fmt.Fprintf(w, "to allow it, edit Connection %s", connName)
	if near, ok := nearestRule(rules, method, path); ok {
		fmt.Fprintf(w, "; the nearest rule: %s, at %s", rule(near.rule), near.pos)
	}
	fmt.Fprintln(w)
}

// sameRule reports whether a and b match the same requests by the same
// fields.
func sameRule(a, b config.Rule) bool {
	return slices.Equal(a.Methods, b.Methods) && slices.Equal(a.PathPrefixes, b.PathPrefixes) &&
		slices.Equal(a.PathPatterns, b.PathPatterns) && a.EncodedSlash == b.EncodedSlash &&
		len(a.Body) == 0 && a.GraphQL == nil && reflect.DeepEqual(a.MCP, b.MCP)
}

// posLine writes a position as file:line.
func posLine(p diag.Pos) string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// requestPath returns an explain request's method and path as sent.
func requestPath(request string) (method, path string, ok bool) {
	method, raw, ok := strings.Cut(strings.TrimSpace(request), " ")
	if !ok {
		return "", "", false
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", "", false
	}
	path = u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return method, path, true
}

// connectionRules finds the Connection name of namespace in units and
// the rules of its inject entry for host, each with where it is written.
func connectionRules(units []compiler.Unit, namespace, name, host string) (compiler.Object, []ruleSource, bool) {
	for _, u := range units {
		for _, o := range u.Plan.Objects {
			// A Connection that names no namespace (a Helm template's,
			// as most charts write them) is in the one its deploy unit's
			// engine applies it in (an Argo CD Application's
			// destination), as the sandbox is.
			if o.Source.Kind != "Connection" || o.Source.Name != name || cmp.Or(o.Source.Namespace, u.Namespace) != namespace {
				continue
			}
			tree, err := o.Tree()
			if err != nil || tree == nil {
				return o, nil, true
			}
			return o, entryRules(tree, host, o.Pos.File), true
		}
	}
	return compiler.Object{}, nil, false
}

// entryRules reads the rules of the inject entries of conn that cover
// host: one, or several that split the host's credential forms.
func entryRules(conn *yaml.Node, host, file string) []ruleSource {
	inject := yamlValue(yamlValue(yamlValue(conn, "spec"), "placement"), "inject")
	if inject == nil || inject.Kind != yaml.SequenceNode {
		return nil
	}
	var out []ruleSource
	for _, e := range inject.Content {
		hosts := yamlValue(e, "hosts")
		if hosts == nil || !slices.ContainsFunc(hosts.Content, func(n *yaml.Node) bool { return strings.EqualFold(n.Value, host) }) {
			continue
		}
		rules := yamlValue(e, "rules")
		if rules == nil || rules.Kind != yaml.SequenceNode {
			continue
		}
		for _, r := range rules.Content {
			var wire ruleWire
			if r.Decode(&wire) != nil {
				continue
			}
			out = append(out, ruleSource{
				rule: config.Rule{Methods: wire.Methods, PathPrefixes: wire.PathPrefixes, PathPatterns: wire.PathPatterns, EncodedSlash: wire.EncodedSlash},
				pos:  diag.Pos{File: file, Line: r.Line, Column: r.Column},
			})
		}
	}
	return out
}

// objectRef names an object NAMESPACE/NAME, or NAME when it is in no
// namespace the input names (render places it in --namespace's).
func objectRef(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// yamlValue is the value of key in mapping m, nil when there is none.
func yamlValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// nearestRule is the rule closest to allowing method and path: the one
// whose paths share the most leading segments with path, one that has
// the method before one that does not.
func nearestRule(rules []ruleSource, method, path string) (ruleSource, bool) {
	best, bestScore := -1, -1
	for i, r := range rules {
		score := 0
		for _, p := range append(slices.Clone(r.rule.PathPrefixes), r.rule.PathPatterns...) {
			score = max(score, sharedSegments(p, path))
		}
		score *= 2
		if slices.Contains(r.rule.Methods, method) {
			score++
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		return ruleSource{}, false
	}
	return rules[best], true
}

// sharedSegments counts the leading segments a rule's path (a prefix or
// a pattern, whose "*" matches any one segment) shares with path.
func sharedSegments(rulePath, path string) int {
	a := strings.Split(strings.Trim(rulePath, "/"), "/")
	b := strings.Split(strings.Trim(path, "/"), "/")
	n := 0
	for n < len(a) && n < len(b) && a[n] != "" && (a[n] == b[n] || a[n] == "*" || a[n] == "**") {
		n++
	}
	return n
}
