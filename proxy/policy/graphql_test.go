package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"

	"keyhole.dev/keyhole/proxy/config"
)

// queriesOnly is the condition the read-only GitHub connector sets.
var queriesOnly = config.GraphQL{Operations: []string{"query"}}

// gqlBody is a complete JSON body holding a GraphQL request whose query
// is doc, and the given other fields (JSON values).
func gqlBody(doc string, more ...string) Body {
	q, _ := json.Marshal(doc)
	s := `{"query":` + string(q)
	for i := 0; i+1 < len(more); i += 2 {
		s += `,"` + more[i] + `":` + more[i+1]
	}
	return jsonBody(s + "}")
}

// ghIssueList is the shape of the document gh issue list sends.
const ghIssueList = `query IssueList($owner: String!, $repo: String!, $limit: Int, $endCursor: String, $states: [IssueState!] = OPEN) {
  repository(owner: $owner, name: $repo) {
    hasIssuesEnabled
    issues(first: $limit, after: $endCursor, orderBy: {field: CREATED_AT, direction: DESC}, states: $states) {
      totalCount
      nodes { ...issue }
      pageInfo { hasNextPage endCursor }
    }
  }
}
fragment issue on Issue { number title url state updatedAt labels(first: 100) { nodes { name } } }`

func TestCheckGraphQL(t *testing.T) {
	nested := func(depth int) string {
		return strings.Repeat("{a", depth) + strings.Repeat("}", depth)
	}
	fields := func(n int) string {
		return "{" + strings.Repeat("a ", n) + "}"
	}
	tests := map[string]struct {
		cond config.GraphQL
		body Body
		ok   bool
		// why is part of the refusal's message.
		why string
	}{
		"shorthand query":                 {body: gqlBody(`{ viewer { login } }`), ok: true},
		"named query":                     {body: gqlBody(`query Q { viewer { login } }`), ok: true},
		"gh issue list":                   {body: gqlBody(ghIssueList, "variables", `{"owner":"acme","repo":"widgets","limit":30}`), ok: true},
		"operationName selects":           {body: gqlBody(`query A { a } query B { b }`, "operationName", `"B"`), ok: true},
		"operationName null":              {body: gqlBody(`query A { a }`, "operationName", `null`), ok: true},
		"operationName of the one":        {body: gqlBody(`query A { a }`, "operationName", `"A"`), ok: true},
		"variables null":                  {body: gqlBody(`{ a }`, "variables", `null`), ok: true},
		"extensions without persisted":    {body: gqlBody(`{ a }`, "extensions", `{"tracing":true}`), ok: true},
		"aliases":                         {body: gqlBody(`{ mutation: viewer { createIssue: login } }`), ok: true},
		"field named mutation":            {body: gqlBody(`query { mutation subscription }`), ok: true},
		"operation named mutation":        {body: gqlBody(`query mutation { a }`), ok: true},
		"fragments":                       {body: gqlBody(`query { ...F ... on Query { b } } fragment F on Query { a }`), ok: true},
		"comments":                        {body: gqlBody("# mutation { deleteRepository }\n{ a }"), ok: true},
		"__typename":                      {body: gqlBody(`{ __typename }`), ok: true},
		"string holding mutation":         {body: gqlBody(`{ search(query: "mutation { x }") { a } }`), ok: true},
		"block string holding mutation":   {body: gqlBody(`{ search(query: """ \""" mutation { x } """) { a } }`), ok: true},
		"unicode escapes in JSON":         {body: jsonBody(`{"query":"\u007b a \u007d"}`), ok: true},
		"escaped field name":              {body: jsonBody(`{"\u0071uery":"{ a }"}`), ok: true},
		"non-ASCII in a string":           {body: gqlBody(`{ search(query: "日本 ☃") { a } }`), ok: true},
		"deep nesting within the bound":   {body: gqlBody(nested(500)), ok: true},
		"many fields within the bound":    {body: gqlBody(fields(MaxGraphQLTokens - 3)), ok: true},
		"mutation allowed":                {cond: config.GraphQL{Operations: []string{"query", "mutation"}}, body: gqlBody(`mutation { a }`), ok: true},
		"fragment on Mutation allowed":    {cond: config.GraphQL{Operations: []string{"query", "mutation"}}, body: gqlBody(`mutation { ...F } fragment F on Mutation { a }`), ok: true},
		"batch allowed":                   {cond: config.GraphQL{Operations: []string{"query"}, Batches: true}, body: jsonBody(`[{"query":"{ a }"},{"query":"query B { b }"}]`), ok: true},
		"persisted allowed":               {cond: config.GraphQL{Operations: []string{"query"}, PersistedQueries: true}, body: jsonBody(`{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"ab"}}}`), ok: true},
		"mutation":                        {body: gqlBody(`mutation { deleteRepository(input: {}) { a } }`), why: "holds a mutation"},
		"subscription":                    {body: gqlBody(`subscription { a }`), why: "holds a subscription"},
		"mutation in a second operation":  {body: gqlBody(`query A { a } mutation B { b }`, "operationName", `"A"`), why: "holds a mutation"},
		"mutation first":                  {body: gqlBody(`mutation B { b } query A { a }`, "operationName", `"A"`), why: "holds a mutation"},
		"mutation, no operationName":      {body: gqlBody(`query A { a } mutation B { b }`), why: "holds a mutation"},
		"mutation behind comment CR":      {body: gqlBody("# x\rmutation { a }"), why: "holds a mutation"},
		"operationName mismatch":          {body: gqlBody(`query A { a }`, "operationName", `"B"`), why: "names no operation"},
		"operationName of none of two":    {body: gqlBody(`query A { a } query B { b }`, "operationName", `"C"`), why: "names no operation"},
		"operationName for anonymous":     {body: gqlBody(`{ a }`, "operationName", `"A"`), why: "names no operation"},
		"two operations, no name":         {body: gqlBody(`query A { a } query B { b }`), why: "no operationName"},
		"anonymous beside named":          {body: gqlBody(`{ a } query B { b }`, "operationName", `"B"`), why: "unnamed operation"},
		"duplicate operation name":        {body: gqlBody(`query A { a } query A { b }`, "operationName", `"A"`), why: "two operations"},
		"operationName a number":          {body: gqlBody(`query A { a }`, "operationName", `1`), why: "neither a string nor null"},
		"fragment on Mutation":            {body: gqlBody(`query { ...F } fragment F on Mutation { deleteRepository { a } }`), why: "fragment on Mutation"},
		"inline fragment on Mutation":     {body: gqlBody(`query { a { ... on Mutation { b } } }`), why: "fragment on Mutation"},
		"inline fragment on Subscription": {body: gqlBody(`{ ... on Subscription { b } }`), why: "fragment on Subscription"},
		"only fragments":                  {body: gqlBody(`fragment F on Query { a }`), why: "no operation"},
		"empty document":                  {body: gqlBody(``), why: "no operation"},
		"does not parse":                  {body: gqlBody(`{ a `), why: "not a GraphQL document"},
		"schema definition":               {body: gqlBody(`type Mutation { a: Int }`), why: "not a GraphQL document"},
		"too deep":                        {body: gqlBody(nested(1001)), why: "nesting depth"},
		"too many tokens":                 {body: gqlBody(fields(MaxGraphQLTokens)), why: "not a GraphQL document"},
		"NUL in document":                 {body: gqlBody("{ a }\x00mutation { b }"), why: "control character"},
		"vertical tab":                    {body: gqlBody("{ a }\vmutation { b }"), why: "control character"},
		"NEL":                             {body: gqlBody("# c\u0085mutation { b }\n{ a }"), why: "control character"},
		"line separator":                  {body: gqlBody("# c\u2028mutation { b }\n{ a }"), why: "U+2028"},
		"paragraph separator":             {body: gqlBody("# c\u2029mutation { b }\n{ a }"), why: "U+2029"},
		"byte order mark":                 {body: gqlBody("\ufeff{ a }"), why: "U+FEFF"},
		"escaped lone surrogate":          {body: jsonBody(`{"query":"{ a } \ud800"}`), why: "U+FFFD"},
		"no query":                        {body: jsonBody(`{"variables":{}}`), why: "no field \"query\""},
		"query not a string":              {body: jsonBody(`{"query":{"a":1}}`), why: "not a string"},
		"query null":                      {body: jsonBody(`{"query":null}`), why: "not a string"},
		"variables a string":              {body: gqlBody(`{ a }`, "variables", `"x"`), why: "neither an object nor null"},
		"extensions an array":             {body: gqlBody(`{ a }`, "extensions", `[]`), why: "neither an object nor null"},
		"unknown field":                   {body: gqlBody(`{ a }`, "mutation", `"{ b }"`), why: "not one of a GraphQL request's"},
		"method override field":           {body: gqlBody(`{ a }`, "_method", `"DELETE"`), why: "not one of a GraphQL request's"},
		"query in other case":             {body: jsonBody(`{"Query":"{ a }"}`), why: `send it exactly as "query"`},
		"duplicate query":                 {body: jsonBody(`{"query":"{ a }","query":"mutation { b }"}`), why: "twice"},
		"duplicate query, case":           {body: jsonBody(`{"query":"{ a }","QUERY":"mutation { b }"}`), why: "take as one"},
		"query with long s":               {body: jsonBody(`{"query":"{ a }","ſuery":"mutation { b }"}`), why: "not printable ASCII"},
		"operation_name snake":            {body: jsonBody(`{"query":"query A { a } mutation B { b }","operationName":"A","operation_name":"B"}`), why: "take as one"},
		"persisted query":                 {body: jsonBody(`{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"ab"}}}`), why: "persisted query"},
		"persisted beside query":          {body: gqlBody(`{ a }`, "extensions", `{"persistedQuery":{"version":1,"sha256Hash":"ab"}}`), why: "persisted query"},
		"persisted in other case":         {body: gqlBody(`{ a }`, "extensions", `{"PersistedQuery":{}}`), why: "persisted query"},
		"extensions ambiguous":            {body: gqlBody(`{ a }`, "extensions", `{"a":1,"a":2}`), why: "extensions"},
		"batch":                           {body: jsonBody(`[{"query":"{ a }"}]`), why: "batch"},
		"batch with a mutation":           {cond: config.GraphQL{Operations: []string{"query"}, Batches: true}, body: jsonBody(`[{"query":"{ a }"},{"query":"mutation { b }"}]`), why: "request 2 of the batch"},
		"empty batch":                     {cond: config.GraphQL{Operations: []string{"query"}, Batches: true}, body: jsonBody(`[]`), why: "empty batch"},
		"batch then garbage":              {cond: config.GraphQL{Operations: []string{"query"}, Batches: true}, body: jsonBody(`[{"query":"{ a }"}] x`), why: "not one JSON array"},
		"batch of strings":                {cond: config.GraphQL{Operations: []string{"query"}, Batches: true}, body: jsonBody(`["{ a }"]`), why: "not one JSON object"},
		"two objects":                     {body: jsonBody(`{"query":"{ a }"}{"query":"mutation { b }"}`), why: "not one JSON object"},
		"not JSON":                        {body: jsonBody(`query { a }`), why: "not one JSON object"},
		"form typed":                      {body: Body{Data: []byte(`{"query":"{ a }"}`), Complete: true, ContentType: []string{"application/x-www-form-urlencoded"}}, why: "Content-Type"},
		"graphql typed":                   {body: Body{Data: []byte(`{ a }`), Complete: true, ContentType: []string{"application/graphql"}}, why: "Content-Type"},
		"no type":                         {body: Body{Data: []byte(`{"query":"{ a }"}`), Complete: true}, why: "Content-Type"},
		"gzip":                            {body: Body{Data: []byte(`{"query":"{ a }"}`), Complete: true, ContentType: []string{"application/json"}, ContentEncoding: []string{"gzip"}}, why: "Content-Encoding"},
		"cut at the read limit":           {body: Body{Data: []byte(`{"query":"{ a }"`), ContentType: []string{"application/json"}}, why: "longer than"},
		"invalid UTF-8":                   {body: jsonBody("{\"query\":\"{ a } \xff\"}"), why: "UTF-8"},
		"no body":                         {body: Body{Complete: true, ContentType: []string{"application/json"}}, why: "not one JSON object"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cond := tc.cond
			if cond.Operations == nil {
				cond = queriesOnly
			}
			checkVerdict(t, CheckGraphQL(cond, tc.body), tc.ok, tc.why)
		})
	}
}

