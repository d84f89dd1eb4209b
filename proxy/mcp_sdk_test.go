package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"keyhole.dev/keyhole/proxy/policy"
)

// mcpProxyConfig lets the sandbox use an MCP server's session methods
// and two of its tools, one of them for the owner acme only; response
// bodies are scrubbed of the credential.
const mcpProxyConfig = configHead + `
  "scrubResponseBodies": true,
  "hosts": [
    {"name": "mcp.example.com", "connection": "github-mcp",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["POST", "GET", "DELETE"], "pathPrefixes": ["/mcp"],
                "mcp": {"methods": ["server/discover", "initialize", "notifications/initialized", "ping", "tools/list", "tools/call", "notifications/cancelled"],
                        "tools": ["whoami", "get_issue"],
                        "arguments": {"get_issue": {"owner": ["acme"]}}}}]}
  ]
}`

// mcpServer is an MCP server (the official Go SDK's) behind TLS, with a
// tool the proxy allows that echoes the credential it was sent, one
// allowed for some arguments, and one the proxy refuses; it records the
// tools called.
type mcpServer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	called []string
}

func (m *mcpServer) calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.called)
}

func newMCPServer(t *testing.T, ca *testCA, jsonAnswers bool) *mcpServer {
	m := &mcpServer{}
	type issueArgs struct {
		Owner string `json:"owner"`
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "github", Version: "1"}, nil)
	record := func(name string) {
		m.mu.Lock()
		m.called = append(m.called, name)
		m.mu.Unlock()
	}
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "who the credential is"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		record("whoami")
		auth := req.Extra.Header.Get("Authorization")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you sent " + auth}}}, nil, nil
	})
	mcp.AddTool(server, &mcp.Tool{Name: "get_issue"}, func(_ context.Context, _ *mcp.CallToolRequest, in issueArgs) (*mcp.CallToolResult, any, error) {
		record("get_issue " + in.Owner)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "issue of " + in.Owner}}}, nil, nil
	})
	mcp.AddTool(server, &mcp.Tool{Name: "delete_repo"}, func(_ context.Context, _ *mcp.CallToolRequest, in issueArgs) (*mcp.CallToolResult, any, error) {
		record("delete_repo")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{JSONResponse: jsonAnswers, DisableLocalhostProtection: true} /* the test server listens on loopback under a public name */)
	m.srv = ca.serve(t, h, "mcp.example.com")
	return m
}

// TestMCPThroughProxy runs the official MCP Go SDK's client and server
// through the proxy, over the streamable HTTP transport with the
// server answering as JSON and as event streams, in the protocol's
// stateless draft (server/discover) and with the initialize handshake:
// the allowed tool works, tools/list shows only the allowed tools, a
// refused tool never reaches the server and its refusal comes back as
// the call's error with the session still usable, and the credential
// never comes back.
func TestMCPThroughProxy(t *testing.T) {
	for _, answers := range []string{"json", "sse"} {
		for _, version := range []string{"", "2025-06-18"} {
			t.Run(answers+"/"+firstOf(version, "latest"), func(t *testing.T) {
				ca := newTestCA(t, "mcp upstream CA")
				m := newMCPServer(t, ca, answers == "json")
				h := newHarnessConfig(t, mcpProxyConfig, func(o *Options) {
					o.Resolve["mcp.example.com:443"] = m.srv.Listener.Addr().String()
					o.UpstreamRoots = ca.pool
				})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
				session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "https://mcp.example.com/mcp", HTTPClient: h.client(), MaxRetries: -1},
					&mcp.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatalf("connect: %v\n%s", err, h.logs)
				}
				defer session.Close()

				list, err := session.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, tool := range list.Tools {
					names = append(names, tool.Name)
				}
				if slices.Sort(names); strings.Join(names, ",") != "get_issue,whoami" {
					t.Fatalf("tools/list gave %v, want only get_issue and whoami", names)
				}

				res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
				if err != nil {
					t.Fatal(err)
				}
				text := res.Content[0].(*mcp.TextContent).Text
				if strings.Contains(text, canary) || !strings.HasPrefix(text, "you sent Bearer ") {
					t.Fatalf("whoami answered %q: the credential came back, or none was sent", text)
				}

				if _, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "get_issue", Arguments: map[string]any{"owner": "acme"}}); err != nil {
					t.Fatal(err)
				}
				for _, call := range []*mcp.CallToolParams{
					{Name: "delete_repo", Arguments: map[string]any{"owner": "acme"}},
					{Name: "get_issue", Arguments: map[string]any{"owner": "evil"}},
				} {
					_, err := session.CallTool(ctx, call)
					if err == nil || !strings.Contains(err.Error(), "keyhole: "+string(policy.ReasonL7NotAllowed)) {
						t.Fatalf("calling %s %v gave %v, want the proxy's refusal", call.Name, call.Arguments, err)
					}
				}
				// The session survives the refusals.
				if err := session.Ping(ctx, nil); err != nil {
					t.Fatalf("ping after a refusal: %v", err)
				}
				if got := strings.Join(m.calls(), ","); got != "whoami,get_issue acme" {
					t.Fatalf("the server ran %s", got)
				}
				if strings.Contains(h.logs.String(), canary) {
					t.Fatal("the log holds the credential")
				}
				// The request log names the tools a call named.
				refused := 0
				for _, l := range h.logs.requests(t) {
					if l["decision"] == "refuse" {
						if l["mcpTools"] != "delete_repo" && l["mcpTools"] != "get_issue" {
							t.Errorf("a refusal's line names the tools %v", l["mcpTools"])
						}
						refused++
					}
				}
				if refused != 2 {
					t.Errorf("%d refusals logged, want 2", refused)
				}
			})
		}
	}
}
