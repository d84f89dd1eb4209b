package access

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/access/proptest"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

func plan(hosts []config.Host, passthrough ...string) *config.Config {
	return &config.Config{
		APIVersion: config.APIVersion, Kind: config.Kind,
		Sandbox: config.SandboxRef{Namespace: "agents", Name: "support"},
		Hosts:   hosts, Passthrough: passthrough,
	}
}

func injected(name string, rules ...config.Rule) config.Host {
	return config.Host{
		Name: name, Connection: "github-acme",
		Inject: config.Inject{Secret: "acme-github-token", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}},
		Rules:  rules,
	}
}

var support = Sandbox{Namespace: "agents", Name: "support", Labels: map[string]string{"team": "support"}}

func TestCeilingCheck(t *testing.T) {
	writes := Limit{Hosts: []string{"api.github.com"}, Methods: []string{"POST", "PUT", "PATCH", "DELETE"}, PathPatterns: []string{"/orgs/**"}}
	noMutations := Limit{Hosts: []string{"api.github.com"}, PathPrefixes: []string{"/graphql"}, GraphQL: []string{"mutation"}}
	tests := map[string]struct {
		limit Limit
		cfg   *config.Config
		// want is each violation's request and the rule index that
		// allows it; none when the plan stays under the ceiling.
		want     []string
		wantRule []int
	}{
		"reads only stay under a write limit": {
			limit: writes,
			cfg:   plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"GET", "HEAD"}, PathPrefixes: []string{"/"}})}),
		},
		"a POST rule under /orgs breaks it": {
			limit:    writes,
			cfg:      plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"GET"}, PathPrefixes: []string{"/"}}, config.Rule{Methods: []string{"POST"}, PathPrefixes: []string{"/orgs/acme/members"}})}),
			want:     []string{"POST https://api.github.com/orgs/acme/members"},
			wantRule: []int{1},
		},
		"a POST rule beside /orgs stays under": {
			limit: writes,
			cfg:   plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"POST"}, PathPrefixes: []string{"/repos/acme", "/orgs-old"}})}),
		},
		"no rules allow everything": {
			limit:    writes,
			cfg:      plan([]config.Host{injected("api.github.com")}),
			want:     []string{"POST https://api.github.com/orgs/other"},
			wantRule: []int{-1},
		},
		"a passthrough host allows what the ceiling cannot see": {
			limit:    writes,
			cfg:      plan(nil, "api.github.com"),
			want:     []string{"POST https://api.github.com/orgs/other"},
			wantRule: []int{-1},
		},
		"no credential on a passthrough host holds": {
			limit: Limit{Hosts: []string{"registry.npmjs.org"}, Credential: true},
			cfg:   plan(nil, "registry.npmjs.org"),
		},
		"no credential on an injected host breaks": {
			limit:    Limit{Hosts: []string{"registry.npmjs.org"}, Credential: true},
			cfg:      plan([]config.Host{injected("registry.npmjs.org", config.Rule{Methods: []string{"GET"}, PathPrefixes: []string{"/lodash"}})}),
			want:     []string{"GET https://registry.npmjs.org/lodash"},
			wantRule: []int{0},
		},
		"a host the sandbox does not reach": {
			limit: Limit{Hosts: []string{"example.com"}},
			cfg:   plan([]config.Host{injected("api.github.com")}),
		},
		"a method the rules never forward": {
			limit: Limit{Hosts: []string{"api.github.com"}, Methods: []string{"TRACE", "CONNECT"}},
			cfg:   plan([]config.Host{injected("api.github.com")}),
		},
		"a body value": {
			limit:    Limit{Hosts: []string{"github.com"}, Methods: []string{"POST"}, Body: map[string][]string{"operation": {"upload"}}},
			cfg:      plan([]config.Host{injected("github.com", config.Rule{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/info/lfs/objects/batch"}})}),
			want:     []string{`POST https://github.com/other/other/info/lfs/objects/batch {"operation":"upload"}`},
			wantRule: []int{0},
		},
		"a body value the rule refuses": {
			limit: Limit{Hosts: []string{"github.com"}, Methods: []string{"POST"}, Body: map[string][]string{"operation": {"upload"}}},
			cfg:   plan([]config.Host{injected("github.com", config.Rule{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/info/lfs/objects/batch"}, Body: map[string][]string{"operation": {"download"}}})}),
		},
		"GraphQL queries stay under a limit on mutations' paths only as far as paths go": {
			limit:    Limit{Hosts: []string{"api.github.com"}, Methods: []string{"POST"}, PathPrefixes: []string{"/graphql"}},
			cfg:      plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"POST"}, PathPatterns: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{"query"}}})}),
			want:     []string{`POST https://api.github.com/graphql {"query":"{__typename}"}`},
			wantRule: []int{0},
		},
		"MCP read tools stay under no delete_repo": {
			limit: Limit{Hosts: []string{"api.githubcopilot.com"}, MCPTools: []string{"delete_repo"}},
			cfg: plan([]config.Host{injected("api.githubcopilot.com", config.Rule{Methods: []string{"POST", "GET"}, PathPrefixes: []string{"/mcp"},
				MCP: &config.MCP{Methods: []string{"initialize", "tools/list", "tools/call"}, Tools: []string{"get_issue", "list_issues"}}})}),
		},
		"MCP with every tool breaks no delete_repo": {
			limit: Limit{Hosts: []string{"api.githubcopilot.com"}, MCPTools: []string{"delete_repo"}},
			cfg: plan([]config.Host{injected("api.githubcopilot.com", config.Rule{Methods: []string{"POST"}, PathPrefixes: []string{"/mcp"},
				MCP: &config.MCP{Methods: []string{"tools/call"}}})}),
			want:     []string{`POST https://api.githubcopilot.com/mcp {"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{},"name":"delete_repo"}}`},
			wantRule: []int{0},
		},
		"any POST breaks no delete_repo": {
			limit:    Limit{Hosts: []string{"api.githubcopilot.com"}, MCPTools: []string{"delete_repo"}},
			cfg:      plan([]config.Host{injected("api.githubcopilot.com", config.Rule{Methods: []string{"POST"}, PathPrefixes: []string{"/"}})}),
			want:     []string{`POST https://api.githubcopilot.com/ {"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{},"name":"delete_repo"}}`},
			wantRule: []int{0},
		},
		"query-only GraphQL stays under no mutations": {
			limit: noMutations,
			cfg:   plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"GET"}, PathPrefixes: []string{"/"}}, config.Rule{Methods: []string{"POST"}, PathPatterns: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{"query"}}})}),
		},
		"any POST /graphql breaks no mutations with a mutation": {
			limit:    noMutations,
			cfg:      plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"POST"}, PathPatterns: []string{"/graphql"}})}),
			want:     []string{`POST https://api.github.com/graphql {"query":"mutation{__typename}"}`},
			wantRule: []int{0},
		},
		"a mutation beside a query breaks it": {
			limit:    noMutations,
			cfg:      plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"POST"}, PathPatterns: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{"query", "mutation"}}})}),
			want:     []string{`POST https://api.github.com/graphql {"query":"mutation{__typename}"}`},
			wantRule: []int{0},
		},
		"a persisted query breaks it": {
			limit:    noMutations,
			cfg:      plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"POST"}, PathPatterns: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{"query"}, PersistedQueries: true}})}),
			want:     []string{`POST https://api.github.com/graphql {"extensions":{"persistedQuery":{"sha256Hash":"0000000000000000000000000000000000000000000000000000000000000000","version":1}}}`},
			wantRule: []int{0},
		},
		"a batch of queries stays under": {
			limit: noMutations,
			cfg:   plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"POST"}, PathPatterns: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{"query"}, Batches: true}})}),
		},
		"a GET of /graphql is no GraphQL body": {
			limit: noMutations,
			cfg:   plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"GET"}, PathPrefixes: []string{"/"}})}),
		},
		// A segment rule spelling '/' as %2F stays under a limit on
		// the decoded path only if it reaches nothing there.
		"a scope's documents read as under the scope": {
			limit:    Limit{Hosts: []string{"registry.npmjs.org"}, Methods: []string{"GET"}, PathPrefixes: []string{"/@acme"}},
			cfg:      plan([]config.Host{injected("registry.npmjs.org", config.Rule{Methods: []string{"GET"}, PathPatterns: []string{"/@acme%2F*"}, EncodedSlash: config.EncodedSlashSegment})}),
			want:     []string{"GET https://registry.npmjs.org/@acme%2Fx"},
			wantRule: []int{0},
		},
		"another scope stays under": {
			limit: Limit{Hosts: []string{"registry.npmjs.org"}, Methods: []string{"GET"}, PathPrefixes: []string{"/@acme"}},
			cfg:   plan([]config.Host{injected("registry.npmjs.org", config.Rule{Methods: []string{"GET"}, PathPatterns: []string{"/@other%2F*"}, EncodedSlash: config.EncodedSlashSegment})}),
		},
		"a project spelled with %2F under a limit spelled plainly": {
			limit:    Limit{Hosts: []string{"gitlab.com"}, PathPrefixes: []string{"/api/v4/projects/acme/secret"}},
			cfg:      plan([]config.Host{injected("gitlab.com", config.Rule{Methods: []string{"GET"}, PathPrefixes: []string{"/api/v4/projects/acme%2Fsecret"}, EncodedSlash: config.EncodedSlashSegment})}),
			want:     []string{"GET https://gitlab.com/api/v4/projects/acme%2Fsecret"},
			wantRule: []int{0},
		},
		"a limit spelling %2F covers the path as sent": {
			limit:    Limit{Hosts: []string{"gitlab.com"}, PathPatterns: []string{"/api/v4/projects/acme%2F*/**"}, EncodedSlash: config.EncodedSlashSegment},
			cfg:      plan([]config.Host{injected("gitlab.com", config.Rule{Methods: []string{"GET"}, PathPrefixes: []string{"/api/v4/projects/acme%2Fwidgets"}, EncodedSlash: config.EncodedSlashSegment})}),
			want:     []string{"GET https://gitlab.com/api/v4/projects/acme%2Fwidgets/other"},
			wantRule: []int{0},
		},
		"a websocket rule breaks a no-WebSocket limit": {
			limit:    Limit{Hosts: []string{"api.github.com"}, WebSocket: true},
			cfg:      plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"GET"}, PathPrefixes: []string{"/"}}, config.Rule{Methods: []string{"GET"}, PathPrefixes: []string{"/realtime"}, WebSocket: true})}),
			want:     []string{"GET wss://api.github.com/realtime"},
			wantRule: []int{1},
		},
		"a GET rule stays under a no-WebSocket limit": {
			limit: Limit{Hosts: []string{"api.github.com"}, WebSocket: true},
			cfg:   plan([]config.Host{injected("api.github.com", config.Rule{Methods: []string{"GET"}, PathPrefixes: []string{"/"}})}),
		},
		"another namespace is not selected": {
			limit: Limit{Sandboxes: Selector{Namespace: "other"}, Hosts: []string{"api.github.com"}},
			cfg:   plan([]config.Host{injected("api.github.com")}),
		},
		"a name pattern selects": {
			limit:    Limit{Sandboxes: Selector{Name: "supp*"}, Hosts: []string{"api.github.com"}, Methods: []string{"DELETE"}},
			cfg:      plan([]config.Host{injected("api.github.com")}),
			want:     []string{"DELETE https://api.github.com/"},
			wantRule: []int{-1},
		},
		"a label not on the sandbox": {
			limit: Limit{Sandboxes: Selector{Labels: map[string]string{"team": "platform"}}, Hosts: []string{"api.github.com"}},
			cfg:   plan([]config.Host{injected("api.github.com")}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := Ceiling{Limits: []Limit{tc.limit}}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			vs, undecided, err := c.Check(support, tc.cfg)
			if err != nil || len(undecided) > 0 {
				t.Fatalf("err %v, undecided %v", err, undecided)
			}
			var got []string
			var rules []int
			for _, v := range vs {
				got = append(got, v.Request())
				rules = append(rules, v.Rule)
			}
			if !slices.Equal(got, tc.want) || !slices.Equal(rules, tc.wantRule) {
				t.Errorf("violations %q (rules %v), want %q (rules %v)", got, rules, tc.want, tc.wantRule)
			}
			checkViolations(t, c, tc.cfg, vs)
		})
	}
}

