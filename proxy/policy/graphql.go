package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"keyhole.dev/keyhole/proxy/config"
)

// MaxGraphQLTokens bounds the tokens of a GraphQL document the proxy
// parses to check a rule's GraphQL condition; a longer document matches
// no such rule. A read such as gh's issue list is a few hundred tokens;
// the bound keeps the syntax tree of a document inside MaxBodyCheck to a
// few megabytes.
const MaxGraphQLTokens = 10000

// graphQLFields are the top-level fields of a GraphQL-over-HTTP request.
var graphQLFields = []string{"query", "operationName", "variables", "extensions"}

// CheckGraphQL reports whether b satisfies the GraphQL condition g: a
// GraphQL-over-HTTP request, declared and read as CheckBody reads a body
// (one JSON object, declared as uncompressed UTF-8 JSON, no duplicate
// or case-folded names), whose "query" is a GraphQL document every
// operation of which is of a type g lists. It returns nil when it does,
// and an error wrapping ErrBody saying why not.
//
// As with CheckBody, whatever two readers could take differently is
// refused rather than judged:
//
//   - top-level fields other than query, operationName, variables and
//     extensions, spelled exactly, are refused: no server reads them as
//     part of the request, and some read other names;
//   - query must be a string and operationName a string or null;
//     variables and extensions an object or null;
//   - every operation of the document counts, whatever operationName
//     selects: a document holding a mutation is refused even when
//     operationName names its query, since a server that ignores
//     operationName, or picks by another rule, would run the mutation;
//   - with several operations, operationName must name exactly one of
//     them; with one, it is absent, null or that operation's name;
//   - a fragment on the Mutation or Subscription type is refused unless
//     that operation type is allowed: no valid query holds one, and a
//     server that did not validate would run its fields;
//   - the document must hold no control character but tab, line feed
//     and carriage return, no byte order mark and no Unicode line or
//     paragraph separator, which GraphQL lexers disagree on (a comment
//     ended by one to a server but not to the proxy would hide what
//     follows it);
//   - it must parse (github.com/vektah/gqlparser) within
//     MaxGraphQLTokens tokens and its nesting bound;
//   - a persisted query (extensions.persistedQuery) names a stored
//     document the proxy cannot see, and is refused unless
//     g.PersistedQueries allows it; a JSON array of requests (a batch)
//     is refused unless g.Batches allows it, and then each of its
//     requests is held to g.
func CheckGraphQL(g config.GraphQL, b Body) error {
	if err := checkJSONBody(b); err != nil {
		return err
	}
	if first := firstByte(b.Data); first == '[' {
		if !g.Batches {
			return fmt.Errorf("%w: the body is a batch of GraphQL requests, which the rule does not allow", ErrBody)
		}
		reqs, err := jsonArray(b.Data, "GraphQL requests")
		if err != nil {
			return err
		}
		for i, raw := range reqs {
			if err := checkGraphQLRequest(g, raw); err != nil {
				return fmt.Errorf("%w (request %d of the batch)", err, i+1)
			}
		}
		return nil
	}
	return checkGraphQLRequest(g, b.Data)
}

// firstByte is the first byte of data that is not JSON white space.
func firstByte(data []byte) byte {
	for _, c := range data {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// jsonArray reads exactly one non-empty JSON array and returns its
// elements; of names what the elements should be, for the refusal.
func jsonArray(data []byte, of string) ([]json.RawMessage, error) {
	notArray := fmt.Errorf("%w: the body is not one JSON array of %s", ErrBody, of)
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return nil, notArray
	}
	var out []json.RawMessage
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, notArray
		}
		out = append(out, raw)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim(']') {
		return nil, notArray
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notArray
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the body is an empty batch", ErrBody)
	}
	return out, nil
}

// checkGraphQLRequest checks one GraphQL-over-HTTP request object.
func checkGraphQLRequest(g config.GraphQL, data []byte) error {
	fields, err := topLevelFields(data)
	if err != nil {
		if errors.Is(err, errNotObject) {
			return fmt.Errorf("%w: the body is not one JSON object holding a GraphQL request", ErrBody)
		}
		return err
	}
	// In key order, so the refusal is the same every time.
	for _, key := range slices.Sorted(maps.Keys(fields)) {
		f := fields[key]
		if !slices.Contains(graphQLFields, f.name) {
			want := ""
			if i := slices.IndexFunc(graphQLFields, func(n string) bool { return fieldKey(n) == fieldKey(f.name) }); i >= 0 {
				want = fmt.Sprintf("; send it exactly as %q", graphQLFields[i])
			}
			return fmt.Errorf("%w: the body has a field %q, which is not one of a GraphQL request's (%s)%s", ErrBody, Clip(f.name), strings.Join(graphQLFields, ", "), want)
		}
	}
	for _, name := range []string{"variables", "extensions"} {
		if f, ok := fields[fieldKey(name)]; ok && !jsonObjectOrNull(f.raw) {
			return fmt.Errorf("%w: the body's field %q is neither an object nor null", ErrBody, name)
		}
	}
	persisted, err := persistedQuery(fields)
	if err != nil {
		return err
	}
	if persisted {
		if !g.PersistedQueries {
			return fmt.Errorf("%w: the body is a persisted query (extensions.persistedQuery), whose document the proxy cannot see; the rule does not allow persisted queries", ErrBody)
		}
		return nil
	}
	q, ok := fields[fieldKey("query")]
	switch {
	case !ok:
		return fmt.Errorf("%w: the body has no field \"query\" holding a GraphQL document", ErrBody)
	case !q.isString:
		return fmt.Errorf("%w: the body's field \"query\" is not a string", ErrBody)
	}
	opName, hasName := "", false
	if f, ok := fields[fieldKey("operationName")]; ok && !isJSONNull(f.raw) {
		if !f.isString {
			return fmt.Errorf("%w: the body's field \"operationName\" is neither a string nor null", ErrBody)
		}
		opName, hasName = f.value, true
	}
	return checkGraphQLDocument(g, q.value, opName, hasName)
}

