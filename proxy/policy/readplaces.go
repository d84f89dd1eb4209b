package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"mime/multipart"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"keyhole.dev/keyhole/proxy/config"
)

// A rule's body or GraphQL condition is decided on the request body, but
// the frameworks behind an API read the same names from other places:
// Rails builds params with the query string over the body (GitLab's Git
// LFS controller decides on params[:operation]), graphql-ruby's generated
// controller reads params[:query], express-graphql reads query,
// operationName and variables from the URL before the body, and a
// GraphQL endpoint takes its whole request in the query string on GET
// (the GraphQL-over-HTTP specification; graphql-http, express-graphql,
// Apollo). What the proxy decided on must be all the upstream reads: so
// on a host whose rules have such conditions, a name one of them decides
// on is refused in the query string and in form fields, wherever a
// framework could read it (decidedNames); and on a path a GraphQL rule
// covers, a GET or HEAD is held to the condition through its query string
// (checkGraphQLQuery).

// decidedNames is the set of names a host's body and GraphQL conditions
// decide on, by paramKey: each Body condition's fields, and a GraphQL
// request's query, operationName, variables and extensions.
type decidedNames map[string]string

// newDecidedNames collects the names rules decide on; nil when none does.
func newDecidedNames(rules []config.Rule) decidedNames {
	var names decidedNames
	add := func(name string) {
		key := paramKey(name)
		if key == "" {
			return // no parameter reads as it
		}
		if names == nil {
			names = decidedNames{}
		}
		if _, ok := names[key]; !ok {
			names[key] = name
		}
	}
	for _, r := range rules {
		for _, field := range slices.Sorted(maps.Keys(r.Body)) {
			add(field)
		}
		if r.GraphQL != nil {
			for _, f := range graphQLFields {
				add(f)
			}
		}
	}
	return names
}

// lookup returns the decided name a parameter or field name (as sent,
// percent-encoded when decode is set) reads as to some framework.
func (n decidedNames) lookup(name string, decode bool) (string, bool) {
	if len(n) == 0 || name == "" {
		return "", false
	}
	if decode {
		name = unescapeLoose(name)
	}
	var buf [64]byte
	d, ok := n[string(appendParamKey(buf[:0], name))] // no allocation for the key
	return d, ok
}

// paramKey is what a parameter name is compared by, spelt as any
// framework could read it: cut at a NUL (C readers, PHP), at the first
// '[' (the array and hash forms "query[]" and "query[a]" of Rails, PHP
// and qs; qs also reads "[query]" as query) and at a '.' after the first
// byte (qs's allowDots reads "query.a" as a field of query), without
// white space, '_', '-' and '.' (PHP reads ' ' and '.' as '_';
// case-insensitive binders such as ASP.NET's, and snake_case ones, read
// operation_name as operationName), in lower case, with
// compatibility forms and letters that fold into ASCII ones ('ſ', the
// Kelvin sign) read as those (foldCompat).
func paramKey(name string) string {
	return string(appendParamKey(nil, name))
}

// appendParamKey appends paramKey(name) to dst.
func appendParamKey(dst []byte, name string) []byte {
	if i := strings.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	if strings.HasPrefix(name, "[") {
		// qs reads "[query]" as query.
		if j := strings.IndexByte(name, ']'); j > 0 {
			name = name[1:j]
		}
	}
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		name = name[:i] // qs with allowDots reads "query.a" as query's a
	}
	name = foldCompat(name)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(name[i:])
			if !unicode.IsSpace(r) {
				dst = append(dst, name[i:i+size]...)
			}
			i += size - 1
			continue
		}
		switch {
		case c == '_' || c == '-' || c == '.' || c == ' ' || c >= '\t' && c <= '\r':
			continue
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// foldCompat returns name with its compatibility forms normalized (NFKC:
// a fullwidth 'ｑ' is 'q') and each letter that folds into an ASCII one
// under Unicode simple case folding ('ſ', the Kelvin sign) replaced by
// it, as case-insensitive binders read names. An ASCII name comes back
// as it is.
func foldCompat(name string) string {
	if isASCII(name) {
		return name
	}
	return strings.Map(func(r rune) rune {
		if r >= utf8.RuneSelf {
			return asciiFold(r)
		}
		return r
	}, norm.NFKC.String(name))
}

// asciiFold returns the ASCII letter r folds into under Unicode simple
// case folding, as Go's EqualFold and Java's equalsIgnoreCase read it, or
// r.
func asciiFold(r rune) rune {
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return f
		}
	}
	return r
}