// TestCheckGraphQLHuge: a document filling the proxy's read limit is
// parsed or refused in bounded time and memory, and the message quotes no
// more than a clip of it.
func TestCheckGraphQLHuge(t *testing.T) {
	tests := map[string]string{
		"one long string":  `{ a(x: "` + strings.Repeat("m", MaxBodyCheck-64) + `") }`,
		"a long comment":   "#" + strings.Repeat("mutation ", (MaxBodyCheck-64)/9) + "\n{ a }",
		"many tokens":      "{" + strings.Repeat("a ", (MaxBodyCheck-64)/2) + "}",
		"unclosed nesting": strings.Repeat("{a", (MaxBodyCheck-64)/2),
	}
	for name, doc := range tests {
		t.Run(name, func(t *testing.T) {
			b := gqlBody(doc)
			if len(b.Data) > MaxBodyCheck {
				t.Fatalf("the test body is %d bytes, over the read limit", len(b.Data))
			}
			err := CheckGraphQL(queriesOnly, b)
			if err != nil && len(err.Error()) > 512 {
				t.Errorf("the refusal is %d bytes long", len(err.Error()))
			}
			if name == "one long string" || name == "a long comment" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
			} else if err == nil {
				t.Error("allowed")
			}
		})
	}
}

// TestCheckGraphQLDeterministic: a body with several faults is refused
// with the same message every time.
func TestCheckGraphQLDeterministic(t *testing.T) {
	b := jsonBody(`{"query":"{ a }","zeta":1,"alpha":2,"mutation":"x","beta":3}`)
	first := CheckGraphQL(queriesOnly, b)
	if first == nil {
		t.Fatal("allowed")
	}
	for range 50 {
		if err := CheckGraphQL(queriesOnly, b); err == nil || err.Error() != first.Error() {
			t.Fatalf("refused with %v, then %v", first, err)
		}
	}
}

