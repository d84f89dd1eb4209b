package policy

import (
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// TestMintedTokenNotRevoked: a sandbox cannot revoke the token the proxy
// mints, which serves every request of its scope, however it spells the
// request and even where a rule allows DELETE on every path; the same
// request to a host whose token is the sandbox's own Secret is decided
// by the rules alone.
func TestMintedTokenNotRevoked(t *testing.T) {
	const app = `{"secret": "app", "githubApp": {"appId": 1, "installationId": 2, "privateKeyKey": "key.pem", "api": "api.github.com", "scheme": "token"}}`
	const ghes = `{"secret": "app", "githubApp": {"appId": 1, "installationId": 2, "privateKeyKey": "key.pem", "api": "ghe.example.com", "scheme": "token"}}`
	const plain = `{"secret": "pat", "header": {"name": "Authorization", "value": "token {{ .token }}"}}`
	const rules = `"rules": [{"methods": ["GET", "DELETE"], "pathPrefixes": ["/"]}]`
	cfg := func(host, inject string) *config.Config {
		c, err := config.Decode([]byte(`{"apiVersion": "proxy.keyhole.dev/v1alpha1", "kind": "ProxyConfig",
			"sandbox": {"namespace": "agents", "name": "a"},
			"hosts": [{"name": "` + host + `", "connection": "gh", "inject": ` + inject + `, ` + rules + `}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	req := func(host, method, target string) RequestInfo {
		return RequestInfo{Kind: KindTunnel, Method: method, Target: target, ConnectHost: host + ":443", SNI: host, Host: host, BodyComplete: true}
	}
	tests := map[string]struct {
		host, inject, method, target string
		allowed                      bool
	}{
		"DELETE /installation/token":               {host: "api.github.com", inject: app, method: "DELETE", target: "/installation/token"},
		"with a trailing slash":                    {host: "api.github.com", inject: app, method: "DELETE", target: "/installation/token/"},
		"in other letter cases":                    {host: "api.github.com", inject: app, method: "DELETE", target: "/Installation/TOKEN"},
		"with a query":                             {host: "api.github.com", inject: app, method: "DELETE", target: "/installation/token?x=1"},
		"a lower-case method":                      {host: "api.github.com", inject: app, method: "delete", target: "/installation/token"},
		"GitHub Enterprise Server's path":          {host: "ghe.example.com", inject: ghes, method: "DELETE", target: "/api/v3/installation/token"},
		"GET of the same path":                     {host: "api.github.com", inject: app, method: "GET", target: "/installation/token", allowed: true},
		"DELETE of another path":                   {host: "api.github.com", inject: app, method: "DELETE", target: "/installation/token/x", allowed: true},
		"the sandbox's own token, from its Secret": {host: "api.github.com", inject: plain, method: "DELETE", target: "/installation/token", allowed: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := decideOnce(cfg(tc.host, tc.inject), req(tc.host, tc.method, tc.target))
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed() != tc.allowed {
				t.Fatalf("%s %s: %s %s (%s), want allowed %v", tc.method, tc.target, d.Action, d.Reason, d.Message, tc.allowed)
			}
			if !tc.allowed && d.Reason != ReasonL7NotAllowed {
				t.Errorf("reason %s, want %s", d.Reason, ReasonL7NotAllowed)
			}
		})
	}
}
