package policy

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"keyhole.dev/keyhole/proxy/config"
)

// catalogGitHub is the proxy config the catalog's read-only github
// connector renders: reads by GET and HEAD, git's upload-pack, Git LFS
// batch downloads, GraphQL queries.
func catalogGitHub() *config.Config {
	inject := config.Inject{Secret: "gh", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}}
	return &config.Config{APIVersion: config.APIVersion, Kind: config.Kind, Sandbox: config.SandboxRef{Namespace: "agents", Name: "coder"},
		Hosts: []config.Host{
			{Name: "api.github.com", Connection: "github", Inject: inject, Rules: []config.Rule{
				{Methods: []string{"GET", "HEAD"}, PathPrefixes: []string{"/"}},
				{Methods: []string{"POST"}, PathPatterns: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{"query"}}},
			}},
			{Name: "github.com", Connection: "github", Inject: inject, Rules: []config.Rule{
				{Methods: []string{"GET", "HEAD"}, PathPrefixes: []string{"/"}},
				{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/git-upload-pack"}},
				{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/info/lfs/objects/batch"}, Body: map[string][]string{"operation": {"download"}}},
			}},
		}}
}

func catalogPolicy(t testing.TB) *Policy {
	t.Helper()
	p, err := NewPolicy(catalogGitHub())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// catalogReq is a request in a tunnel to host, Host and SNI agreeing.
func catalogReq(host, method, target string, body string, contentType ...string) RequestInfo {
	return RequestInfo{Kind: KindTunnel, Method: method, Target: target, ConnectHost: host + ":443", SNI: host, Host: host,
		Body: []byte(body), BodyComplete: true, ContentType: contentType}
}

// BenchmarkDecideCatalog decides the requests the catalog's github
// connector sees most: REST reads with a query string, a GraphQL query,
// a Git LFS download batch.
func BenchmarkDecideCatalog(b *testing.B) {
	p := catalogPolicy(b)
	cases := map[string]RequestInfo{
		"rest read": catalogReq("api.github.com", "GET", "/repos/acme/widgets/issues?state=open&per_page=100", ""),
		"graphql":   catalogReq("api.github.com", "POST", "/graphql", `{"query":"query { viewer { login } }"}`, "application/json"),
		"lfs":       catalogReq("github.com", "POST", "/acme/widgets.git/info/lfs/objects/batch", `{"operation":"download","objects":[]}`, "application/vnd.git-lfs+json"),
	}
	for name, req := range cases {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if d := p.Decide(req); !d.Allowed() {
					b.Fatal(d)
				}
			}
		})
	}
}

