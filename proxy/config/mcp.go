package config

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// MCP is a rule's Model Context Protocol condition: a POST to an MCP
// server's streamable HTTP endpoint carries one JSON-RPC 2.0 message, or
// a batch of them, and each must be a request or notification whose
// method Methods lists, a tools/call of a tool Tools lists whose
// arguments satisfy Arguments, a resources/read of a URI under one of
// Resources, or, with Responses, the client's answer to a request of the
// server's. Answers to tools/list are filtered to the listed tools.
type MCP struct {
	// Methods are the JSON-RPC methods allowed, spelled as MCP spells
	// them: "initialize", "notifications/initialized", "tools/call".
	Methods []string `json:"methods"`
	// Tools, when set, are the tools a tools/call may name; absent,
	// every tool. tools/list answers list only these.
	Tools []string `json:"tools,omitempty"`
	// Arguments holds, per tool, a body condition on its arguments
	// object, in Body's terms: the named top-level fields each hold one
	// of the listed strings.
	Arguments map[string]map[string][]string `json:"arguments,omitempty"`
	// Resources, when set, are the URI prefixes a resources/read may
	// name; absent, every URI.
	Resources []string `json:"resources,omitempty"`
	// Responses allows the client's JSON-RPC responses (to the server's
	// sampling, elicitation or roots requests).
	Responses bool `json:"responses,omitempty"`
}

// The MCP methods the rules' conditions name most.
const (
	MCPInitialize    = "initialize"
	MCPInitialized   = "notifications/initialized"
	MCPToolsList     = "tools/list"
	MCPToolsCall     = "tools/call"
	MCPResourcesRead = "resources/read"
)

// MCPMethods lists the JSON-RPC methods a client sends an MCP server
// (the protocol's revisions 2025-03-26 to 2025-11-25, and the draft's
// server/discover and subscriptions/listen): the requests, then the
// notifications.
func MCPMethods() []string {
	return []string{
		MCPInitialize, "server/discover", "ping", "subscriptions/listen",
		MCPToolsList, MCPToolsCall,
		"resources/list", "resources/templates/list", MCPResourcesRead, "resources/subscribe", "resources/unsubscribe",
		"prompts/list", "prompts/get",
		"completion/complete", "logging/setLevel",
		"tasks/get", "tasks/result", "tasks/list", "tasks/cancel",
		MCPInitialized, "notifications/cancelled", "notifications/progress", "notifications/roots/list_changed",
	}
}

// mcp validates r.MCP.
func (v *validator) mcp(at string, r Rule) {
	m := r.MCP
	at += ".mcp"
	if len(r.Body) > 0 || r.GraphQL != nil {
		v.addf(at, "goes with a body or graphql condition; a rule has one body condition")
	}
	if !slices.Contains(r.Methods, http.MethodPost) {
		v.addf(at, "needs POST among the rule's methods: MCP requests are POSTs")
	}
	if len(m.Methods) == 0 {
		v.addf(at+".methods", "is empty; list the JSON-RPC methods the rule allows, e.g. initialize, tools/list, tools/call")
	}
	for i, meth := range m.Methods {
		if !slices.Contains(MCPMethods(), meth) {
			v.addf(fmt.Sprintf("%s.methods[%d]", at, i), "%q is not an MCP method; want one of %s", meth, strings.Join(MCPMethods(), ", "))
		}
	}
	for i, t := range m.Tools {
		if err := checkMCPName(t); err != nil {
			v.addf(fmt.Sprintf("%s.tools[%d]", at, i), "%v", err)
		}
	}
	for i, p := range m.Resources {
		if err := checkMCPName(p); err != nil {
			v.addf(fmt.Sprintf("%s.resources[%d]", at, i), "%v", err)
		}
	}
	for _, tool := range slices.Sorted(maps.Keys(m.Arguments)) {
		if m.Tools != nil && !slices.Contains(m.Tools, tool) {
			v.addf(at+".arguments", "names the tool %q, which tools does not list", tool)
		}
		for _, field := range slices.Sorted(maps.Keys(m.Arguments[tool])) {
			if field == "" {
				v.addf(at+".arguments."+tool, "has an empty field name")
			}
			if len(m.Arguments[tool][field]) == 0 {
				v.addf(at+".arguments."+tool+"."+field, "lists no values, so it matches nothing")
			}
		}
	}
}

// checkMCPName refuses an empty tool name or resource prefix, or one
// holding a control character: no MCP client sends one.
func checkMCPName(s string) error {
	if s == "" {
		return fmt.Errorf("is empty")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f {
			return fmt.Errorf("%q holds a control character", s)
		}
	}
	return nil
}
