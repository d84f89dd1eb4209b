package compiler

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
)

// codeMCPInvalid is the check of a rule's mcp condition: what the
// schema cannot say and the proxy would refuse or never match.
const codeMCPInvalid = "ConnectionMCPInvalid"

// mcpProblem is one finding in an mcp condition, at a path below the
// rule.
type mcpProblem struct {
	at  path
	msg string
}

// mcpProblems lists what is wrong with the mcp condition m of a rule
// allowing methods: a JSON-RPC method MCP does not have (with the
// nearest it has), one listed twice, a rule that allows no POST (MCP
// requests are POSTs, so the condition matches nothing and the proxy
// refuses the config), websocket beside it, arguments for a tool tools
// does not list.
func mcpProblems(methods []string, webSocket bool, m *schema.MCP) []mcpProblem {
	var out []mcpProblem
	add := func(at path, format string, args ...any) {
		out = append(out, mcpProblem{at: at, msg: fmt.Sprintf(format, args...)})
	}
	if !slices.Contains(methods, http.MethodPost) {
		add(path{"mcp"}, "has an mcp condition but does not allow POST: MCP requests are POSTs, so it matches none and the proxy refuses the config; add POST to its methods")
	}
	if webSocket {
		add(path{"websocket"}, "sets websocket: true beside an mcp condition, which the proxy refuses: a WebSocket handshake has no body to hold to it")
	}
	seen := map[string]bool{}
	for i, meth := range m.Methods {
		switch {
		case !slices.Contains(config.MCPMethods(), meth):
			hint := didYouMean(meth, config.MCPMethods())
			if hint == "" {
				hint = "; want one of " + strings.Join(config.MCPMethods(), ", ")
			}
			add(path{"mcp", "methods", i}, "names the JSON-RPC method %q, which is not one an MCP client sends, so the proxy refuses the config%s", clip(meth), hint)
		case seen[meth]:
			add(path{"mcp", "methods", i}, "lists the MCP method %s twice; remove the repeat", meth)
		}
		seen[meth] = true
	}
	if len(m.Tools) > 0 && !slices.Contains(m.Methods, config.MCPToolsCall) {
		add(path{"mcp", "tools"}, "lists tools but the condition does not allow tools/call, so none of them can be called; add tools/call to its methods")
	}
	for _, tool := range slices.Sorted(maps.Keys(m.Arguments)) {
		if m.Tools != nil && !slices.Contains(m.Tools, tool) {
			add(path{"mcp", "arguments", tool}, "holds arguments for the tool %q, which tools does not list, so the proxy refuses the config%s", clip(tool), didYouMean(tool, m.Tools))
		}
	}
	return out
}

// checkMCPRules runs mcpProblems on every Connection rule with an mcp
// condition.
func checkMCPRules(p *pass) {
	for _, c := range p.connList {
		for i, in := range c.w.Spec.Placement.Inject {
			for r, rule := range in.Rules {
				if rule.MCP == nil {
					continue
				}
				at := path{"spec", "placement", "inject", i, "rules", r}
				for _, pr := range mcpProblems(rule.Methods, rule.WebSocket, rule.MCP) {
					p.report(codeMCPInvalid, &c.item, slices.Concat(at, pr.at), false, "rule %d %s", r, pr.msg)
				}
			}
		}
	}
}
