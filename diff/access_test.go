package diff

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/access/proptest"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// plan builds a valid proxy config of hosts and passthrough hosts.
func plan(hosts []config.Host, passthrough ...string) *config.Config {
	return &config.Config{
		APIVersion: config.APIVersion, Kind: config.Kind,
		Sandbox: config.SandboxRef{Namespace: "agents", Name: "support-workspace"},
		Hosts:   hosts, Passthrough: passthrough,
	}
}

// bearer is api.github.com's injection in the github-acme example.
func bearer(secret string) config.Inject {
	return config.Inject{Secret: secret, Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}}
}

func basic(secret string) config.Inject {
	return config.Inject{Secret: secret, Basic: &config.BasicInject{UsernameKey: "user", PasswordKey: "token"}}
}

// app is a host whose token a GitHub App mints, scoped to perms on
// repos.
func app(perms map[string]string, repos []string, rules ...config.Rule) config.Host {
	return config.Host{Name: "api.github.com", Connection: "github", Rules: rules, Inject: config.Inject{Secret: "gh-app", GitHubApp: &config.GitHubAppInject{
		AppID: 1, InstallationID: 2, PrivateKeyKey: "private-key.pem", API: "api.github.com", Scheme: "token", Repositories: repos, Permissions: perms}}}
}

// oauthHost is a host whose token the proxy obtains with an OAuth 2.0
// client's credentials, asking for scopes.
func oauthHost(scopes ...string) config.Host {
	return config.Host{Name: "api.acme.example", Connection: "acme", Rules: []config.Rule{prefixes("GET", "/v1")}, Inject: config.Inject{Secret: "acme-client", OAuth2: &config.OAuth2Inject{
		TokenURL: "https://auth.acme.example/token", Grant: config.OAuth2GrantClientCredentials, ClientIDKey: "client-id", ClientSecretKey: "client-secret", Scopes: scopes}}}
}

// googleHost is a host whose token the proxy mints with a service
// account's key: an access token with scopes, or an ID token for aud.
func googleHost(aud string, scopes ...string) config.Host {
	return config.Host{Name: "api.acme.example", Connection: "acme", Rules: []config.Rule{prefixes("GET", "/v1")}, Inject: config.Inject{Secret: "acme-gsa", Google: &config.GoogleInject{
		KeyKey: "key.json", TokenURL: config.GoogleTokenURL, Scopes: scopes, Audience: aud}}}
}

// audited puts h in audit mode.
func audited(h config.Host) config.Host {
	h.Audit = true
	return h
}

func gh(rules ...config.Rule) config.Host {
	return config.Host{Name: "api.github.com", Connection: "github-acme", Inject: bearer("acme-github-token"), Rules: rules}
}

func prefixes(methods string, paths ...string) config.Rule {
	return config.Rule{Methods: strings.Split(methods, ","), PathPrefixes: paths}
}

func patterns(methods string, paths ...string) config.Rule {
	return config.Rule{Methods: strings.Split(methods, ","), PathPatterns: paths}
}

// segment gives r encodedSlash: segment.
func segment(r config.Rule) config.Rule {
	r.EncodedSlash = config.EncodedSlashSegment
	return r
}

// webSocket gives r websocket: true.
func webSocket(r config.Rule) config.Rule {
	r.WebSocket = true
	return r
}

// graphql is a POST /graphql rule with a GraphQL condition.
func graphql(g config.GraphQL) config.Rule {
	r := patterns("POST", "/graphql")
	r.GraphQL = &g
	return r
}

// mcpRule is a POST /mcp rule with an MCP condition.
func mcpRule(m config.MCP) config.Rule {
	r := prefixes("POST", "/mcp")
	r.MCP = &m
	return r
}