func TestCeilingValidate(t *testing.T) {
	tests := map[string]Limit{
		"no hosts":            {},
		"upper-case host":     {Hosts: []string{"API.github.com"}},
		"default port":        {Hosts: []string{"api.github.com:443"}},
		"lower-case method":   {Hosts: []string{"a.example"}, Methods: []string{"post"}},
		"encoded prefix":      {Hosts: []string{"a.example"}, PathPrefixes: []string{"/a%2Fb"}},
		"bad pattern":         {Hosts: []string{"a.example"}, PathPatterns: []string{"/**/a"}},
		"body without values": {Hosts: []string{"a.example"}, Body: map[string][]string{"a": nil}},
		"bad name pattern":    {Hosts: []string{"a.example"}, Sandboxes: Selector{Name: "a["}},
		"graphql and body":    {Hosts: []string{"a.example"}, Body: map[string][]string{"a": {"b"}}, GraphQL: []string{"mutation"}},
		"graphql, no types":   {Hosts: []string{"a.example"}, GraphQL: []string{}},
		"graphql, bad type":   {Hosts: []string{"a.example"}, GraphQL: []string{"delete"}},
		"graphql, twice":      {Hosts: []string{"a.example"}, GraphQL: []string{"mutation", "mutation"}},
		"mcp, no tools":       {Hosts: []string{"a.example"}, MCPTools: []string{}},
		"mcp and body":        {Hosts: []string{"a.example"}, Body: map[string][]string{"a": {"b"}}, MCPTools: []string{"t"}},
	}
	for name, l := range tests {
		t.Run(name, func(t *testing.T) {
			if err := (Ceiling{Limits: []Limit{l}}).Validate(); !errors.Is(err, config.ErrInvalid) {
				t.Errorf("Validate = %v, want ErrInvalid", err)
			}
		})
	}
}

