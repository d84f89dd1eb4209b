package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/policy"
)

// catalogRulesConfig holds the rules the catalog's read-only github
// connector renders: reads by GET and HEAD, git's upload-pack, Git LFS
// batch downloads, GraphQL queries on POST /graphql.
const catalogRulesConfig = configHead + `
  "hosts": [
    {"name": "api.github.com", "connection": "github",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["GET", "HEAD"], "pathPrefixes": ["/"]},
               {"methods": ["POST"], "pathPatterns": ["/graphql"], "graphql": {"operations": ["query"]}}]},
    {"name": "github.com", "connection": "github",
     "inject": {"secret": "acme-github-token", "basic": {"usernameKey": "user", "passwordKey": "token"}},
     "rules": [{"methods": ["GET", "HEAD"], "pathPrefixes": ["/"]},
               {"methods": ["POST"], "pathPatterns": ["/*/*/git-upload-pack"]},
               {"methods": ["POST"], "pathPatterns": ["/*/*/info/lfs/objects/batch"], "body": {"operation": ["download"]}}]}
  ]
}`

// readPlacesCase is one raw request in a tunnel and whether the proxy
// may forward it.
type readPlacesCase struct {
	host    string
	method  string
	target  string
	headers string // extra header lines, each ending in \r\n
	body    string
	allowed bool
}

const (
	jsonCT = "Content-Type: application/json\r\n"
	lfsCT  = "Content-Type: application/vnd.git-lfs+json\r\n"
	formCT = "Content-Type: application/x-www-form-urlencoded\r\n"
)

// runReadPlaces sends each case on a tunnel of its own and checks that a
// refused one gets 403 l7-not-allowed and reaches no upstream, and an
// allowed one reaches it once, as sent, with the credential.
func runReadPlaces(t *testing.T, h *harness, tests map[string]readPlacesCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(h.api.seen())
			c, br := h.tlsTunnel(tc.host, tc.host, false)
			defer c.Close()
			framing := ""
			if tc.body != "" {
				framing = fmt.Sprintf("Content-Length: %d\r\n", len(tc.body))
			}
			raw := tc.method + " " + tc.target + " HTTP/1.1\r\nHost: " + tc.host + "\r\n" + tc.headers + framing + "\r\n" + tc.body
			if _, err := io.WriteString(c, raw); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, &http.Request{Method: tc.method})
			if err != nil {
				t.Fatalf("reading response: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got := h.api.seen()[before:]
			if !tc.allowed {
				if resp.StatusCode != http.StatusForbidden || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) {
					t.Fatalf("%s %s: status %d %s=%q, want 403 l7-not-allowed", tc.method, tc.target, resp.StatusCode, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
				}
				if len(got) != 0 {
					t.Fatalf("the refused request reached the upstream: %s %s", got[0].Method, got[0].URI)
				}
				return
			}
			if resp.StatusCode != http.StatusOK || len(got) != 1 {
				t.Fatalf("%s %s: status %d, upstream saw %d requests; want 200 and 1 (%s)", tc.method, tc.target, resp.StatusCode, len(got), resp.Header.Get(policy.RefusedHeader))
			}
			if got[0].URI != tc.target || got[0].Body != tc.body {
				t.Fatalf("upstream got %s %q, want %s %q", got[0].URI, got[0].Body, tc.target, tc.body)
			}
			if a := got[0].Header.Get("Authorization"); !strings.Contains(a, canary) && !strings.HasPrefix(a, "Basic ") {
				t.Fatalf("upstream got no credential: %q", a)
			}
		})
	}
}