// TestCompareAccess: containment over the rule language, decided exactly,
// and the smallest witnesses of each direction.
func TestCompareAccess(t *testing.T) {
	lfs := func(ops ...string) config.Rule {
		r := patterns("POST", "/*/*/info/lfs/objects/batch")
		r.Body = map[string][]string{"operation": ops}
		return r
	}
	for name, tc := range map[string]struct {
		base, head *config.Config
		want       Verdict
		// widened and narrowed are the witnesses' requests, in order.
		widened, narrowed []string
	}{
		"a minted token's scope widened": {
			base:    plan([]config.Host{app(map[string]string{"pull_requests": "read"}, []string{"widgets"}, prefixes("GET", "/repos/acme/widgets/pulls"))}),
			head:    plan([]config.Host{app(map[string]string{"pull_requests": "write"}, []string{"widgets"}, prefixes("GET", "/repos/acme/widgets/pulls"))}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/repos/acme/widgets/pulls"},
		},
		"a minted token's repositories widened to all": {
			base:    plan([]config.Host{app(map[string]string{"pull_requests": "read"}, []string{"widgets"}, prefixes("GET", "/repos/acme/widgets/pulls"))}),
			head:    plan([]config.Host{app(map[string]string{"pull_requests": "read"}, nil, prefixes("GET", "/repos/acme/widgets/pulls"))}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/repos/acme/widgets/pulls"},
		},
		"a minted token's scope narrowed": {
			base:     plan([]config.Host{app(map[string]string{"pull_requests": "write", "contents": "read"}, []string{"gadgets", "widgets"}, prefixes("GET", "/repos/acme/widgets/pulls"))}),
			head:     plan([]config.Host{app(map[string]string{"pull_requests": "read"}, []string{"widgets"}, prefixes("GET", "/repos/acme/widgets/pulls"))}),
			want:     VerdictNarrowed,
			narrowed: []string{"GET https://api.github.com/repos/acme/widgets/pulls"},
		},
		"an OAuth 2.0 token's scopes widened": {
			base:    plan([]config.Host{oauthHost("read")}, "auth.acme.example"),
			head:    plan([]config.Host{oauthHost("read", "write")}, "auth.acme.example"),
			want:    VerdictWidened,
			widened: []string{"GET https://api.acme.example/v1"},
		},
		"an OAuth 2.0 token's scopes narrowed": {
			base:     plan([]config.Host{oauthHost("read", "write")}, "auth.acme.example"),
			head:     plan([]config.Host{oauthHost("read")}, "auth.acme.example"),
			want:     VerdictNarrowed,
			narrowed: []string{"GET https://api.acme.example/v1"},
		},
		"an OAuth 2.0 token's scopes dropped for the server's default": {
			base:    plan([]config.Host{oauthHost("read")}, "auth.acme.example"),
			head:    plan([]config.Host{oauthHost()}, "auth.acme.example"),
			want:    VerdictWidened,
			widened: []string{"GET https://api.acme.example/v1"},
		},
		"a Google access token's scopes widened": {
			base:    plan([]config.Host{googleHost("", "https://www.googleapis.com/auth/devstorage.read_only")}, "oauth2.googleapis.com"),
			head:    plan([]config.Host{googleHost("", "https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/devstorage.read_only")}, "oauth2.googleapis.com"),
			want:    VerdictWidened,
			widened: []string{"GET https://api.acme.example/v1"},
		},
		"a Google ID token's audience changed": {
			base:    plan([]config.Host{googleHost("https://a.example")}, "oauth2.googleapis.com"),
			head:    plan([]config.Host{googleHost("https://b.example")}, "oauth2.googleapis.com"),
			want:    VerdictWidened,
			widened: []string{"GET https://api.acme.example/v1"},
		},
		"audit mode turned on": {
			base:    plan([]config.Host{gh(prefixes("GET", "/repos/acme/widgets"))}),
			head:    plan([]config.Host{audited(gh(prefixes("GET", "/repos/acme/widgets")))}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/", "HEAD https://api.github.com/", "GET https://api.github.com/other"},
		},
		"audit mode turned off": {
			base:     plan([]config.Host{audited(gh(prefixes("GET", "/repos/acme/widgets")))}),
			head:     plan([]config.Host{gh(prefixes("GET", "/repos/acme/widgets"))}),
			want:     VerdictNarrowed,
			narrowed: []string{"GET https://api.github.com/", "HEAD https://api.github.com/", "GET https://api.github.com/other"},
		},
		"the same plan": {
			base: plan([]config.Host{gh(prefixes("GET,HEAD", "/repos/acme/widgets"))}),
			head: plan([]config.Host{gh(prefixes("GET,HEAD", "/repos/acme/widgets"))}),
			want: VerdictUnchanged,
		},
		"a longer prefix widened to a shorter one": {
			base:    plan([]config.Host{gh(prefixes("POST", "/repos/acme/widgets/pulls"))}),
			head:    plan([]config.Host{gh(prefixes("POST", "/repos/acme"))}),
			want:    VerdictWidened,
			widened: []string{"POST https://api.github.com/repos/acme", "POST https://api.github.com/repos/acme/other", "POST https://api.github.com/repos/acme/widgets"},
		},
		"a shorter prefix narrowed to a longer one": {
			base:     plan([]config.Host{gh(prefixes("POST", "/repos/acme"))}),
			head:     plan([]config.Host{gh(prefixes("POST", "/repos/acme/widgets/pulls"))}),
			want:     VerdictNarrowed,
			narrowed: []string{"POST https://api.github.com/repos/acme", "POST https://api.github.com/repos/acme/other", "POST https://api.github.com/repos/acme/widgets"},
		},
		"a sibling that shares a prefix of characters is not under the prefix": {
			base:    plan([]config.Host{gh(prefixes("GET", "/repos/acme"))}),
			head:    plan([]config.Host{gh(prefixes("GET", "/repos/acme", "/repos/acme-old"))}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/repos/acme-old"},
		},
		"a new prefix under an old one is covered": {
			base: plan([]config.Host{gh(prefixes("GET", "/repos/acme"))}),
			head: plan([]config.Host{gh(prefixes("GET", "/repos/acme"), prefixes("GET", "/repos/acme/widgets/pulls"))}),
			want: VerdictUnchanged,
		},
		"a new rule covered by two old ones together": {
			base: plan([]config.Host{gh(prefixes("GET", "/repos"), prefixes("POST", "/repos/acme"))}),
			head: plan([]config.Host{gh(prefixes("GET", "/repos"), prefixes("POST", "/repos/acme"), prefixes("GET,POST", "/repos/acme/widgets"))}),
			want: VerdictUnchanged,
		},
		"a rule removal that widens nothing: the rule was covered": {
			base: plan([]config.Host{gh(prefixes("GET,HEAD", "/repos/acme"), prefixes("GET", "/repos/acme/widgets"))}),
			head: plan([]config.Host{gh(prefixes("GET,HEAD", "/repos/acme"))}),
			want: VerdictUnchanged,
		},
		"a rule removal narrows": {
			base:     plan([]config.Host{gh(prefixes("GET,HEAD", "/repos/acme/widgets"), prefixes("POST", "/repos/acme/widgets/pulls"))}),
			head:     plan([]config.Host{gh(prefixes("GET,HEAD", "/repos/acme/widgets"))}),
			want:     VerdictNarrowed,
			narrowed: []string{"POST https://api.github.com/repos/acme/widgets/pulls"},
		},
		"removing every rule forwards every request": {
			base:    plan([]config.Host{gh(prefixes("GET,HEAD", "/repos/acme/widgets"))}),
			head:    plan([]config.Host{gh()}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/", "HEAD https://api.github.com/", "POST https://api.github.com/"},
		},
		"a root prefix with every method named is not every request": {
			base:    plan([]config.Host{gh(prefixes("GET,HEAD,POST,PUT,PATCH,DELETE", "/"))}),
			head:    plan([]config.Host{gh()}),
			want:    VerdictWidened,
			widened: []string{"OPTIONS https://api.github.com/"},
		},
		// Adding the field lets the scope's documents through, and
		// refuses a double encoding beside an encoded '/' under the
		// prefix, which the rule without it let through.
		"encodedSlash: segment and a scope's documents added": {
			base:     plan([]config.Host{gh(prefixes("GET", "/@acme"))}),
			head:     plan([]config.Host{gh(segment(prefixes("GET", "/@acme")), segment(patterns("GET", "/@acme%2F*")))}),
			want:     VerdictChanged,
			widened:  []string{"GET https://api.github.com/@acme%2Fx"},
			narrowed: []string{"GET https://api.github.com/@acme/other%2Fother%2525"},
		},
		"encodedSlash: segment on a prefix spelling no %2F refuses double encoding only": {
			base:     plan([]config.Host{gh(prefixes("GET", "/repos/acme"))}),
			head:     plan([]config.Host{gh(segment(prefixes("GET", "/repos/acme")))}),
			want:     VerdictNarrowed,
			narrowed: []string{"GET https://api.github.com/repos/acme/other%2Fother%2525"},
		},
		"a GitLab project by its path, then another": {
			base:    plan([]config.Host{gh(segment(prefixes("GET", "/api/v4/projects/acme%2Fwidgets")))}),
			head:    plan([]config.Host{gh(segment(prefixes("GET", "/api/v4/projects/acme%2Fwidgets", "/api/v4/projects/acme%2fgadgets")))}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/api/v4/projects/acme%2Fgadgets", "GET https://api.github.com/api/v4/projects/acme%2Fgadgets/other%2Fother"},
		},
		"a method added": {
			base:    plan([]config.Host{gh(prefixes("GET", "/repos/acme/widgets"))}),
			head:    plan([]config.Host{gh(prefixes("GET,HEAD", "/repos/acme/widgets"))}),
			want:    VerdictWidened,
			widened: []string{"HEAD https://api.github.com/repos/acme/widgets"},
		},
		"a method traded for another": {
			base:     plan([]config.Host{gh(prefixes("GET,PUT", "/v1/items"))}),
			head:     plan([]config.Host{gh(prefixes("GET,PATCH", "/v1/items"))}),
			want:     VerdictChanged,
			widened:  []string{"PATCH https://api.github.com/v1/items"},
			narrowed: []string{"PUT https://api.github.com/v1/items"},
		},
		"a single-segment wildcard replaced by a prefix": {
			base:     plan([]config.Host{gh(patterns("POST", "/*/*/git-upload-pack"))}),
			head:     plan([]config.Host{gh(prefixes("POST", "/acme"))}),
			want:     VerdictChanged,
			widened:  []string{"POST https://api.github.com/acme", "POST https://api.github.com/acme/other", "POST https://api.github.com/acme/other/other"},
			narrowed: []string{"POST https://api.github.com/other/other/git-upload-pack"},
		},
		"a ** pattern is the prefix without the prefix itself": {
			base:     plan([]config.Host{gh(prefixes("GET", "/repos/acme"))}),
			head:     plan([]config.Host{gh(patterns("GET", "/repos/acme/**"))}),
			want:     VerdictNarrowed,
			narrowed: []string{"GET https://api.github.com/repos/acme"},
		},
		"a ** pattern and an exact pattern make the prefix": {
			base: plan([]config.Host{gh(prefixes("GET", "/repos/acme"))}),
			head: plan([]config.Host{gh(patterns("GET", "/repos/acme/**", "/repos/acme"))}),
			want: VerdictUnchanged,
		},
		"* covers every literal in its place": {
			base: plan([]config.Host{gh(patterns("GET", "/repos/*/widgets"))}),
			head: plan([]config.Host{gh(patterns("GET", "/repos/*/widgets", "/repos/acme/widgets"))}),
			want: VerdictUnchanged,
		},
		"* is one segment, ** one or more": {
			base:    plan([]config.Host{gh(patterns("GET", "/repos/*"))}),
			head:    plan([]config.Host{gh(patterns("GET", "/repos/**"))}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/repos/other/other"},
		},
		"the root pattern is the root path only": {
			base:    plan([]config.Host{gh(patterns("GET", "/"))}),
			head:    plan([]config.Host{gh(prefixes("GET", "/"))}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/other"},
		},
		"a body condition widened to another value": {
			base:    plan([]config.Host{gh(lfs("download"))}),
			head:    plan([]config.Host{gh(lfs("download", "upload"))}),
			want:    VerdictWidened,
			widened: []string{`POST https://api.github.com/other/other/info/lfs/objects/batch {"operation":"upload"}`},
		},
		"a body condition dropped": {
			base:    plan([]config.Host{gh(lfs("download"))}),
			head:    plan([]config.Host{gh(patterns("POST", "/*/*/info/lfs/objects/batch"))}),
			want:    VerdictWidened,
			widened: []string{"POST https://api.github.com/other/other/info/lfs/objects/batch"},
		},
		"a body field in another letter case is another field": {
			base: plan([]config.Host{gh(lfs("download"))}),
			head: plan([]config.Host{gh(func() config.Rule {
				r := lfs()
				r.Body = map[string][]string{"Operation": {"download"}}
				return r
			}())}),
			want: VerdictChanged,
		},
		"a new injected host": {
			base:    plan([]config.Host{gh()}),
			head:    plan([]config.Host{gh(), {Name: "uploads.github.com", Connection: "github-acme", Inject: bearer("acme-github-token")}}),
			want:    VerdictWidened,
			widened: []string{"GET https://uploads.github.com/"},
		},
		"an injected host removed": {
			base:     plan([]config.Host{gh(prefixes("GET", "/user"))}),
			head:     plan(nil),
			want:     VerdictNarrowed,
			narrowed: []string{"GET https://api.github.com/user"},
		},
		"another Secret injected": {
			base:    plan([]config.Host{gh(prefixes("GET", "/user"))}),
			head:    plan([]config.Host{{Name: "api.github.com", Connection: "github-acme", Inject: bearer("admin-token"), Rules: []config.Rule{prefixes("GET", "/user")}}}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/user"},
		},
		"another key in the template": {
			base: plan([]config.Host{gh()}),
			head: plan([]config.Host{{Name: "api.github.com", Connection: "github-acme", Inject: config.Inject{
				Secret: "acme-github-token", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .admin }}"},
			}}}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/"},
		},
		"basic auth replacing a header": {
			base:    plan([]config.Host{gh()}),
			head:    plan([]config.Host{{Name: "api.github.com", Connection: "github-acme", Inject: basic("acme-github-token")}}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/"},
		},
		"another placeholder substituted": {
			base: plan([]config.Host{{Name: "api.github.com", Connection: "github", Inject: config.Inject{Secret: "s", Substitute: &config.SubstituteInject{Placeholder: "omnia-injected-github", Key: "token"}}}}),
			head: plan([]config.Host{{Name: "api.github.com", Connection: "github", Inject: config.Inject{Secret: "s", Substitute: &config.SubstituteInject{Placeholder: "omnia-injected-github-2", Key: "token"}}}}),
			want: VerdictWidened,
		},
		"a host moved to another Connection with the same credential": {
			base: plan([]config.Host{gh(prefixes("GET", "/user"))}),
			head: plan([]config.Host{{Name: "api.github.com", Connection: "github-other", Inject: bearer("acme-github-token"), Rules: []config.Rule{prefixes("GET", "/user")}}}),
			want: VerdictUnchanged,
		},
		"a passthrough host added": {
			base:    plan(nil),
			head:    plan(nil, "pypi.org"),
			want:    VerdictWidened,
			widened: []string{"GET https://pypi.org/", "GET http://pypi.org/"},
		},
		"a passthrough host injected now": {
			base:     plan(nil, "api.github.com"),
			head:     plan([]config.Host{gh(prefixes("GET", "/user"))}),
			want:     VerdictChanged,
			widened:  []string{"GET https://api.github.com/user"},
			narrowed: []string{"GET https://api.github.com/", "HEAD https://api.github.com/", "GET http://api.github.com/"},
		},
		"an injected host passed through now": {
			base:     plan([]config.Host{gh()}),
			head:     plan(nil, "api.github.com"),
			want:     VerdictChanged,
			widened:  []string{"GET http://api.github.com/"},
			narrowed: []string{"GET https://api.github.com/"},
		},
		"a sandbox added": {
			base:    nil,
			head:    plan([]config.Host{gh(prefixes("GET", "/user"))}),
			want:    VerdictWidened,
			widened: []string{"GET https://api.github.com/user"},
		},
		"a sandbox removed": {
			base:     plan(nil, "pypi.org"),
			head:     nil,
			want:     VerdictNarrowed,
			narrowed: []string{"GET https://pypi.org/", "GET http://pypi.org/"},
		},
		"any POST to /graphql narrowed to queries only": {
			base: plan([]config.Host{gh(patterns("POST", "/graphql"))}),
			head: plan([]config.Host{gh(graphql(config.GraphQL{Operations: []string{"query"}}))}),
			want: VerdictNarrowed,
			narrowed: []string{
				"POST https://api.github.com/graphql",
				`POST https://api.github.com/graphql {"query":"mutation{__typename}"}`,
				`POST https://api.github.com/graphql {"query":"subscription{__typename}"}`,
			},
		},
		"queries only widened to any POST: a mutation": {
			base:    plan([]config.Host{gh(graphql(config.GraphQL{Operations: []string{"query"}}))}),
			head:    plan([]config.Host{gh(patterns("POST", "/graphql"))}),
			want:    VerdictWidened,
			widened: []string{"POST https://api.github.com/graphql", `POST https://api.github.com/graphql {"query":"mutation{__typename}"}`, `POST https://api.github.com/graphql {"query":"subscription{__typename}"}`},
		},
		"an MCP tool added": {
			base:    plan([]config.Host{gh(mcpRule(config.MCP{Methods: []string{"tools/list", "tools/call"}, Tools: []string{"get_issue"}}))}),
			head:    plan([]config.Host{gh(mcpRule(config.MCP{Methods: []string{"tools/list", "tools/call"}, Tools: []string{"get_issue", "create_issue"}}))}),
			want:    VerdictWidened,
			widened: []string{`POST https://api.github.com/mcp {"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{},"name":"create_issue"}}`},
		},
		"an MCP method added": {
			base:    plan([]config.Host{gh(mcpRule(config.MCP{Methods: []string{"tools/list"}}))}),
			head:    plan([]config.Host{gh(mcpRule(config.MCP{Methods: []string{"tools/list", "prompts/get"}}))}),
			want:    VerdictWidened,
			widened: []string{`POST https://api.github.com/mcp {"id":1,"jsonrpc":"2.0","method":"prompts/get"}`},
		},
		"an MCP tool's arguments narrowed": {
			base:     plan([]config.Host{gh(mcpRule(config.MCP{Methods: []string{"tools/call"}, Tools: []string{"get_issue"}}))}),
			head:     plan([]config.Host{gh(mcpRule(config.MCP{Methods: []string{"tools/call"}, Tools: []string{"get_issue"}, Arguments: map[string]map[string][]string{"get_issue": {"owner": {"acme"}}}}))}),
			want:     VerdictNarrowed,
			narrowed: []string{`POST https://api.github.com/mcp {"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{},"name":"get_issue"}}`},
		},
		"queries only widened to mutations": {
			base:    plan([]config.Host{gh(graphql(config.GraphQL{Operations: []string{"query"}}))}),
			head:    plan([]config.Host{gh(graphql(config.GraphQL{Operations: []string{"query", "mutation"}}))}),
			want:    VerdictWidened,
			widened: []string{`POST https://api.github.com/graphql {"query":"mutation{__typename}"}`, `POST https://api.github.com/graphql {"operationName":"Q","query":"query Q{__typename} mutation M{__typename}"}`},
		},
		"queries only, persisted queries allowed": {
			base:    plan([]config.Host{gh(graphql(config.GraphQL{Operations: []string{"query"}}))}),
			head:    plan([]config.Host{gh(graphql(config.GraphQL{Operations: []string{"query"}, PersistedQueries: true}))}),
			want:    VerdictWidened,
			widened: []string{`POST https://api.github.com/graphql {"extensions":{"persistedQuery":{"sha256Hash":"0000000000000000000000000000000000000000000000000000000000000000","version":1}}}`},
		},
		"queries only, batches allowed": {
			base:    plan([]config.Host{gh(graphql(config.GraphQL{Operations: []string{"query"}}))}),
			head:    plan([]config.Host{gh(graphql(config.GraphQL{Operations: []string{"query"}, Batches: true}))}),
			want:    VerdictWidened,
			widened: []string{`POST https://api.github.com/graphql [{"query":"{__typename}"}]`},
		},
		"a queries-only rule beside one that allows any POST adds nothing": {
			base: plan([]config.Host{gh(patterns("POST", "/graphql"))}),
			head: plan([]config.Host{gh(patterns("POST", "/graphql"), graphql(config.GraphQL{Operations: []string{"query"}, Batches: true}))}),
			want: VerdictUnchanged,
		},
		// Allowing a WebSocket on a path already allowed is a widening:
		// the handshake gains the upgrade, which the plain GET had not.
		"websocket allowed on a path already allowed": {
			base:    plan([]config.Host{gh(prefixes("GET", "/realtime"))}),
			head:    plan([]config.Host{gh(prefixes("GET", "/realtime"), webSocket(prefixes("GET", "/realtime")))}),
			want:    VerdictWidened,
			widened: []string{"GET wss://api.github.com/realtime"},
		},
		"websocket taken away": {
			base:     plan([]config.Host{gh(webSocket(prefixes("GET", "/realtime")))}),
			head:     plan([]config.Host{gh(prefixes("GET", "/realtime"))}),
			want:     VerdictNarrowed,
			narrowed: []string{"GET wss://api.github.com/realtime"},
		},
		"a sandbox added that reaches nothing": {
			base: nil,
			head: plan(nil),
			want: VerdictUnchanged,
		},
	} {
		t.Run(name, func(t *testing.T) {
			compareCase(t, tc.base, tc.head, tc.want, tc.widened, tc.narrowed)
		})
	}
}

// compareCase compares base with head and requires the verdict want and,
// unless nil, the witnesses widened and narrowed, each witness proven by
// checkAccess.
func compareCase(t *testing.T, base, head *config.Config, want Verdict, widened, narrowed []string) {
	t.Helper()
	a := CompareAccess(base, head)
	if a.Verdict != want {
		t.Errorf("verdict %s (%s), want %s", a.Verdict, a.Undecided, want)
	}
	if got := requests(a.Widened); widened != nil && !slices.Equal(got, widened) {
		t.Errorf("widened:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(widened, "\n"))
	}
	if got := requests(a.Narrowed); narrowed != nil && !slices.Equal(got, narrowed) {
		t.Errorf("narrowed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(narrowed, "\n"))
	}
	checkAccess(t, base, head, a)
}

func requests(ws []Witness) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Request())
	}
	return out
}

// TestCompareAccessUndecided: past its bounds the comparison says it
// cannot decide, and keeps what it proved on other hosts.
func TestCompareAccessUndecided(t *testing.T) {
	wide := patterns("POST", "/batch")
	wide.Body = map[string][]string{}
	for i := range 8 {
		wide.Body[fmt.Sprintf("field%d", i)] = []string{"a", "b", "c"}
	}
	a := CompareAccess(
		plan([]config.Host{gh()}),
		plan([]config.Host{gh(wide), {Name: "uploads.github.com", Connection: "github-acme", Inject: bearer("acme-github-token")}}),
	)
	if a.Verdict != VerdictUndecided || !strings.Contains(a.Undecided, "host api.github.com: its rules' body conditions fall into more than 256 classes") {
		t.Errorf("verdict %s: %s", a.Verdict, a.Undecided)
	}
	if got := requests(a.Widened); !slices.Equal(got, []string{"GET https://uploads.github.com/"}) {
		t.Errorf("widened = %v, want the new host's witness", got)
	}
}

// checkAccess asserts what every reported access must satisfy, with the
// proxy's own decision function on the two whole plans: each widened
// witness gains (allowed by head and refused by base, or given a
// credential base did not give it) and each narrowed one loses; the
// witnesses agree with the verdict.
func checkAccess(t *testing.T, base, head *config.Config, a Access) {
	t.Helper()
	pb, ph := policyOf(t, base), policyOf(t, head)
	for _, w := range a.Widened {
		ob, oh := decide(pb, w.Method, w.URL, []byte(w.Body)), decide(ph, w.Method, w.URL, []byte(w.Body))
		if !gains(ob, oh) || scopeNarrowed(base, head, w.URL) || ob != w.Base || oh != w.Head {
			t.Errorf("widened witness %s: base %s, head %s; reported %s → %s", w.Request(), ob, oh, w.Base, w.Head)
		}
	}
	for _, w := range a.Narrowed {
		ob, oh := decide(pb, w.Method, w.URL, []byte(w.Body)), decide(ph, w.Method, w.URL, []byte(w.Body))
		if !loses(ob, oh) && !scopeNarrowed(base, head, w.URL) || ob != w.Base || oh != w.Head {
			t.Errorf("narrowed witness %s: base %s, head %s; reported %s → %s", w.Request(), ob, oh, w.Base, w.Head)
		}
	}
	switch a.Verdict {
	case VerdictUnchanged:
		if len(a.Widened)+len(a.Narrowed) > 0 {
			t.Errorf("unchanged with witnesses %v %v", a.Widened, a.Narrowed)
		}
	case VerdictWidened:
		if len(a.Widened) == 0 || len(a.Narrowed) > 0 {
			t.Errorf("widened with witnesses %v %v", a.Widened, a.Narrowed)
		}
	case VerdictNarrowed:
		if len(a.Widened) > 0 || len(a.Narrowed) == 0 {
			t.Errorf("narrowed with witnesses %v %v", a.Widened, a.Narrowed)
		}
	case VerdictChanged:
		if len(a.Widened) == 0 || len(a.Narrowed) == 0 {
			t.Errorf("changed with witnesses %v %v", a.Widened, a.Narrowed)
		}
	}
}

// scopeNarrowed reports whether the URL's host injects, on both plans, a
// token of one GitHub App whose head scope has no permission or
// repository beyond the base's, or of one OAuth 2.0 client or service
// account asking for no scope beyond the base's, written out here from
// the two scopes.
func scopeNarrowed(base, head *config.Config, rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil || base == nil || head == nil {
		return false
	}
	inject := func(c *config.Config) config.Inject {
		for _, h := range c.Hosts {
			if h.Name == u.Hostname() {
				return h.Inject
			}
		}
		return config.Inject{}
	}
	// A token endpoint's token asks for the head's scopes, each one of
	// the base's, of the same client or account.
	subset := func(b, h []string) bool {
		for _, s := range h {
			if !slices.Contains(b, s) {
				return false
			}
		}
		return len(h) > 0 || len(b) == 0
	}
	if bo, ho := inject(base).OAuth2, inject(head).OAuth2; bo != nil && ho != nil {
		return bo.TokenURL == ho.TokenURL && bo.Audience == ho.Audience && bo.Resource == ho.Resource && subset(bo.Scopes, ho.Scopes)
	}
	if bg, hg := inject(base).Google, inject(head).Google; bg != nil && hg != nil {
		return bg.KeyKey == hg.KeyKey && bg.Audience == hg.Audience && subset(bg.Scopes, hg.Scopes)
	}
	b, h := inject(base).GitHubApp, inject(head).GitHubApp
	if b == nil || h == nil || b.AppID != h.AppID || b.InstallationID != h.InstallationID {
		return false
	}
	for _, r := range h.Repositories {
		if len(b.Repositories) > 0 && !slices.Contains(b.Repositories, r) {
			return false
		}
	}
	if len(h.Repositories) == 0 && len(b.Repositories) > 0 {
		return false
	}
	rank := map[string]int{"read": 1, "write": 2}
	for name, level := range h.Permissions {
		if len(b.Permissions) > 0 && rank[b.Permissions[name]] < rank[level] {
			return false
		}
	}
	return len(h.Permissions) > 0 || len(b.Permissions) == 0
}

// gains reports whether a request decided from → to gains: it is allowed
// now and was refused, now carries a credential it did not, or now
// upgrades to a WebSocket.
func gains(from, to Outcome) bool {
	if !to.Allowed() {
		return false
	}
	return !from.Allowed() || to.Credential != "" && to.Credential != from.Credential || to.WebSocket && !from.WebSocket
}

// loses reports whether a request decided from → to loses: it is refused
// now and was allowed, no longer carries a credential, or no longer
// upgrades to a WebSocket.
func loses(from, to Outcome) bool {
	if !from.Allowed() {
		return false
	}
	return !to.Allowed() || from.Credential != "" && to.Credential == "" || from.WebSocket && !to.WebSocket
}

func policyOf(t *testing.T, c *config.Config) *policy.Policy {
	t.Helper()
	if c == nil {
		c = plan(nil)
	}
	p, err := policy.NewPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func decide(p *policy.Policy, method, url string, body []byte) Outcome {
	return outcome(p, p.DecideURL(method, url, body))
}

// TestAccessProperty: for random pairs of plans over a small rule
// language, every witness is proven by the proxy's decision function,
// and random requests never contradict the verdict: none gains when it
// says nothing widened, none loses when it says nothing narrowed.
func TestAccessProperty(t *testing.T) {
	for seed := range uint64(1000) {
		accessProperty(t, seed, seed*7919+1)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

// FuzzAccess is TestAccessProperty driven by the fuzzer's seeds.
func FuzzAccess(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(42), uint64(7))
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		accessProperty(t, s1, s2)
	})
}

func accessProperty(t *testing.T, s1, s2 uint64) {
	rng := rand.New(rand.NewPCG(s1, s2))
	base, head := randomPlan(rng), randomPlan(rng)
	if rng.IntN(3) == 0 {
		// Often a small edit of the base, where verdicts are subtle.
		head = mutate(rng, base)
	}
	a := CompareAccess(base, head)
	checkAccess(t, base, head, a)
	if a.Verdict == VerdictUndecided {
		return
	}
	pb, ph := policyOf(t, base), policyOf(t, head)
	for range 300 {
		method, url, body := randomRequest(rng)
		ob, oh := decide(pb, method, url, body), decide(ph, method, url, body)
		if gains(ob, oh) && !a.Verdict.MayWiden() {
			t.Fatalf("%s %s %s gains (%s → %s) but the verdict is %s\nbase %s\nhead %s", method, url, body, ob, oh, a.Verdict, dump(base), dump(head))
		}
		if loses(ob, oh) && !a.Verdict.MayNarrow() {
			t.Fatalf("%s %s %s loses (%s → %s) but the verdict is %s\nbase %s\nhead %s", method, url, body, ob, oh, a.Verdict, dump(base), dump(head))
		}
		if a.Verdict == VerdictUnchanged && (ob.Allowed() != oh.Allowed() || ob.Credential != oh.Credential) {
			t.Fatalf("%s %s %s: %s → %s but the verdict is unchanged", method, url, body, ob, oh)
		}
	}
}

func dump(c *config.Config) string {
	b, _ := json.Marshal(c)
	return string(b)
}

// The small language the property test draws from: few literals, so that
// random rules overlap and random requests hit them.
var (
	propSegs    = []string{"a", "b", "a-old", "c"}
	propMethods = []string{"GET", "HEAD", "POST"}
	propHosts   = []string{"one.example", "two.example"}
)

// propGraphQL are GraphQL requests random requests send: other spellings
// than the comparison's own classes.
var propGraphQL = []string{
	`{"query":"query { viewer { login } }","variables":{}}`,
	`{"query":"mutation Add { addStar(input: {}) { clientMutationId } }"}`,
	`{"query":"query A { a } mutation B { b }","operationName":"A"}`,
	`{"query":"query A { a } subscription B { b }","operationName":"B"}`,
	`{"query":"subscription { s }","extensions":{}}`,
	`{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"abc"}},"operationName":"X"}`,
	`[{"query":"{ a }"},{"query":"query { b }"}]`,
	`[{"query":"{ a }"},{"query":"mutation { b }"}]`,
	`[{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"abc"}}}]`,
	`[{"query":"subscription { a }"},{"extensions":{"persistedQuery":{}}}]`,
	`{"query":"{ a }","operation":"download"}`,
}

func randomRule(rng *rand.Rand) config.Rule {
	r := config.Rule{Methods: proptest.Subset(rng, propMethods)}
	if len(r.Methods) == 0 {
		r.Methods = []string{proptest.Pick(rng, propMethods)}
	}
	segment := rng.IntN(4) == 0
	if segment {
		r.EncodedSlash = config.EncodedSlashSegment
	}
	for range 1 + rng.IntN(2) {
		pattern := rng.IntN(2) == 1
		p := proptest.Path(rng, propSegs, pattern)
		if segment && !strings.HasSuffix(p, "**") && rng.IntN(2) == 0 {
			// A segment spelling an encoded '/', or a "*" piece.
			slashed := []string{"a%2Fb", "c%2fa", "a%2Fa-old"}
			if pattern {
				slashed = append(slashed, "a%2F*", "*%2Fb")
			}
			p = strings.TrimSuffix(p, "/") + "/" + proptest.Pick(rng, slashed)
		}
		if pattern {
			r.PathPatterns = append(r.PathPatterns, p)
		} else {
			r.PathPrefixes = append(r.PathPrefixes, p)
		}
	}
	switch rng.IntN(6) {
	case 0:
		r.Body = map[string][]string{proptest.Pick(rng, []string{"operation", "Operation", "ref"}): {proptest.Pick(rng, []string{"download", "upload"})}}
	case 1:
		g := config.GraphQL{PersistedQueries: rng.IntN(4) == 0, Batches: rng.IntN(3) == 0}
		g.Operations = proptest.Subset(rng, config.GraphQLOperations())
		if len(g.Operations) == 0 {
			g.Operations = []string{config.GraphQLQuery}
		}
		r.GraphQL = &g
	}
	return r
}

func randomInject(rng *rand.Rand) config.Inject {
	switch rng.IntN(4) {
	case 0:
		return basic(proptest.Pick(rng, []string{"s1", "s2"}))
	case 1:
		return config.Inject{Secret: "s1", Substitute: &config.SubstituteInject{Placeholder: "omnia-injected-one", Key: "token"}}
	}
	return bearer(proptest.Pick(rng, []string{"s1", "s2"}))
}

func randomPlan(rng *rand.Rand) *config.Config {
	if rng.IntN(20) == 0 {
		return nil
	}
	hosts, pass := proptest.Hosts(rng, propHosts, func(h string) config.Host {
		host := config.Host{Name: h, Connection: proptest.Pick(rng, []string{"c1", "c2"}), Inject: randomInject(rng)}
		for range rng.IntN(4) {
			host.Rules = append(host.Rules, randomRule(rng))
		}
		return host
	})
	return plan(hosts, pass...)
}

// mutate returns a copy of c with one small edit.
func mutate(rng *rand.Rand, c *config.Config) *config.Config {
	if c == nil || len(c.Hosts) == 0 {
		return randomPlan(rng)
	}
	var out config.Config
	if err := json.Unmarshal([]byte(dump(c)), &out); err != nil {
		panic(err)
	}
	h := &out.Hosts[rng.IntN(len(out.Hosts))]
	switch rng.IntN(5) {
	case 0:
		h.Rules = append(h.Rules, randomRule(rng))
	case 1:
		if len(h.Rules) > 0 {
			h.Rules = slices.Delete(h.Rules, 0, 1)
		}
	case 2:
		if len(h.Rules) > 0 {
			h.Rules[0].Methods = append(h.Rules[0].Methods, proptest.Pick(rng, propMethods))
			slices.Sort(h.Rules[0].Methods)
			h.Rules[0].Methods = slices.Compact(h.Rules[0].Methods)
		}
	case 3:
		if len(h.Rules) > 0 {
			h.Rules[0].PathPrefixes = append(h.Rules[0].PathPrefixes, proptest.Path(rng, propSegs, false))
		}
	default:
		h.Inject = randomInject(rng)
	}
	return &out
}

func randomRequest(rng *rand.Rand) (method, url string, body []byte) {
	method = proptest.Pick(rng, append(slices.Clone(propMethods), "PUT", "get", "OPTIONS"))
	scheme := proptest.Pick(rng, []string{"https", "https", "http"})
	host := proptest.Pick(rng, append(slices.Clone(propHosts), "three.example", "ONE.example", "one.example:443", "one.example:80", "one.example:8443"))
	n := rng.IntN(6)
	var segs []string
	for range n {
		segs = append(segs, proptest.Pick(rng, append(slices.Clone(propSegs), "z", "*", "**", "a-old", "other", "a%2Fb", "a%2fb", "a%2Fz", "c%2Fa", "x%2F..%2Fa", "a%2Fb%252F")))
	}
	path := "/" + strings.Join(segs, "/")
	if rng.IntN(8) == 0 {
		path += "?q=/a"
	}
	switch rng.IntN(5) {
	case 0:
		body = []byte(`{"operation":"download"}`)
	case 1:
		body = []byte(`{"OPERATION":"upload","ref":"download"}`)
	case 2:
		body = []byte(`{"ref":"upload"}`)
	case 3:
		body = []byte(proptest.Pick(rng, propGraphQL))
	}
	return method, scheme + "://" + host + path, body
}

// FuzzCompareAccessConfigs: whatever two proxy configs hold, valid or
// not, CompareAccess returns a verdict without panicking; for two valid
// ones, every witness is proven on both plans.
func FuzzCompareAccessConfigs(f *testing.F) {
	f.Add([]byte(dump(plan([]config.Host{gh(prefixes("GET,HEAD", "/repos/acme/widgets"))}))), []byte(dump(plan([]config.Host{gh(patterns("GET", "/repos/*/**"))}, "pypi.org"))))
	f.Add([]byte(`{"hosts":[{"name":"a","rules":[{"methods":["GET"],"pathPrefixes":["x"]}]}]}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, b, h []byte) {
		var base, head config.Config
		errB, errH := json.Unmarshal(b, &base), json.Unmarshal(h, &head)
		if errB != nil || errH != nil {
			return
		}
		a := CompareAccess(&base, &head)
		if base.Validate() != nil || head.Validate() != nil {
			if a.Verdict != VerdictUndecided {
				t.Fatalf("an invalid config gave verdict %s", a.Verdict)
			}
			return
		}
		checkAccess(t, &base, &head, a)
	})
}