// githubRuleConfig is a config that injects a bearer token on
// api.github.com under the one rule.
func githubRuleConfig(rule config.Rule) *config.Config {
	return &config.Config{
		APIVersion: config.APIVersion, Kind: config.Kind, Sandbox: config.SandboxRef{Name: "s"},
		Hosts: []config.Host{{
			Name: "api.github.com", Connection: "github",
			Inject: config.Inject{Secret: "gh", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}},
			Rules:  []config.Rule{rule},
		}},
	}
}

// TestGraphQLRule: a rule with a GraphQL condition matches through
// MatchRule and Decide, and a refusal says why.
func TestGraphQLRule(t *testing.T) {
	rule := config.Rule{Methods: []string{"POST"}, PathPatterns: []string{"/graphql"}, GraphQL: &queriesOnly}
	if !MatchRule(rule, "POST", "/graphql", gqlBody(`{ viewer { login } }`)) {
		t.Error("a query does not match")
	}
	if MatchRule(rule, "POST", "/graphql", gqlBody(`mutation { a }`)) {
		t.Error("a mutation matches")
	}
	p, err := NewPolicy(githubRuleConfig(rule))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Host("api.github.com").NeedsBody() {
		t.Error("a host with a GraphQL rule does not read bodies")
	}
	if d := p.DecideURL("POST", "https://api.github.com/graphql", []byte(`{"query":"{ viewer { login } }"}`)); d.Action != ActionInject {
		t.Errorf("query: %v", d)
	}
	d := p.DecideURL("POST", "https://api.github.com/graphql", []byte(`{"query":"mutation { a }"}`))
	if d.Reason != ReasonL7NotAllowed || !strings.Contains(d.Message, "holds a mutation") {
		t.Errorf("mutation: %v", d)
	}
}