// persistedQuery reports whether the request's extensions name a
// persisted query, under any spelling a case-folding reader would take
// as persistedQuery.
func persistedQuery(fields map[string]field) (bool, error) {
	f, ok := fields[fieldKey("extensions")]
	if !ok || isJSONNull(f.raw) {
		return false, nil
	}
	ext, err := topLevelFields(f.raw)
	if err != nil {
		return false, fmt.Errorf("%w: the body's extensions are not one unambiguous JSON object", ErrBody)
	}
	_, ok = ext[fieldKey("persistedQuery")]
	return ok, nil
}

// checkGraphQLDocument parses doc and checks its operations against g.
func checkGraphQLDocument(g config.GraphQL, doc, opName string, hasName bool) error {
	if err := graphQLText(doc); err != nil {
		return err
	}
	parsed, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: doc}, MaxGraphQLTokens)
	if err != nil {
		return fmt.Errorf("%w: the query is not a GraphQL document the proxy can read: %s", ErrBody, Clip(strings.ReplaceAll(err.Error(), "\n", " ")))
	}
	if len(parsed.Operations) == 0 {
		return fmt.Errorf("%w: the query holds no operation", ErrBody)
	}
	names := map[string]bool{}
	for _, op := range parsed.Operations {
		if !slices.Contains(g.Operations, string(op.Operation)) {
			return fmt.Errorf("%w: the query holds a %s, which the rule does not allow (it allows %s), whatever operationName selects", ErrBody, op.Operation, strings.Join(g.Operations, ", "))
		}
		if op.Name != "" {
			if names[op.Name] {
				return fmt.Errorf("%w: the query names two operations %q", ErrBody, Clip(op.Name))
			}
			names[op.Name] = true
		}
	}
	if t, ok := rootFragment(g, parsed); ok {
		return fmt.Errorf("%w: the query holds a fragment on %s, which no allowed operation reads", ErrBody, t)
	}
	switch {
	case hasName && !names[opName]:
		return fmt.Errorf("%w: operationName %q names no operation of the query", ErrBody, Clip(opName))
	case hasName && len(parsed.Operations) > 1 && len(names) != len(parsed.Operations):
		return fmt.Errorf("%w: the query holds an unnamed operation beside others", ErrBody)
	case !hasName && len(parsed.Operations) > 1:
		return fmt.Errorf("%w: the query holds %d operations and the body no operationName to select one", ErrBody, len(parsed.Operations))
	}
	return nil
}

// graphQLText refuses characters GraphQL lexers read differently: C0 and
// C1 controls but tab, line feed and carriage return; DEL; the byte order
// mark; the Unicode line and paragraph separators.
func graphQLText(doc string) error {
	for _, r := range doc {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			return fmt.Errorf("%w: the query holds a control character (U+%04X)", ErrBody, r)
		case r == 0xfeff || r == 0x2028 || r == 0x2029 || r == utf8.RuneError:
			return fmt.Errorf("%w: the query holds U+%04X, which GraphQL readers take differently", ErrBody, r)
		}
	}
	return nil
}

// rootFragment finds a fragment (named or inline) whose type condition is
// the conventional root type of an operation type g does not allow.
func rootFragment(g config.GraphQL, doc *ast.QueryDocument) (string, bool) {
	refused := map[string]bool{}
	if !slices.Contains(g.Operations, config.GraphQLMutation) {
		refused["Mutation"] = true
	}
	if !slices.Contains(g.Operations, config.GraphQLSubscription) {
		refused["Subscription"] = true
	}
	if len(refused) == 0 {
		return "", false
	}
	for _, f := range doc.Fragments {
		if refused[f.TypeCondition] {
			return f.TypeCondition, true
		}
		if t, ok := inlineRoot(refused, f.SelectionSet); ok {
			return t, true
		}
	}
	for _, op := range doc.Operations {
		if t, ok := inlineRoot(refused, op.SelectionSet); ok {
			return t, true
		}
	}
	return "", false
}

// inlineRoot walks a selection set for an inline fragment on a refused
// type. The parser bounds the nesting, so the recursion is bounded too.
func inlineRoot(refused map[string]bool, set ast.SelectionSet) (string, bool) {
	for _, s := range set {
		switch s := s.(type) {
		case *ast.Field:
			if t, ok := inlineRoot(refused, s.SelectionSet); ok {
				return t, true
			}
		case *ast.InlineFragment:
			if refused[s.TypeCondition] {
				return s.TypeCondition, true
			}
			if t, ok := inlineRoot(refused, s.SelectionSet); ok {
				return t, true
			}
		}
	}
	return "", false
}

func isJSONNull(raw json.RawMessage) bool { return string(raw) == "null" }

func jsonObjectOrNull(raw json.RawMessage) bool {
	return isJSONNull(raw) || len(raw) > 0 && raw[0] == '{'
}
