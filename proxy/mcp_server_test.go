package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/policy"
)

// mcpRuleConfig holds POSTs to api.github.com's /mcp to two tools.
const mcpRuleConfig = configHead + `
  "hosts": [
    {"name": "api.github.com", "connection": "github-acme",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["POST", "GET"], "pathPrefixes": ["/mcp"],
                "mcp": {"methods": ["tools/list", "tools/call", "notifications/initialized"], "tools": ["get_issue", "list_issues"]}}]}
  ]
}`

// TestServerMCPRule sends MCP bodies through the proxy over real sockets,
// raw in a TLS tunnel: what the condition refuses never reaches the
// upstream and is answered as a JSON-RPC error with its id; what it
// allows arrives byte for byte with the credential.
func TestServerMCPRule(t *testing.T) {
	h := newHarnessConfig(t, mcpRuleConfig)
	call := func(id, tool string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
	}
	tests := map[string]struct {
		body    string
		allowed bool
		// id is the refusal's JSON-RPC id.
		id string
	}{
		"allowed call":                  {body: call("1", "get_issue"), allowed: true},
		"allowed batch":                 {body: "[" + call("1", "get_issue") + "," + call("2", "list_issues") + "]", allowed: true},
		"refused tool":                  {body: call(`"a-7"`, "delete_repo"), id: `"a-7"`},
		"batch, one refused":            {body: "[" + call("1", "get_issue") + "," + call("2", "delete_repo") + "]", id: "null"},
		"nested batch":                  {body: "[[" + call("1", "get_issue") + "]]", id: "null"},
		"tool named twice":              {body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_issue","name":"delete_repo"}}`, id: "null"},
		"method upper case":             {body: `{"jsonrpc":"2.0","id":4,"method":"Tools/Call","params":{"name":"delete_repo"}}`, id: "4"},
		"method field folded":           {body: `{"jsonrpc":"2.0","id":5,"method":"tools/list","METHOD":"tools/call","params":{"name":"delete_repo"}}`, id: "null"},
		"id fraction":                   {body: `{"jsonrpc":"2.0","id":1.0,"method":"tools/list"}`, id: "null"},
		"response, not allowed":         {body: `{"jsonrpc":"2.0","id":1,"result":{}}`, id: "null"},
		"arguments past the read limit": {body: call("6", "get_issue")[:60] + strings.Repeat(" ", policy.MaxBodyCheck) + call("6", "get_issue")[60:], id: "null"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(h.api.seen())
			c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
			defer c.Close()
			raw := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: api.github.com\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(tc.body), tc.body)
			resp := roundTrip(t, c, br, raw)
			body := readBody(t, resp)
			got := h.api.seen()[before:]
			if !tc.allowed {
				if resp.StatusCode != http.StatusForbidden || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) {
					t.Fatalf("status %d %s=%q, want 403 l7-not-allowed", resp.StatusCode, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
				}
				if len(got) != 0 {
					t.Fatalf("the refused body reached the upstream: %.80q", got[0].Body)
				}
				var msg struct {
					ID    json.RawMessage `json:"id"`
					Error struct {
						Code int `json:"code"`
					} `json:"error"`
				}
				if err := json.Unmarshal([]byte(body), &msg); err != nil || string(msg.ID) != tc.id || msg.Error.Code != mcpRefusalCode {
					t.Fatalf("refusal body %q (%v), want a JSON-RPC error with id %s", body, err, tc.id)
				}
				return
			}
			if resp.StatusCode != http.StatusOK || len(got) != 1 {
				t.Fatalf("status %d, upstream saw %d requests; want 200 and 1", resp.StatusCode, len(got))
			}
			if got[0].Body != tc.body || got[0].Header.Get("Authorization") != "Bearer "+canary {
				t.Fatalf("upstream got body %q", got[0].Body)
			}
		})
	}
}
