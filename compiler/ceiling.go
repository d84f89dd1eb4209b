package compiler

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/access"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// CodeAccessAboveCeiling is the code of a sandbox's access above the
// ceiling: diff weighs a widening against the ceiling itself, so it
// compares a head that has only these errors.
const CodeAccessAboveCeiling = codeAccessAboveCeiling

const (
	codeAccessAboveCeiling = "AccessAboveCeiling"
)

// ceilingWire is one limit of keyhole.yaml's ceiling.
type ceilingWire struct {
	Sandboxes struct {
		Namespace string            `yaml:"namespace"`
		Name      string            `yaml:"name"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"sandboxes"`
	Hosts        []string            `yaml:"hosts"`
	Methods      []string            `yaml:"methods"`
	PathPrefixes []string            `yaml:"pathPrefixes"`
	PathPatterns []string            `yaml:"pathPatterns"`
	EncodedSlash string              `yaml:"encodedSlash"`
	Body         map[string][]string `yaml:"body"`
	GraphQL      *struct {
		Operations []string `yaml:"operations"`
	} `yaml:"graphql"`
	MCP *struct {
		Tools []string `yaml:"tools"`
	} `yaml:"mcp"`
	Credential bool `yaml:"credential"`
	WebSocket  bool `yaml:"websocket"`
	Audit      bool `yaml:"audit"`
}

// origin is where a host of a sandbox's proxy config comes from, for a
// diagnostic about what it allows: a Connection's inject entry (whose
// rules are at .rules[r]) or hosts entry, an agent's connector or
// allowed domain.
type origin struct {
	it    *item
	at    path
	rules bool
	// connector names the catalog connector whose read-only rules the
	// host has, for an agent's; catalogRule gives, for each of the host's
	// rules, its index in the connector's readOnly list.
	connector   string
	catalogRule []int
}

func sandboxKey(s *Sandbox) string { return s.Source.String() + "\x00" + s.Name }

// origin records where host of sandbox s comes from, when a ceiling will
// need it.
func (p *pass) origin(s *Sandbox, host string, o origin) {
	if len(p.config.ceiling.Limits) == 0 {
		return
	}
	if p.origins == nil {
		p.origins = map[string]map[string]origin{}
	}
	k := sandboxKey(s)
	if p.origins[k] == nil {
		p.origins[k] = map[string]origin{}
	}
	if _, ok := p.origins[k][host]; !ok {
		p.origins[k][host] = o
	}
}

// readCeiling reads keyhole.yaml's ceiling into p.config.ceiling,
// reporting what the proxy's own checks would refuse in it.
func (p *pass) readCeiling(it *item, nodes []yaml.Node) {
	known := []string{"sandboxes", "hosts", "methods", "pathPrefixes", "pathPatterns", "encodedSlash", "body", "graphql", "mcp", "credential", "websocket", "audit"}
	for i := range nodes {
		n := &nodes[i]
		if n.Kind != yaml.MappingNode {
			p.report(codeConfigInvalid, it, path{"ceiling", i}, false, "ceiling entry %d is not a mapping of hosts, methods, paths, body and sandboxes", i)
			continue
		}
		bad := false
		for k := 0; k+1 < len(n.Content); k += 2 {
			if key := n.Content[k].Value; !slices.Contains(known, key) {
				p.report(codeConfigInvalid, it, path{"ceiling", i, key}, true, "unknown field %q in ceiling entry %d%s", clip(key), i, didYouMean(key, known))
				bad = true
			} else if g := n.Content[k+1]; key == "graphql" && g.Kind == yaml.MappingNode {
				// A ceiling's graphql names the operation types it
				// forbids; a rule's persistedQueries and batches have no
				// meaning here, since the entry covers both.
				for j := 0; j+1 < len(g.Content); j += 2 {
					if gk := g.Content[j].Value; gk != "operations" {
						p.report(codeConfigInvalid, it, path{"ceiling", i, "graphql", gk}, true, "unknown field %q in the graphql of ceiling entry %d: it takes operations, the types it forbids, and always covers persisted queries and batches", clip(gk), i)
						bad = true
					}
				}
			}
		}
		var w ceilingWire
		if err := n.Decode(&w); err != nil {
			p.report(codeConfigInvalid, it, path{"ceiling", i}, false, "cannot read ceiling entry %d: %s", i, strings.TrimPrefix(err.Error(), "yaml: "))
			continue
		}
		l := access.Limit{
			Sandboxes: access.Selector{Namespace: w.Sandboxes.Namespace, Name: w.Sandboxes.Name, Labels: w.Sandboxes.Labels},
			Hosts:     w.Hosts, Methods: w.Methods, PathPrefixes: w.PathPrefixes, PathPatterns: w.PathPatterns,
			EncodedSlash: w.EncodedSlash, Body: w.Body, Credential: w.Credential, WebSocket: w.WebSocket, Audit: w.Audit,
		}
		if w.GraphQL != nil {
			l.GraphQL = w.GraphQL.Operations
			if l.GraphQL == nil {
				l.GraphQL = []string{}
			}
		}
		if w.MCP != nil {
			l.MCPTools = w.MCP.Tools
			if l.MCPTools == nil {
				l.MCPTools = []string{}
			}
		}
		if err := (access.Ceiling{Limits: []access.Limit{l}}).Validate(); err != nil {
			msg := strings.TrimPrefix(err.Error(), config.ErrInvalid.Error()+": ")
			msg = strings.ReplaceAll(msg, "ceiling[0]", fmt.Sprintf("ceiling entry %d", i))
			p.report(codeConfigInvalid, it, path{"ceiling", i}, false, "%s", msg)
			bad = true
		}
		if bad {
			// A ceiling entry keyhole cannot read would bound nothing;
			// the error stands in its place.
			continue
		}
		p.config.ceiling.Limits = append(p.config.ceiling.Limits, l)
		p.config.ceilingAt = append(p.config.ceilingAt, i)
	}
}

// checkCeiling proves every sandbox of the plan stays under the ceiling,
// and reports each limit a sandbox's access exceeds at the rule (or
// entry) that allows it, with the smallest request it allows above it.
func (p *pass) checkCeiling() {
	c := p.config.ceiling
	if len(c.Limits) == 0 {
		return
	}
	p.plan.Ceiling = c
	cfgItem := p.config.found
	for i := range p.plan.Sandboxes {
		s := &p.plan.Sandboxes[i]
		s.Labels = p.sandboxLabels(s)
		sb := access.Sandbox{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels}
		vs, undecided, err := c.Check(sb, &s.Proxy)
		origins := p.origins[sandboxKey(s)]
		where := s.Namespace + "/" + s.Name
		if err != nil {
			// Render refuses such a plan with its own diagnostics; the
			// ceiling is not proven either. An error already reported
			// (a Connection's template that does not parse) is what
			// keeps it from compiling: said once, at the object, not
			// again per sandbox at the ceiling.
			if p.hasErrors() {
				continue
			}
			p.reportAt(cfgItem, path{"ceiling"}, "sandbox %s cannot be proven under the ceiling: its proxy config does not compile: %v", where, err)
			continue
		}
		for _, why := range undecided {
			p.reportAt(cfgItem, path{"ceiling"}, "sandbox %s cannot be proven under the ceiling: %s", where, why)
		}
		for _, v := range vs {
			l := c.Limits[v.Limit]
			entry := fmt.Sprintf("ceiling entry %d (%s)", p.config.ceilingAt[v.Limit], l.Describe())
			if cfgItem != nil {
				entry = fmt.Sprintf("ceiling entry %d at %s:%d (%s)", p.config.ceilingAt[v.Limit], cfgItem.doc.File, p.ceilingLine(v.Limit), l.Describe())
			}
			if v.AuditMode {
				it, at := cfgItem, path{"ceiling", p.config.ceilingAt[v.Limit]}
				if o, ok := origins[v.Host]; ok && o.rules {
					it, at = o.it, path{"spec", "enforcement"}
				}
				p.reportAt(it, at, "sandbox %s: connection %s puts %s in audit mode (spec.enforcement: audit), which %s refuses: audit mode is not allowed there; set enforcement: enforce, or change the ceiling where its owners agree",
					where, v.Decision.Connection, v.Host, entry)
				continue
			}
			how := "allowed"
			switch {
			case v.Decision.Action == policy.ActionAudit:
				how = "forwarded without the credential, since connection " + v.Decision.Connection + " is in audit mode (spec.enforcement: audit)"
			case v.Decision.Connection != "":
				how = "allowed with the credential of connection " + v.Decision.Connection
			case v.Decision.Action == "tunnel" || v.Decision.Action == "forward":
				how = "passed through untouched (keyhole cannot see a passthrough host's requests, so a ceiling on it bounds the host whole)"
			}
			o, ok := origins[v.Host]
			at := path(nil)
			var it *item
			if ok {
				it, at = o.it, o.at
			}
			rule := ""
			switch {
			case v.Rule >= 0 && ok && o.rules:
				at = at.with("rules", v.Rule)
				rule = fmt.Sprintf(" by rule %d", v.Rule)
			case v.Rule >= 0 && v.Rule < len(o.catalogRule) && o.connector != "":
				rule = fmt.Sprintf(" by connector %s's read-only rule %d", o.connector, o.catalogRule[v.Rule])
			case v.Rule < 0 && v.Decision.Action == "inject":
				rule = " (the entry has no rules, so every request carries the credential)"
			}
			if ok && o.rules && v.Decision.Action == policy.ActionAudit {
				at = path{"spec", "enforcement"} // what forwards it is the audit mode
			}
			if it == nil {
				it, at = cfgItem, path{"ceiling", p.config.ceilingAt[v.Limit]}
			}
			p.reportAt(it, at, "sandbox %s: %s would be %s%s, above %s; narrow what allows it, or change the ceiling where its owners agree",
				where, v.Request(), how, rule, entry)
		}
	}
}

// reportAt reports AccessAboveCeiling at a path of it, or without a
// position when there is no item (a ceiling given by no file).
func (p *pass) reportAt(it *item, at path, format string, args ...any) {
	if it == nil {
		p.diags = append(p.diags, diag.Diagnostic{Code: codeAccessAboveCeiling, Severity: diag.Error, Message: fmt.Sprintf(format, args...)})
		return
	}
	p.report(codeAccessAboveCeiling, it, at, false, format, args...)
}

// ceilingLine is the line of the ceiling entry that holds limit l.
func (p *pass) ceilingLine(l int) int {
	it := p.config.found
	root, _ := it.tree()
	if root == nil {
		return it.doc.Pos.Line
	}
	pos, _ := it.doc.Where(path{"ceiling", p.config.ceilingAt[l]}.find(root, false))
	return pos.Line
}

// sandboxLabels reads the labels of the object that declares the
// sandbox, for a ceiling's label selector; agent.yaml has none.
func (p *pass) sandboxLabels(s *Sandbox) map[string]string {
	for _, o := range p.owners {
		if o.obj() != s.Source {
			continue
		}
		root, _ := o.tree()
		if root == nil {
			return nil
		}
		meta, _ := child(root, "metadata")
		if meta == nil {
			return nil
		}
		n, _ := child(meta, "labels")
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var labels map[string]string
		if n.Decode(&labels) != nil {
			return nil
		}
		return labels
	}
	return nil
}

// hasErrors reports whether the pass has found an error: a plan that
// does not compile then has its cause reported.
func (p *pass) hasErrors() bool {
	return slices.ContainsFunc(p.diags, func(d diag.Diagnostic) bool { return d.Severity == diag.Error && d.Suppressed == "" })
}