// TestServerQueryStringOverBody: a body or GraphQL condition is decided on
// the body, and Rails (params puts the query string over the body),
// graphql-ruby's generated controller, express-graphql and GitLab's LFS
// controller read the same names from the query string first. A request
// whose query string, or form-encoded body, carries a name a condition
// of its host decides on is refused, however the name is spelt.
func TestServerQueryStringOverBody(t *testing.T) {
	h := newHarnessConfig(t, catalogRulesConfig)
	const read = `{"query":"query { viewer { login } }"}`
	mutation := url.QueryEscape(`mutation { deleteRepository(input: {repositoryId: "R"}) { clientMutationId } }`)
	const download = `{"operation":"download","objects":[{"oid":"a","size":1}]}`
	const batch = "/acme/widgets.git/info/lfs/objects/batch"
	gql := func(target string) readPlacesCase {
		return readPlacesCase{host: "api.github.com", method: "POST", target: target, headers: jsonCT, body: read}
	}
	lfs := func(target string) readPlacesCase {
		return readPlacesCase{host: "github.com", method: "POST", target: target, headers: lfsCT, body: download}
	}
	tests := map[string]readPlacesCase{
		"graphql query in the body":           {host: "api.github.com", method: "POST", target: "/graphql", headers: jsonCT, body: read, allowed: true},
		"graphql, another parameter":          {host: "api.github.com", method: "POST", target: "/graphql?per_page=1", headers: jsonCT, body: read, allowed: true},
		"lfs download":                        {host: "github.com", method: "POST", target: batch, headers: lfsCT, body: download, allowed: true},
		"rest read with a query string":       {host: "api.github.com", method: "GET", target: "/repos/acme/widgets/issues?state=open&q=query", allowed: true},
		"mutation in the query string":        gql("/graphql?query=" + mutation),
		"operationName and query":             gql("/graphql?operationName=M&query=mutation%20M%20%7B%20x%20%7D"),
		"trailing slash":                      gql("/graphql/?query=" + mutation),
		"operationName alone":                 gql("/graphql?operationName=M"),
		"variables":                           gql("/graphql?variables=%7B%7D"),
		"extensions":                          gql("/graphql?extensions=%7B%7D"),
		"upper case":                          gql("/graphql?QUERY=" + mutation),
		"mixed case":                          gql("/graphql?Query=" + mutation),
		"snake case":                          gql("/graphql?operation_name=M"),
		"array form":                          gql("/graphql?query[]=" + mutation),
		"hash form":                           gql("/graphql?query[a]=" + mutation),
		"encoded array form":                  gql("/graphql?query%5B%5D=" + mutation),
		"percent-encoded name":                gql("/graphql?%71uery=" + mutation),
		"upper-case escape":                   gql("/graphql?%51UERY=" + mutation),
		"second of two":                       gql("/graphql?a=1&query=" + mutation),
		"duplicate":                           gql("/graphql?query=%7Bx%7D&query=" + mutation),
		"semicolon separator":                 gql("/graphql?a=1;query=" + mutation),
		"no value":                            gql("/graphql?query"),
		"leading space":                       gql("/graphql?%20query=" + mutation),
		"plus as space":                       gql("/graphql?+query=" + mutation),
		"long s":                              gql("/graphql?variable%C5%BF=%7B%7D"),
		"NUL after the name":                  gql("/graphql?query%00x=" + mutation),
		"lfs upload in the query string":      lfs(batch + "?operation=upload"),
		"lfs upload, upper case":              lfs(batch + "?Operation=upload"),
		"lfs upload, encoded":                 lfs(batch + "?%6fperation=upload"),
		"lfs upload, array":                   lfs(batch + "?operation[]=upload"),
		"lfs upload on a GET":                 {host: "github.com", method: "GET", target: batch + "?operation=upload"},
		"override name, already refused":      gql("/graphql?_method=DELETE"),
		"form field on an unconditioned rule": {host: "github.com", method: "POST", target: "/acme/widgets.git/git-upload-pack", headers: formCT, body: "operation=upload"},
		"form field, encoded":                 {host: "github.com", method: "POST", target: "/acme/widgets.git/git-upload-pack", headers: formCT, body: "a=1&%6Fperation=upload"},
		"untyped body read as a form":         {host: "github.com", method: "POST", target: "/acme/widgets.git/git-upload-pack", body: "operation=upload"},
		"upload-pack as git sends it":         {host: "github.com", method: "POST", target: "/acme/widgets.git/git-upload-pack", headers: "Content-Type: application/x-git-upload-pack-request\r\n", body: "0000", allowed: true},
	}
	runReadPlaces(t, h, tests)
}