// nameSpellings are the ways a parameter name can reach a framework that
// reads it as name: letter case, '_' and '-', PHP's and Rails' array and
// hash forms, percent-encoding (one byte, every byte, upper- and
// lower-case hex), '+' and leading spaces, a NUL and what follows.
func nameSpellings(name string) map[string]string {
	pct := func(s string, upper bool) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if upper {
				fmt.Fprintf(&b, "%%%02X", s[i])
			} else {
				fmt.Fprintf(&b, "%%%02x", s[i])
			}
		}
		return b.String()
	}
	snake := func(s string) string {
		var b strings.Builder
		for i, r := range s {
			if unicode.IsUpper(r) && i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		}
		return b.String()
	}
	swapped := strings.Map(func(r rune) rune {
		switch r {
		case '-':
			return '_'
		case '_':
			return '-'
		}
		return r
	}, name)
	out := map[string]string{
		"as is":               name,
		"separators swapped":  swapped,
		"upper case":          strings.ToUpper(name),
		"lower case":          strings.ToLower(name),
		"title case":          strings.ToUpper(name[:1]) + name[1:],
		"underscores as dots": strings.ReplaceAll(name, "_", "."),
		"array":               name + "[]",
		"array, encoded":      name + "%5B%5D",
		"hash":                name + "[a]",
		"index":               name + "[0]",
		"bracketed":           "[" + name + "]",
		"dotted child":        name + ".a",
		"first byte encoded":  pct(name[:1], false) + name[1:],
		"last byte encoded":   name[:len(name)-1] + pct(name[len(name)-1:], true),
		"every byte":          pct(name, true),
		"every byte, lower":   pct(name, false),
		"plus before":         "+" + name,
		"space before":        "%20" + name,
		"NUL after":           name + "%00x",
		"long s for s":        strings.ReplaceAll(name, "s", "%C5%BF"),
		"fullwidth first":     url.QueryEscape(string(rune(0xFF00+int(lowerASCII(name[0]))-0x20))) + name[1:],
	}
	if !strings.ContainsAny(name, "-_") {
		// A camelCase name, as snake_case and kebab-case binders read it.
		out["snake case"] = snake(name)
		out["kebab case"] = strings.ReplaceAll(snake(name), "_", "-")
	}
	return out
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// TestDecidedNamesRefusedEverywhere is the property over every name a
// condition decides on and every override name read from a query: in
// every spelling, at every place in a query string, on a request its
// body would otherwise let through, the request is refused; and the same
// spellings in a form body are refused as well.
func TestDecidedNamesRefusedEverywhere(t *testing.T) {
	p := catalogPolicy(t)
	names := []string{"query", "operationName", "variables", "extensions", "operation"}
	for _, o := range Overrides() {
		if o.In&InQuery != 0 {
			names = append(names, o.Name)
		}
	}
	placements := map[string]func(param string) string{
		"alone":             func(p string) string { return p },
		"after another":     func(p string) string { return "a=1&" + p },
		"before another":    func(p string) string { return p + "&a=1" },
		"after a semicolon": func(p string) string { return "a=1;" + p },
		"after an empty":    func(p string) string { return "&&" + p },
		"twice":             func(p string) string { return p + "&" + p },
	}
	requests := map[string]func(query string) RequestInfo{
		"graphql": func(q string) RequestInfo {
			return catalogReq("api.github.com", "POST", "/graphql?"+q, `{"query":"{ viewer { login } }"}`, "application/json")
		},
		"lfs": func(q string) RequestInfo {
			return catalogReq("github.com", "POST", "/acme/widgets.git/info/lfs/objects/batch?"+q, `{"operation":"download"}`, "application/vnd.git-lfs+json")
		},
	}
	for reqName, req := range requests {
		if d := p.Decide(req("a=1")); !d.Allowed() {
			t.Fatalf("%s: the request without the name is refused: %s", reqName, d.Message)
		}
	}
	for _, name := range names {
		for spelling, sent := range nameSpellings(name) {
			if spelling == "dotted child" && !slices.Contains(graphQLFields, name) && name != "operation" {
				continue // an override read as an object names no method
			}
			for where, place := range placements {
				for _, value := range []string{"=x", "", "="} {
					q := place(sent + value)
					for reqName, req := range requests {
						if name == "operation" && reqName == "graphql" || slices.Contains(graphQLFields, name) && reqName == "lfs" {
							continue // another host's condition
						}
						if d := p.Decide(req(q)); d.Allowed() {
							t.Errorf("%s, %s, %s: %s?%s allowed", name, spelling, where, reqName, q)
						}
					}
					// The same in a form body, on a route no condition
					// covers.
					form := catalogReq("github.com", "POST", "/acme/widgets.git/git-upload-pack", q, "application/x-www-form-urlencoded")
					if slices.Contains(graphQLFields, name) {
						continue // not a name of github.com's conditions
					}
					if d := p.Decide(form); d.Allowed() {
						t.Errorf("%s, %s, %s: form body %q allowed", name, spelling, where, q)
					}
				}
			}
		}
	}
}

// TestCatalogRenderReadPlaces decides on the proxy config keyhole renders
// for the catalog's read-only github connector (the agent-sandbox
// example's golden render): its GraphQL rule, declared for POST, holds
// GET and HEAD to /graphql to queries too, and its body conditions are
// not passed by what a query string says.
func TestCatalogRenderReadPlaces(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "..", "golden", "agent-sandbox", "agents", "support-daytona", "proxy.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	esc := url.QueryEscape
	const read = `{"query":"query { viewer { login } }"}`
	tests := map[string]struct {
		req     RequestInfo
		allowed bool
	}{
		"GraphQL query by POST":        {req: catalogReq("api.github.com", "POST", "/graphql", read, "application/json"), allowed: true},
		"GraphQL query by GET":         {req: catalogReq("api.github.com", "GET", "/graphql?query="+esc("{ viewer { login } }"), ""), allowed: true},
		"REST read":                    {req: catalogReq("api.github.com", "GET", "/repos/acme/widgets/issues?state=open", ""), allowed: true},
		"LFS download":                 {req: catalogReq("github.com", "POST", "/acme/widgets.git/info/lfs/objects/batch", `{"operation":"download"}`, "application/vnd.git-lfs+json"), allowed: true},
		"mutation in the query string": {req: catalogReq("api.github.com", "POST", "/graphql?query="+esc("mutation { x }"), read, "application/json")},
		"mutation by GET":              {req: catalogReq("api.github.com", "GET", "/graphql?query="+esc("mutation { x }"), "")},
		"subscription by HEAD":         {req: catalogReq("api.github.com", "HEAD", "/graphql?query="+esc("subscription { x }"), "")},
		"persisted query by GET":       {req: catalogReq("api.github.com", "GET", "/graphql?extensions="+esc(`{"persistedQuery":{"version":1,"sha256Hash":"00"}}`), "")},
		"mutation in a GET body":       {req: catalogReq("api.github.com", "GET", "/graphql", `{"query":"mutation { x }"}`, "application/json")},
		"LFS upload in the query":      {req: catalogReq("github.com", "POST", "/acme/widgets.git/info/lfs/objects/batch?operation=upload", `{"operation":"download"}`, "application/vnd.git-lfs+json")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := p.Decide(tc.req)
			if d.Allowed() != tc.allowed {
				t.Fatalf("Decide = %s %s (%s), want allowed %v", d.Action, d.Reason, d.Message, tc.allowed)
			}
			if !tc.allowed && (d.Reason != ReasonL7NotAllowed || strings.ContainsAny(d.Message, "\r\n")) {
				t.Fatalf("refusal %s %q", d.Reason, d.Message)
			}
		})
	}
}

