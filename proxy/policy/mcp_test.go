package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// readTools is the condition of an MCP server's read tools: the session
// methods, the tools list, and two tools, one of them held to one owner.
var readTools = config.MCP{
	Methods:   []string{"initialize", "notifications/initialized", "ping", "tools/list", "tools/call", "resources/read"},
	Tools:     []string{"get_issue", "list_issues"},
	Arguments: map[string]map[string][]string{"get_issue": {"owner": {"acme"}}},
	Resources: []string{"repo://acme/"},
}

// mcpCall is a tools/call request of tool with arguments args (JSON).
func mcpCall(id, tool, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

func TestCheckMCP(t *testing.T) {
	get := mcpCall("1", "get_issue", `{"owner":"acme","repo":"widgets","issue_number":7}`)
	del := mcpCall("2", "delete_repo", `{"owner":"acme"}`)
	huge := mcpCall("3", "list_issues", `{"q":"`+strings.Repeat("a", MaxBodyCheck)+`"}`)
	tests := map[string]struct {
		cond config.MCP
		body string
		// contentType, when set, replaces application/json.
		contentType string
		ok          bool
		why         string
	}{
		"initialize":           {body: `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, ok: true},
		"initialized":          {body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, ok: true},
		"tools/list":           {body: `{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{"cursor":"x"}}`, ok: true},
		"allowed call":         {body: get, ok: true},
		"call, _meta and task": {body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_issues","_meta":{"progressToken":1},"task":{}}}`, ok: true},
		"escaped method":       {body: `{"jsonrpc":"2.0","id":1,"method":"tools/\u0063all","params":{"name":"list_issues"}}`, ok: true},
		"refused tool":         {body: del, why: `the tool "delete_repo" is not one the rule allows`},
		"argument refused":     {body: mcpCall("1", "get_issue", `{"owner":"evil"}`), why: `holds a value the rule does not allow (in the arguments of the tool "get_issue")`},
		"argument missing":     {body: mcpCall("1", "get_issue", `{}`), why: `has no field "owner"`},
		"arguments absent":     {body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_issue"}}`, why: "called without arguments"},
		"argument folded copy": {body: mcpCall("1", "get_issue", `{"owner":"acme","OWNER":"evil"}`), why: "which some JSON readers take as one"},
		"arguments not object": {body: mcpCall("1", "list_issues", `[1]`), why: "arguments is not an object"},
		"method not allowed":   {body: `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`, why: `the MCP method "prompts/get" is not one the rule allows`},
		"method upper case":    {body: `{"jsonrpc":"2.0","id":1,"method":"TOOLS/CALL","params":{"name":"delete_repo"}}`, why: "is not one the rule allows"},
		"method fullwidth":     {body: `{"jsonrpc":"2.0","id":1,"method":"tools／call","params":{"name":"delete_repo"}}`, why: "is not one the rule allows"},
		"method with NUL":      {body: `{"jsonrpc":"2.0","id":1,"method":"tools/list\u0000","params":{}}`, why: "is not one the rule allows"},
		"Method field":         {body: `{"jsonrpc":"2.0","id":1,"Method":"tools/list"}`, why: `send it exactly as "method"`},
		"two methods":          {body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"delete_repo"}}`, why: "gives the field \"method\" twice"},
		"method, folded copy":  {body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","METHOD":"tools/call"}`, why: "which some JSON readers take as one"},
		"method long s":        {body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","\u017fmethod":"x"}`, why: "not printable ASCII"},
		"two tool names":       {body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_issues","name":"delete_repo"}}`, why: "twice"},
		"Name in params":       {body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"list_issues"}}`, why: `send it exactly as "name"`},
		"name not string":      {body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":["list_issues"]}}`, why: "params.name is not a string"},
		"no params":            {body: `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, why: "has no params"},
		"params array":         {body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["delete_repo"]}`, why: "params are not an object"},
		"params null":          {body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}`, why: "params are not an object"},
		"extra field":          {body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","tool":"x"}`, why: "not one of a JSON-RPC message's"},
		"jsonrpc 1.0":          {body: `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`, why: `jsonrpc is not "2.0"`},
		"no jsonrpc":           {body: `{"id":1,"method":"tools/list"}`, why: `jsonrpc is not "2.0"`},
		"id float":             {body: `{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`, why: "id is neither"},
		"id exponent":          {body: `{"jsonrpc":"2.0","id":1e2,"method":"tools/list"}`, why: "id is neither"},
		"id huge":              {body: `{"jsonrpc":"2.0","id":99999999999999999999,"method":"tools/list"}`, why: "id is neither"},
		"id null":              {body: `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, why: "id is neither"},
		"id object":            {body: `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, why: "id is neither"},
		"id bool":              {body: `{"jsonrpc":"2.0","id":true,"method":"tools/list"}`, why: "id is neither"},
		"id negative":          {body: `{"jsonrpc":"2.0","id":-7,"method":"tools/list"}`, ok: true},
		"batch allowed":        {body: `[` + get + `,{"jsonrpc":"2.0","method":"notifications/initialized"}]`, ok: true},
		"batch mixed":          {body: `[` + get + `,` + del + `]`, why: `(message 2 of the batch)`},
		"batch refused first":  {body: `[` + del + `,` + get + `]`, why: `(message 1 of the batch)`},
		"nested batch":         {body: `[[` + get + `]]`, why: "is itself a batch"},
		"empty batch":          {body: `[]`, why: "empty batch"},
		"batch trailing":       {body: `[` + get + `] x`, why: "not one JSON array"},
		"two objects":          {body: get + get, why: "not a JSON-RPC message"},
		"not an object":        {body: `"tools/call"`, why: "not a JSON-RPC message"},
		"response refused":     {body: `{"jsonrpc":"2.0","id":5,"result":{"action":"accept"}}`, why: "is a JSON-RPC response"},
		"response allowed":     {cond: config.MCP{Methods: []string{"ping"}, Responses: true}, body: `{"jsonrpc":"2.0","id":5,"result":{}}`, ok: true},
		"error response":       {cond: config.MCP{Methods: []string{"ping"}, Responses: true}, body: `{"jsonrpc":"2.0","id":5,"error":{"code":1,"message":"m"}}`, ok: true},
		"response and method":  {cond: config.MCP{Methods: []string{"tools/list"}, Responses: true}, body: `{"jsonrpc":"2.0","id":5,"method":"tools/list","result":{}}`, why: "has a method and a result"},
		"response without id":  {cond: config.MCP{Methods: []string{"ping"}, Responses: true}, body: `{"jsonrpc":"2.0","result":{}}`, why: "without an id"},
		"resource allowed":     {body: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"repo://acme/widgets/README.md"}}`, ok: true},
		"resource refused":     {body: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"repo://evil/x"}}`, why: "under no prefix"},
		"resource URI folded":  {body: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"repo://acme/x","URI":"repo://evil/x"}}`, why: "which some JSON readers take as one"},
		"any tool":             {cond: config.MCP{Methods: []string{"tools/call"}}, body: del, ok: true},
		"huge arguments":       {body: huge, why: "longer than"},
		"form type":            {body: get, contentType: "application/x-www-form-urlencoded", why: "needs Content-Type: application/json"},
		"invalid UTF-8":        {body: "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"x\":\"\xc0\"}", why: "not valid UTF-8"},
		"byte order mark":      {body: "\xef\xbb\xbf" + get, why: "not a JSON-RPC message"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cond := tc.cond
			if cond.Methods == nil {
				cond = readTools
			}
			b := jsonBody(tc.body)
			if len(b.Data) > MaxBodyCheck {
				b.Data, b.Complete = b.Data[:MaxBodyCheck], false
			}
			if tc.contentType != "" {
				b.ContentType = []string{tc.contentType}
			}
			checkVerdict(t, CheckMCP(cond, b), tc.ok, tc.why)
		})
	}
}

// mcpConfig is a proxy config with one injected MCP host whose rule holds
// POST, GET and DELETE on /mcp to readTools.
func mcpConfig(t *testing.T, rules string) *config.Config {
	t.Helper()
	cfg, err := config.Decode([]byte(`{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig",
	  "sandbox":{"namespace":"agents","name":"a"},
	  "hosts":[{"name":"mcp.example.com","connection":"mcp","inject":{"secret":"s","header":{"name":"Authorization","value":"Bearer {{ .token }}"}},
	    "rules":` + rules + `}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestDecideMCP(t *testing.T) {
	cond, _ := json.Marshal(readTools)
	rules := `[{"methods":["POST","GET","DELETE"],"pathPrefixes":["/mcp"],"mcp":` + string(cond) + `}]`
	p, err := NewPolicy(mcpConfig(t, rules))
	if err != nil {
		t.Fatal(err)
	}
	req := func(method, body string) RequestInfo {
		r := RequestInfo{Kind: KindTunnel, Method: method, Target: "/mcp", ConnectHost: "mcp.example.com:443", SNI: "mcp.example.com", Host: "mcp.example.com", BodyComplete: true}
		if body != "" {
			r.Body, r.ContentType = []byte(body), []string{"application/json"}
		}
		return r
	}
	tests := map[string]struct {
		req     RequestInfo
		allowed bool
		// id is the refusal's JSON-RPC id; tools the allowed decision's
		// filter.
		id    string
		tools []string
	}{
		"allowed call":         {req: req("POST", mcpCall("7", "get_issue", `{"owner":"acme"}`)), allowed: true, tools: []string{"get_issue", "list_issues"}},
		"refused call":         {req: req("POST", mcpCall(`"x-1"`, "delete_repo", `{}`)), id: `"x-1"`},
		"refused batch":        {req: req("POST", `[`+mcpCall("1", "delete_repo", `{}`)+`]`)},
		"event stream":         {req: req("GET", ""), allowed: true, tools: []string{"get_issue", "list_issues"}},
		"GET with a body":      {req: req("GET", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)},
		"session end":          {req: req("DELETE", ""), allowed: true, tools: []string{"get_issue", "list_issues"}},
		"PUT":                  {req: req("PUT", "")},
		"refused notification": {req: req("POST", `{"jsonrpc":"2.0","method":"notifications/cancelled"}`)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := p.Decide(tc.req)
			if d.Allowed() != tc.allowed {
				t.Fatalf("allowed %v, want %v: %s", d.Allowed(), tc.allowed, d.Message)
			}
			if name == "PUT" {
				if d.MCP != nil {
					t.Fatalf("a method no MCP rule names got %+v", d.MCP)
				}
				return
			}
			if d.MCP == nil {
				t.Fatal("no MCP exchange on an MCP endpoint")
			}
			if string(d.MCP.ID) != tc.id {
				t.Fatalf("id %s, want %s", d.MCP.ID, tc.id)
			}
			if d.MCP.Filter != (tc.tools != nil) || strings.Join(d.MCP.Tools, ",") != strings.Join(tc.tools, ",") {
				t.Fatalf("filter %v %v, want %v", d.MCP.Filter, d.MCP.Tools, tc.tools)
			}
		})
	}

	// A rule without tools beside the MCP one lets every tool through,
	// so nothing is filtered; a rule with other tools adds them.
	for name, tc := range map[string]struct {
		extra string
		tools []string
	}{
		"any tool":    {extra: `{"methods":["POST"],"pathPrefixes":["/mcp"],"mcp":{"methods":["tools/list"]}}`},
		"plain POST":  {extra: `{"methods":["POST"],"pathPrefixes":["/"]}`},
		"other tools": {extra: `{"methods":["POST"],"pathPrefixes":["/mcp"],"mcp":{"methods":["tools/list"],"tools":["search"]}}`, tools: []string{"get_issue", "list_issues", "search"}},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := NewPolicy(mcpConfig(t, `[{"methods":["POST"],"pathPrefixes":["/mcp"],"mcp":`+string(cond)+`},`+tc.extra+`]`))
			if err != nil {
				t.Fatal(err)
			}
			d := p.Decide(req("POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			if !d.Allowed() || d.MCP == nil || d.MCP.Filter != (tc.tools != nil) || strings.Join(d.MCP.Tools, ",") != strings.Join(tc.tools, ",") {
				t.Fatalf("decision %+v %+v, want tools %v", d, d.MCP, tc.tools)
			}
		})
	}
}