// checkViolations asserts what every reported violation must satisfy,
// with the proxy's own decision function: the plan allows its request,
// the limit covers it (with a credential, for a Credential limit), and
// the limit selects the sandbox.
func checkViolations(t *testing.T, c Ceiling, cfg *config.Config, vs []Violation) {
	t.Helper()
	p, err := policy.NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		l := c.Limits[v.Limit]
		var body []byte
		if v.Body != "" {
			body = []byte(v.Body)
		}
		d := p.DecideURL(v.Method, v.URL, body)
		if !d.Allowed() || l.Credential && d.Action != policy.ActionInject {
			t.Errorf("violation %s: the plan decides %v", v.Request(), d)
		}
		_, rest, _ := strings.Cut(v.URL, "://")
		path := "/"
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			path = rest[i:]
		}
		if !l.Contains(v.Method, path, body) || !slices.Contains(l.Hosts, v.Host) {
			t.Errorf("violation %s is not covered by limit %s", v.Request(), l.Describe())
		}
		if !l.Sandboxes.Matches(support) {
			t.Errorf("violation of a limit that does not select the sandbox")
		}
	}
}

// TestCeilingProperty: for random ceilings and rule sets, every reported
// violation is proven by the proxy's decision function, and a random
// sample of requests finds none the check missed: a request the plan
// allows and a limit covers has a violation reported for that limit and
// host.
func TestCeilingProperty(t *testing.T) {
	for seed := range uint64(600) {
		ceilingProperty(t, seed, seed*104729+3)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

// FuzzCeiling is TestCeilingProperty driven by the fuzzer's seeds.
func FuzzCeiling(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Fuzz(func(t *testing.T, s1, s2 uint64) { ceilingProperty(t, s1, s2) })
}

var (
	propSegs    = []string{"a", "b", "a-old", "orgs"}
	propMethods = []string{"GET", "HEAD", "POST", "DELETE"}
	propHosts   = []string{"one.example", "two.example"}
)

func randomMatch(rng *rand.Rand) (methods, prefixes, patterns []string, body map[string][]string) {
	methods = proptest.Subset(rng, propMethods)
	for range rng.IntN(3) {
		if rng.IntN(2) == 0 {
			prefixes = append(prefixes, proptest.Path(rng, propSegs, false))
		} else {
			patterns = append(patterns, proptest.Path(rng, propSegs, true))
		}
	}
	if rng.IntN(4) == 0 {
		body = map[string][]string{"operation": {proptest.Pick(rng, []string{"download", "upload"})}}
	}
	return
}

func randomConfig(rng *rand.Rand) *config.Config {
	hosts, pass := proptest.Hosts(rng, propHosts, func(h string) config.Host {
		host := injected(h)
		for range rng.IntN(4) {
			m, pre, pat, body := randomMatch(rng)
			if len(m) == 0 {
				m = []string{proptest.Pick(rng, propMethods)}
			}
			if len(pre) == 0 && len(pat) == 0 {
				pre = []string{proptest.Path(rng, propSegs, false)}
			}
			r := config.Rule{Methods: m, PathPrefixes: pre, PathPatterns: pat, Body: body}
			if body == nil && rng.IntN(5) == 0 {
				r.GraphQL = &config.GraphQL{Operations: randomOperations(rng), PersistedQueries: rng.IntN(4) == 0, Batches: rng.IntN(4) == 0}
			}
			host.Rules = append(host.Rules, r)
		}
		return host
	})
	return plan(hosts, pass...)
}

func randomCeiling(rng *rand.Rand) Ceiling {
	var c Ceiling
	for range 1 + rng.IntN(3) {
		m, pre, pat, body := randomMatch(rng)
		l := Limit{Hosts: []string{proptest.Pick(rng, propHosts)}, Methods: m, PathPrefixes: pre, PathPatterns: pat, Body: body, Credential: rng.IntN(3) == 0}
		if body == nil && rng.IntN(4) == 0 {
			l.GraphQL = randomOperations(rng)
		}
		if rng.IntN(5) == 0 {
			l.Sandboxes.Name = proptest.Pick(rng, []string{"supp*", "other"})
		}
		c.Limits = append(c.Limits, l)
	}
	return c
}

// randomOperations is a non-empty set of GraphQL operation types.
func randomOperations(rng *rand.Rand) []string {
	for {
		if ops := proptest.Subset(rng, config.GraphQLOperations()); len(ops) > 0 {
			return ops
		}
	}
}

func ceilingProperty(t *testing.T, s1, s2 uint64) {
	rng := rand.New(rand.NewPCG(s1, s2))
	cfg, c := randomConfig(rng), randomCeiling(rng)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	vs, undecided, err := c.Check(support, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkViolations(t, c, cfg, vs)
	if len(undecided) > 0 {
		return
	}
	reported := map[[2]string]bool{}
	for _, v := range vs {
		reported[[2]string{c.Limits[v.Limit].Describe(), v.Host}] = true
	}
	p, err := policy.NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bodies := [][]byte{nil, []byte(`{"operation":"download"}`), []byte(`{"operation":"upload"}`), []byte(`{"query":"{ a }"}`), []byte(`{"query":"mutation { a }"}`),
		[]byte(`{"query":"subscription { a }"}`), []byte(`{"query":"query A { a } mutation B { b }","operationName":"A"}`),
		[]byte(`[{"query":"{ a }"},{"query":"mutation { b }"}]`), []byte(`[{"query":"{ a }"}]`),
		[]byte(`{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + strings.Repeat("a", 64) + `"}}}`)}
	for range 300 {
		method := proptest.Pick(rng, append(slices.Clone(propMethods), "PUT", "OPTIONS"))
		host := proptest.Pick(rng, propHosts)
		var segs []string
		for range rng.IntN(5) {
			segs = append(segs, proptest.Pick(rng, append(slices.Clone(propSegs), "z", "other")))
		}
		path := "/" + strings.Join(segs, "/")
		body := proptest.Pick(rng, bodies)
		scheme := proptest.Pick(rng, []string{"https", "https", "http"})
		d := p.DecideURL(method, scheme+"://"+host+path, body)
		for _, l := range c.Limits {
			if !l.Sandboxes.Matches(support) || !slices.Contains(l.Hosts, host) || !l.Contains(method, path, body) {
				continue
			}
			if !d.Allowed() || l.Credential && d.Action != policy.ActionInject {
				continue
			}
			if !reported[[2]string{l.Describe(), host}] {
				cj, _ := json.Marshal(cfg)
				t.Fatalf("%s %s://%s%s %s is allowed (%v) and under limit %s, but no violation was reported\nconfig %s", method, scheme, host, path, body, d, l.Describe(), cj)
			}
		}
	}
}

// TestCeilingUndecided: a host whose rules exceed the class bounds is
// named as unproven, never passed as under the ceiling, and the other
// hosts are still proven.
func TestCeilingUndecided(t *testing.T) {
	wide := config.Rule{Methods: []string{"POST"}, PathPatterns: []string{"/batch"}, Body: map[string][]string{}}
	for i := range 8 {
		wide.Body[string(rune('a'+i))] = []string{"x", "y", "z"}
	}
	cfg := plan([]config.Host{injected("api.github.com", wide), injected("uploads.github.com")})
	c := Ceiling{Limits: []Limit{{Hosts: []string{"api.github.com", "uploads.github.com"}, Methods: []string{"POST"}}}}
	vs, undecided, err := c.Check(support, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(undecided) != 1 || !strings.Contains(undecided[0], "host api.github.com: its rules' body conditions fall into more than 256 classes") {
		t.Errorf("undecided = %q", undecided)
	}
	if len(vs) != 1 || vs[0].Request() != "POST https://uploads.github.com/" {
		t.Errorf("violations = %+v, want the other host's", vs)
	}
}