// checkReadPlaces holds one decision of p to what a condition decides
// on being all the upstream reads, with readers apart from the policy's:
// a request refused whatever its body is refused with it; a request
// allowed in a tunnel has, in its query string as Go's parser and Rack
// (which also splits on ';') read it, and in a form body, no parameter
// that a case-insensitive, snake_case or array-reading binder takes for
// a name its host's conditions decide on, unless it is a GET or HEAD to
// a GraphQL path, which has no body and whose query string holds, if
// anything, one query document, parsed by gqlparser alone, of queries.
func checkReadPlaces(t *testing.T, p *Policy, req RequestInfo) {
	t.Helper()
	d := p.Decide(req)
	if pre, refused := p.RefusedWhateverBody(req); refused && d.Allowed() {
		t.Fatalf("refused before its body (%s) but allowed with it: %+v", pre.Message, req)
	}
	if !d.Allowed() || req.Kind != KindTunnel {
		return
	}
	hp := p.Host(d.Host)
	path, _ := TargetPath(req.Target)
	_, query, _ := strings.Cut(req.Target, "?")
	binderKey := func(name string) string {
		if i := strings.IndexByte(name, '['); i >= 0 {
			name = name[:i]
		}
		return strings.NewReplacer("_", "", "-", "", ".", "", " ", "").Replace(strings.ToLower(strings.TrimSpace(name)))
	}
	decided := map[string]bool{}
	for _, r := range hp.Rules {
		for f := range r.Body {
			decided[binderKey(f)] = true
		}
		if r.GraphQL != nil {
			for _, f := range graphQLFields {
				decided[binderKey(f)] = true
			}
		}
	}
	params := func(s string) map[string][]string {
		out := map[string][]string{}
		for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '&' || r == ';' }) {
			v, err := url.ParseQuery(part)
			if err != nil {
				continue
			}
			for k, vs := range v {
				out[k] = append(out[k], vs...)
			}
		}
		return out
	}
	graphQLGet := false
	for _, r := range hp.Rules {
		if r.GraphQL != nil && pathCovered(r, path) && (req.Method == "GET" || req.Method == "HEAD") {
			graphQLGet = true
		}
	}
	if graphQLGet {
		if len(req.Body) > 0 {
			t.Fatalf("allowed a %s with a body to a GraphQL path: %q", req.Method, req.Body)
		}
		for k, vs := range params(query) {
			if !decided[binderKey(k)] {
				continue
			}
			if !slices.Contains(graphQLFields, k) || len(vs) != 1 {
				t.Fatalf("allowed %q, whose parameter %q a binder reads as a GraphQL field", req.Target, k)
			}
			if k != "query" {
				continue
			}
			doc, err := parser.ParseQuery(&ast.Source{Input: vs[0]})
			if err != nil {
				t.Fatalf("allowed %q, whose query does not parse: %v", req.Target, err)
			}
			for _, op := range doc.Operations {
				if op.Operation != ast.Query {
					t.Fatalf("allowed %q, which holds a %s", req.Target, op.Operation)
				}
			}
		}
		return
	}
	for k := range params(query) {
		if decided[binderKey(k)] {
			t.Fatalf("allowed %q, whose parameter %q a binder reads as a name a condition decides on", req.Target, k)
		}
	}
	if form, _, _, _, _ := bodyKinds(req.ContentType); form {
		for k := range params(string(req.Body)) {
			if decided[binderKey(k)] {
				t.Fatalf("allowed the form body %q, whose field %q a binder reads as a name a condition decides on", req.Body, k)
			}
		}
	}
}