func TestMCPConfigValidate(t *testing.T) {
	tests := map[string]struct {
		rule string
		want string
	}{
		"unknown method":     {rule: `{"methods":["POST"],"pathPrefixes":["/mcp"],"mcp":{"methods":["tools/cal"]}}`, want: `"tools/cal" is not an MCP method`},
		"no POST":            {rule: `{"methods":["GET"],"pathPrefixes":["/mcp"],"mcp":{"methods":["ping"]}}`, want: "needs POST"},
		"no methods":         {rule: `{"methods":["POST"],"pathPrefixes":["/mcp"],"mcp":{"methods":[]}}`, want: "list the JSON-RPC methods"},
		"with body":          {rule: `{"methods":["POST"],"pathPrefixes":["/mcp"],"body":{"a":["b"]},"mcp":{"methods":["ping"]}}`, want: "one body condition"},
		"arguments of other": {rule: `{"methods":["POST"],"pathPrefixes":["/mcp"],"mcp":{"methods":["tools/call"],"tools":["a"],"arguments":{"b":{"x":["y"]}}}}`, want: `names the tool "b"`},
		"empty tool":         {rule: `{"methods":["POST"],"pathPrefixes":["/mcp"],"mcp":{"methods":["tools/call"],"tools":[""]}}`, want: "is empty"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := config.Decode([]byte(`{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig",
			  "sandbox":{"namespace":"agents","name":"a"},
			  "hosts":[{"name":"mcp.example.com","connection":"mcp","inject":{"secret":"s","header":{"name":"Authorization","value":"Bearer {{ .token }}"}},
			    "rules":[` + tc.rule + `]}]}`))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzCheckMCP holds what CheckMCP allows to what Go's encoding/json (a
// case-folding reader, as MCP servers written in Go use) reads of it:
// every message a request or notification of an allowed method, every
// tools/call of an allowed tool.
func FuzzCheckMCP(f *testing.F) {
	for _, s := range []string{
		mcpCall("1", "get_issue", `{"owner":"acme"}`), mcpCall(`"a"`, "list_issues", `{}`),
		`[` + mcpCall("1", "list_issues", `{}`) + `,{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_issues","NAME":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"repo://acme/a"}}`,
		`{"jsonrpc":"2.0","id":5,"result":{}}`, `[[]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := CheckMCP(readTools, Body{Data: data, Complete: true, ContentType: []string{"application/json"}})
		if !allowedJSONBody(t, err, data, "application/json") {
			return
		}
		type message struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
				URI       string         `json:"uri"`
			} `json:"params"`
		}
		var msgs []message
		if json.Unmarshal(data, &msgs) != nil {
			var m message
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("allowed a body Go does not read: %v", err)
			}
			msgs = []message{m}
		}
		for _, m := range msgs {
			if m.JSONRPC != "2.0" {
				t.Fatalf("allowed jsonrpc %q", m.JSONRPC)
			}
			if m.Method == "" {
				t.Fatalf("allowed a response: %q", data)
			}
			if !strings.Contains(strings.Join(readTools.Methods, "\n")+"\n", m.Method+"\n") {
				t.Fatalf("allowed the method %q", m.Method)
			}
			switch m.Method {
			case "tools/call":
				if m.Params.Name != "get_issue" && m.Params.Name != "list_issues" {
					t.Fatalf("allowed the tool %q", m.Params.Name)
				}
				if m.Params.Name == "get_issue" && m.Params.Arguments["owner"] != "acme" {
					t.Fatalf("allowed get_issue for owner %v", m.Params.Arguments["owner"])
				}
			case "resources/read":
				if !strings.HasPrefix(m.Params.URI, "repo://acme/") {
					t.Fatalf("allowed the resource %q", m.Params.URI)
				}
			}
		}
	})
}