// TestServerGraphQLOverGet: a GraphQL endpoint also takes GET (and HEAD),
// its request in the query string. On a path a GraphQL rule covers, a GET
// or HEAD carries only a query, read from the query string with the
// condition's own strict reader, and no body; the host's GET rule does not
// let a mutation through.
func TestServerGraphQLOverGet(t *testing.T) {
	h := newHarnessConfig(t, catalogRulesConfig)
	esc := url.QueryEscape
	get := func(method, query string) readPlacesCase {
		return readPlacesCase{host: "api.github.com", method: method, target: "/graphql?" + query}
	}
	persisted := esc(`{"persistedQuery":{"version":1,"sha256Hash":"ecf4edb46db40b5132295c0291d62fb65d6759a9eedfa4d5d612dd5ec54a6b38"}}`)
	tests := map[string]readPlacesCase{
		"query":                       {host: "api.github.com", method: "GET", target: "/graphql?query=" + esc(`{ viewer { login } }`), allowed: true},
		"named query and variables":   {host: "api.github.com", method: "GET", target: "/graphql?query=" + esc(`query Q($n: Int) { viewer { login } }`) + "&operationName=Q&variables=" + esc(`{"n":1}`), allowed: true},
		"query, HEAD":                 {host: "api.github.com", method: "HEAD", target: "/graphql?query=" + esc(`{ viewer { login } }`), allowed: true},
		"no GraphQL request":          {host: "api.github.com", method: "GET", target: "/graphql", allowed: true},
		"mutation":                    get("GET", "query="+esc(`mutation { deleteRepository(input: {repositoryId: "R"}) { clientMutationId } }`)),
		"mutation, HEAD":              get("HEAD", "query="+esc(`mutation { x }`)),
		"mutation, trailing slash":    {host: "api.github.com", method: "GET", target: "/graphql/?query=" + esc(`mutation { x }`)},
		"subscription":                get("GET", "query="+esc(`subscription { x }`)),
		"mutation beside a query":     get("GET", "query="+esc(`query Q { a } mutation M { x }`)+"&operationName=Q"),
		"fragment on Mutation":        get("GET", "query="+esc(`{ ...F } fragment F on Mutation { x }`)),
		"persisted query":             get("GET", "extensions="+persisted),
		"persisted query and a doc":   get("GET", "query="+esc(`{ a }`)+"&extensions="+persisted),
		"query twice":                 get("GET", "query="+esc(`{ a }`)+"&query="+esc(`mutation { x }`)),
		"query in upper case":         get("GET", "QUERY="+esc(`mutation { x }`)),
		"query as an array":           get("GET", "query[]="+esc(`mutation { x }`)),
		"semicolon":                   get("GET", "a=1;query="+esc(`mutation { x }`)),
		"malformed escape":            get("GET", "query="+esc(`{ a }`)+"%zz"),
		"variables not JSON":          get("GET", "query="+esc(`{ a }`)+"&variables=x"),
		"not a document":              get("GET", "query=x"),
		"operationName misspelt":      get("GET", "query="+esc(`query Q { a } query R { b }`)+"&operation_name=Q"),
		"mutation in a JSON body":     {host: "api.github.com", method: "GET", target: "/graphql", headers: jsonCT, body: `{"query":"mutation { x }"}`},
		"query in a JSON body":        {host: "api.github.com", method: "GET", target: "/graphql", headers: jsonCT, body: `{"query":"{ a }"}`},
		"body and a query string":     {host: "api.github.com", method: "GET", target: "/graphql?query=" + esc(`{ a }`), headers: jsonCT, body: `{"query":"mutation { x }"}`},
		"mutation in an untyped body": {host: "api.github.com", method: "GET", target: "/graphql", body: `{"query":"mutation { x }"}`},
		"rest read is untouched":      {host: "api.github.com", method: "GET", target: "/repos/acme/widgets", allowed: true},
	}
	runReadPlaces(t, h, tests)
}