// unescapeLoose percent-decodes a query or form name once, as the most
// lenient reader does: '+' is a space, a valid escape is decoded, a
// malformed one is kept as sent (Go's reader drops such a parameter,
// others keep it). No reader decodes twice, so "%2571" stays "%71".
func unescapeLoose(s string) string {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && IsHex(s[i+1]) && IsHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// decidedInForm returns the decided name a query string or form-encoded
// body holds, its parameters split on '&' and ';' (Rack splits a query on
// both).
func (n decidedNames) decidedInForm(form string) (string, bool) {
	for name := range formNames(form) {
		if d, ok := n.lookup(name, true); ok {
			return d, true
		}
	}
	return "", false
}

// decidedInBody returns the decided name a complete body holds as a form
// field or a multipart part's name, read as its Content-Type says
// servers could read it (a body with no type is a form to Rack). A body
// declared as JSON is what a condition decides on, and is not looked at
// here.
func (n decidedNames) decidedInBody(b Body) (string, bool) {
	if len(n) == 0 || len(b.Data) == 0 || !b.Complete {
		return "", false
	}
	form, multi, _, _, boundaries := bodyKinds(b.ContentType)
	if form {
		if d, ok := n.decidedInForm(string(b.Data)); ok {
			return d, true
		}
	}
	if multi {
		for _, boundary := range boundaries {
			if boundary == "" {
				continue
			}
			mr := multipart.NewReader(bytes.NewReader(b.Data), boundary)
			for {
				p, err := mr.NextRawPart()
				if err != nil {
					break // overrideInBody refuses a body that does not parse
				}
				_, params, _ := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
				if d, ok := n.lookup(params["name"], false); ok {
					return d, true
				}
			}
		}
	}
	return "", false
}

// graphQLAt returns the GraphQL conditions of the rules whose paths cover
// path, whatever methods they name: a GraphQL endpoint takes GET as well
// as POST, so the condition holds for every method there.
func (h *HostPolicy) graphQLAt(path string) []config.GraphQL {
	var out []config.GraphQL
	for _, r := range h.Rules {
		if r.GraphQL == nil {
			continue
		}
		if pathCovered(r, path) {
			out = append(out, *r.GraphQL)
		}
	}
	return out
}

// pathCovered reports whether path (from TargetPath) lies under one of
// r's path prefixes or matches one of its patterns, as matchRule reads
// them, whatever the method.
func pathCovered(r config.Rule, path string) bool {
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	for _, p := range r.PathPrefixes {
		if MatchPrefix(p, path) {
			return true
		}
	}
	depth := strings.Count(path, "/")
	for _, p := range r.PathPatterns {
		// A pattern without a final "**" matches only paths as deep
		// as itself: most paths are skipped without splitting them.
		if !strings.HasSuffix(p, "/**") && strings.Count(p, "/") != depth {
			continue
		}
		if MatchPattern(p, path) {
			return true
		}
	}
	return false
}

// isSafeMethod reports whether method is GET or HEAD, the methods that
// carry a GraphQL request in the query string.
func isSafeMethod(method string) bool {
	return method == "GET" || method == "HEAD"
}

// checkGraphQLQuery checks the GraphQL request a GET or HEAD carries in
// its query string (rawQuery, without the '?') against one of conds: read
// as the body's GraphQL condition reads a body (CheckGraphQL), its
// operations all queries whatever the condition allows otherwise, since
// a GET must not change anything. A query string holding no GraphQL
// request passes. Whatever readers could take differently is refused: a
// ';' (Rack splits on it, Go's and the WHATWG readers do not), a
// malformed escape or bytes that are not UTF-8, a field twice (readers
// keep the first or the last), and a name a decided name reads as but
// not spelt exactly (Query, query[], operation_name), or another
// condition's name (operation).
func checkGraphQLQuery(conds []config.GraphQL, decided decidedNames, rawQuery string) error {
	if strings.IndexByte(rawQuery, ';') >= 0 {
		return fmt.Errorf("%w: the query string of a GraphQL request holds ';', which servers split on or not", ErrBody)
	}
	fields := map[string]string{}
	for rest := rawQuery; rest != ""; {
		var param string
		param, rest, _ = strings.Cut(rest, "&")
		if param == "" {
			continue
		}
		rawName, rawValue, _ := strings.Cut(param, "=")
		name, err1 := url.QueryUnescape(rawName)
		value, err2 := url.QueryUnescape(rawValue)
		if err1 != nil || err2 != nil || !utf8.ValidString(name) || !utf8.ValidString(value) {
			return fmt.Errorf("%w: the query string of a GraphQL request has a malformed escape or bytes that are not UTF-8", ErrBody)
		}
		if slices.Contains(graphQLFields, name) {
			if _, dup := fields[name]; dup {
				return fmt.Errorf("%w: the query string gives %q twice", ErrBody, name)
			}
			fields[name] = value
			continue
		}
		if d, ok := decided.lookup(rawName, true); ok {
			return fmt.Errorf("%w: the query string has a parameter some servers read as %q; send it exactly as %q, once, or not at all", ErrBody, d, d)
		}
	}
	if len(fields) == 0 {
		return nil
	}
	// The same request as a JSON body, for the body's own reader.
	var b bytes.Buffer
	b.WriteByte('{')
	for _, f := range graphQLFields {
		v, ok := fields[f]
		if !ok {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", f)
		if f == "query" || f == "operationName" { // strings; the others are JSON texts
			s, _ := json.Marshal(v)
			b.Write(s)
			continue
		}
		if !json.Valid([]byte(v)) {
			return fmt.Errorf("%w: the query string's %q is not JSON", ErrBody, f)
		}
		b.WriteString(v)
	}
	b.WriteByte('}')
	var firstErr error
	for _, g := range conds {
		g.Operations = slices.DeleteFunc(slices.Clone(g.Operations), func(op string) bool { return op != config.GraphQLQuery })
		g.Batches = false
		if len(g.Operations) == 0 {
			if firstErr == nil {
				firstErr = fmt.Errorf("%w: a GraphQL request over GET may hold only queries, and the rule allows none", ErrBody)
			}
			continue
		}
		err := checkGraphQLRequest(g, b.Bytes())
		if err == nil {
			return nil
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("%w (the GraphQL request in the query string)", err)
		}
	}
	return firstErr
}