// TestGraphQLConfigValidate: the proxy refuses a config whose GraphQL
// condition names no or an unknown operation type, or sits beside a body
// condition.
func TestGraphQLConfigValidate(t *testing.T) {
	tests := map[string]config.Rule{
		"no operations":   {Methods: []string{"POST"}, PathPrefixes: []string{"/graphql"}, GraphQL: &config.GraphQL{}},
		"unknown type":    {Methods: []string{"POST"}, PathPrefixes: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{"Query"}}},
		"beside a body":   {Methods: []string{"POST"}, PathPrefixes: []string{"/graphql"}, GraphQL: &queriesOnly, Body: map[string][]string{"a": {"b"}}},
		"query and typo":  {Methods: []string{"POST"}, PathPrefixes: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{"query", "mutaton"}}},
		"empty type name": {Methods: []string{"POST"}, PathPrefixes: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{""}}},
	}
	for name, rule := range tests {
		t.Run(name, func(t *testing.T) {
			if err := githubRuleConfig(rule).Validate(); !errors.Is(err, config.ErrInvalid) {
				t.Errorf("Validate = %v, want ErrInvalid", err)
			}
		})
	}
}

// FuzzCheckGraphQL attacks the GraphQL condition with arbitrary bodies
// and content types. A body it accepts for queries only must have been
// declared as JSON and be UTF-8; every JSON reader model must find the
// same query and operationName in it; and a reading of the document
// apart from the parser, token by token, must find no mutation or
// subscription keyword where an operation may start.
func FuzzCheckGraphQL(f *testing.F) {
	for _, s := range []string{
		`{"query":"{ a }"}`, `{"query":"query A { a } mutation B { b }","operationName":"A"}`,
		`{"query":"# c\u2028mutation { b }\n{ a }"}`, `{"query":"{ a }","ſuery":"mutation { b }"}`,
		`{"query":"query { ...F } fragment F on Mutation { a }"}`, `{"query":"{ a(x: \"\"\"\\\"\"\" mutation\"\"\") }"}`,
		`{"extensions":{"persistedQuery":{"version":1}}}`, `[{"query":"{ a }"}]`,
		`{"query":"{ a }","variables":{"query":"mutation { b }"}}`,
	} {
		f.Add([]byte(s), "application/json")
	}
	f.Add([]byte(`{"query":"{ a }"}`), "application/graphql+json; charset=utf-8")
	f.Fuzz(func(t *testing.T, data []byte, contentType string) {
		err := CheckGraphQL(queriesOnly, Body{Data: data, Complete: true, ContentType: []string{contentType}})
		if !allowedJSONBody(t, err, data, contentType) {
			return
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("accepted a body Go does not read as an object: %v", err)
		}
		q, ok := m["query"].(string)
		if !ok {
			t.Fatalf("accepted a body without a string query: %q", data)
		}
		assertReadersFind(t, data, "query", q)
		if name, ok := m["operationName"].(string); ok {
			assertReadersFind(t, data, "operationName", name)
		}
		if kw := operationKeyword(q); kw != "" {
			t.Fatalf("accepted a document a token reading finds a %s in: %q", kw, q)
		}
		doc, err := parser.ParseQuery(&ast.Source{Input: q})
		if err != nil {
			t.Fatalf("accepted a document that does not parse: %v", err)
		}
		for _, op := range doc.Operations {
			if op.Operation != ast.Query {
				t.Fatalf("accepted a %s", op.Operation)
			}
		}
	})
}

// operationKeyword reads a document token by token, apart from the
// parser, and returns "mutation" or "subscription" where one starts a
// definition (at the start, or after a closing brace back at the top
// level, descriptions aside); "" if none does.
func operationKeyword(doc string) string {
	lx := lexer.New(&ast.Source{Input: doc})
	depth, atStart := 0, true
	for {
		tok, err := lx.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			return ""
		}
		switch tok.Kind {
		case lexer.BraceL, lexer.ParenL, lexer.BracketL:
			depth++
			atStart = false
		case lexer.BraceR, lexer.ParenR, lexer.BracketR:
			depth--
			atStart = depth == 0 && tok.Kind == lexer.BraceR
		case lexer.String, lexer.BlockString:
			atStart = atStart && depth == 0
		case lexer.Name:
			if atStart && (tok.Value == "mutation" || tok.Value == "subscription") {
				return tok.Value
			}
			atStart = false
		default:
			atStart = false
		}
	}
}
