package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
)

// The policy on what a request to an injected host may be, whatever the
// host's rules say: which methods may carry a credential at all, and
// which headers and query parameters are refused because they make a
// server run another method or path than the one the rules checked. It
// is data, documented row by row in docs/proxy.md, and Decide applies it
// to every request in an intercepted tunnel before the rules.

// MethodRule is one row of the method policy.
type MethodRule struct {
	// Method is the method as sent; methods are case-sensitive, but
	// a row that never carries a credential is matched in any case,
	// since some servers upper-case what they read.
	Method string
	// Credential reports whether a request with this method may carry
	// the credential (subject to the host's rules).
	Credential bool
	// Why is the reason, for docs and refusal messages.
	Why string
}

// MethodPolicy returns the method policy. A method not listed (an
// extension method such as PROPFIND, or a standard one in lower case) is
// forwarded only when a rule of the host names it: a host without rules
// forwards the listed methods whose Credential is true, and no others.
func MethodPolicy() []MethodRule {
	t := methodTable()
	return t[:]
}

// methodTable is the method policy as an array, so that looking a method
// up on every request copies it on the stack instead of allocating.
func methodTable() [10]MethodRule {
	const api = "a method APIs are called with; the host's rules narrow it"
	return [...]MethodRule{
		{Method: http.MethodGet, Credential: true, Why: api},
		{Method: http.MethodHead, Credential: true, Why: api},
		{Method: http.MethodPost, Credential: true, Why: api},
		{Method: http.MethodPut, Credential: true, Why: api},
		{Method: http.MethodPatch, Credential: true, Why: api},
		{Method: http.MethodDelete, Credential: true, Why: api},
		{Method: http.MethodOptions, Credential: true, Why: api + " (never with the * target, which names no path)"},
		{Method: http.MethodTrace, Why: "a server answers TRACE by echoing the request, injected credential included, back to the sandbox"},
		{Method: "TRACK", Why: "IIS's TRACE: it echoes the request, injected credential included"},
		{Method: http.MethodConnect, Why: "asks the upstream to open a tunnel to another host: its target is an authority, not a path any rule checks, and the credential would open it"},
	}
}

// methodRule returns the policy row for method: an exact match, or a row
// that never carries a credential in any letter case.
func methodRule(method string) (MethodRule, bool) {
	for _, r := range methodTable() {
		if r.Method == method || !r.Credential && strings.EqualFold(r.Method, method) {
			return r, true
		}
	}
	return MethodRule{}, false
}

// Where says where a server reads an override from: a set of places.
type Where uint8

// The places an override is read from.
const (
	// InHeader is a request header, matched in any letter case and with
	// '_' read as '-' (CGI-style servers turn both into one variable).
	InHeader Where = 1 << iota
	// InQuery is a query parameter.
	InQuery
	// InForm is a field of a form body: application/x-www-form-urlencoded,
	// multipart/form-data, or a body with no Content-Type, which Rack
	// parses as a form.
	InForm
	// InJSON is a top-level field of a JSON body (Laravel reads its
	// input, _method included, from JSON as from a form).
	InJSON
)

// String lists the places, for docs and messages.
func (w Where) String() string {
	var parts []string
	for _, p := range [...]struct {
		w    Where
		name string
	}{{InHeader, "header"}, {InQuery, "query parameter"}, {InForm, "form field"}, {InJSON, "JSON field"}} {
		if w&p.w != 0 {
			parts = append(parts, p.name)
		}
	}
	return strings.Join(parts, ", ")
}

// OverrideRule is a name refused on injected hosts wherever In says a
// server could read it.
type OverrideRule struct {
	// Name is matched in any letter case and with '_' read as '-'; as a
	// parameter or field, also as PHP reads names (see Decide).
	Name string
	// In is where it is looked for.
	In Where
	// Why names what honours it and what it changes.
	Why string
}

// Overrides returns the names refused on injected hosts: each makes some
// server or framework run another method or path than the request
// line's, which the host's rules checked. A sandbox client has no need
// to send any of them to an API. Refusing, rather than stripping, keeps
// the request from running as something the client did not mean (a POST
// it meant as a DELETE) and tells the client why, whatever method the
// override names, its own included.
func Overrides() []OverrideRule {
	t := overrideTable()
	return t[:]
}

// overrideTable is Overrides as an array, so that looking a name up on
// every request copies it on the stack instead of allocating.
func overrideTable() [15]OverrideRule {
	const method = "the method the server runs instead of the request line's (the rules checked that one)"
	const path = "the path the server routes instead of the request line's (the rules checked that one)"
	const everywhere = InHeader | InQuery | InForm | InJSON
	return [...]OverrideRule{
		{Name: "X-HTTP-Method-Override", In: everywhere, Why: "Rack (Rails, Sinatra), Express method-override, ASP.NET Web API, Jersey, Ktor, Symfony, Google APIs as a header; method-override middlewares configured to read it from the query or body: " + method},
		{Name: "X-HTTP-Method", In: everywhere, Why: "OData and Microsoft REST APIs (SharePoint, Dynamics) as a header; middlewares configured to read it elsewhere: " + method},
		{Name: "X-Method-Override", In: everywhere, Why: "method-override middlewares configured with it: " + method},
		{Name: "_method", In: InQuery | InForm | InJSON, Why: "Rails and Rack, Spring's HiddenHttpMethodFilter (form field), Symfony (form field, query), Laravel (form and JSON fields, query), Express method-override and Jersey (query): " + method},
		{Name: "_HttpMethod", In: InQuery | InForm | InJSON, Why: "Salesforce's REST API (query parameter), and frameworks configured with it: " + method},
		{Name: "X-Original-Method", In: InHeader, Why: "auth services behind nginx auth_request read it as the method to authorize: " + method},
		{Name: "X-Forwarded-Method", In: InHeader, Why: "Traefik ForwardAuth and ingress auth services read it as the method to authorize: " + method},
		{Name: "X-Original-URL", In: InHeader, Why: "IIS URL Rewrite, Symfony and Zend Framework before their fixes: " + path},
		{Name: "X-Rewrite-URL", In: InHeader, Why: "IIS ISAPI_Rewrite, Symfony and Zend Framework before their fixes: " + path},
		{Name: "X-Override-URL", In: InHeader, Why: "frameworks that take a rewritten URL from it: " + path},
		{Name: "X-Original-URI", In: InHeader, Why: "auth services behind nginx auth_request read it as the path to authorize: " + path},
		{Name: "X-Forwarded-Uri", In: InHeader, Why: "Traefik ForwardAuth and auth services read it as the path to authorize: " + path},
		{Name: "X-Forwarded-Path", In: InHeader, Why: "gateways and frameworks that rebuild the request path from it: " + path},
		{Name: "X-Forwarded-Prefix", In: InHeader, Why: "Spring's ForwardedHeaderFilter, ASP.NET Core and Symfony prepend it to the path they see: " + path},
		{Name: "X-Envoy-Original-Path", In: InHeader, Why: "services behind Envoy read it as the path before rewriting: " + path},
	}
}

// overrideHeader returns the refused header h names, if any.
func overrideHeader(h http.Header) (string, bool) {
	for k := range h {
		// Every refused header starts with "X-": skip the rest cheaply.
		if len(k) < 2 || k[0] != 'X' && k[0] != 'x' {
			continue
		}
		for _, r := range overrideTable() {
			if r.In&InHeader != 0 && SameHeaderName(k, r.Name) {
				return r.Name, true
			}
		}
	}
	return "", false
}

// SameHeaderName compares header names in any letter case, with '_' and
// '-' equal: CGI-style servers read X_Api_Key as X-Api-Key.
func SameHeaderName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if x != y && lower(x) != lower(y) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// minParamName is the length of the shortest name refused as a
// parameter or field ("_method"): shorter names are skipped cheaply.
const minParamName = len("_method")

// overrideName returns the refused name a parameter or field name reads
// as where it is found (in), spelt as any server could read it: in any
// letter case, with '_' and '-' equal, with PHP's dropping of leading
// spaces and renaming of '.', ' ' and '[' to '_', as PHP's array form
// "_method[]", cut at a NUL as PHP and C readers cut it
// ("_method%00x"), and with compatibility forms and letters that fold
// into ASCII read as those (foldCompat). Query and form names are
// percent-decoded first (decode), as leniently as any reader does
// (unescapeLoose).
func overrideName(name string, in Where, decode bool) (string, bool) {
	if len(name) < minParamName {
		return "", false
	}
	if decode {
		name = unescapeLoose(name)
	}
	if i := strings.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	name = foldCompat(name)
	name = strings.TrimLeft(name, " ")
	var array string
	if i := strings.IndexByte(name, '['); i > 0 && strings.IndexByte(name[i:], ']') > 0 {
		array = name[:i]
	} else if j := strings.IndexByte(name, ']'); i == 0 && j > 1 {
		array = name[1:j] // qs reads "[_method]" as _method
	}
	if len(name) < minParamName {
		return "", false
	}
	mangled := strings.Map(func(r rune) rune {
		if r == '.' || r == ' ' || r == '[' {
			return '_'
		}
		return r
	}, name)
	for _, r := range overrideTable() {
		if r.In&in != 0 && (SameHeaderName(mangled, r.Name) || array != "" && SameHeaderName(array, r.Name)) {
			return r.Name, true
		}
	}
	return "", false
}

// overrideParam returns the refused name the query of target holds, if
// any. Parameters are split on '&' and ';'.
func overrideParam(target string) (string, bool) {
	_, query, ok := strings.Cut(target, "?")
	if !ok {
		return "", false
	}
	return overrideInForm(query, InQuery)
}

// overrideInForm returns the refused name a query string or
// form-encoded body holds, looked for as in says.
func overrideInForm(form string, in Where) (string, bool) {
	for name := range formNames(form) {
		if n, ok := overrideName(name, in, true); ok {
			return n, true
		}
	}
	return "", false
}

// formNames yields the names of a query string's or form-encoded body's
// parameters, split on '&' and ';' (Rack splits a query on both), as they
// are written: not unescaped.
func formNames(form string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for form != "" {
			var param string
			if i := strings.IndexAny(form, "&;"); i >= 0 {
				param, form = form[:i], form[i+1:]
			} else {
				param, form = form, ""
			}
			name, _, _ := strings.Cut(param, "=")
			if !yield(name) {
				return
			}
		}
	}
}

// bodyKinds says how servers could read a body of the given Content-Type
// values as fields: as a form, as multipart form parts, as JSON. A body
// with no type, or one that does not parse, may be read as a form (Rack
// does with none) and as JSON; strictJSON is set when a value declares
// JSON, whose body must then be valid JSON for its fields to be known.
func bodyKinds(contentType []string) (form, multi, json, strictJSON bool, boundaries []string) {
	if len(contentType) == 0 {
		return true, false, true, false, nil
	}
	for _, ct := range contentType {
		mt, params, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			form, json = true, true
		case mt == "application/x-www-form-urlencoded":
			form = true
		case strings.HasPrefix(mt, "multipart/"):
			multi = true
			boundaries = append(boundaries, params["boundary"])
		case isJSONType(mt):
			json, strictJSON = true, true
		}
	}
	return form, multi, json, strictJSON, boundaries
}

// OverrideBodyType reports whether a body with these Content-Type values
// (every value sent) could be read by a server as form or JSON fields,
// so that the proxy must read it to look for override fields.
func OverrideBodyType(contentType []string) bool {
	form, multi, json, _, _ := bodyKinds(contentType)
	return form || multi || json
}

// overrideInBody returns the refused name a body holds as a form, JSON
// or multipart field, read as its Content-Type says servers could read
// it; or an error when it cannot tell (a body longer than what the proxy
// reads, compressed, declared JSON but not JSON, multipart that does not
// parse).
func overrideInBody(b Body) (string, error) {
	if len(b.Data) == 0 && b.Complete {
		return "", nil // most requests: no body, no Content-Type to parse
	}
	form, multi, isJSON, strictJSON, boundaries := bodyKinds(b.ContentType)
	if !form && !multi && !isJSON {
		return "", nil
	}
	if !b.Complete {
		// Too long to read before deciding: the server checks it as
		// it streams (OverrideScanner), holding its last byte back.
		return "", nil
	}
	for _, ce := range b.ContentEncoding {
		if !strings.EqualFold(strings.TrimSpace(ce), "identity") {
			return "", fmt.Errorf("a form or JSON body with Content-Encoding %q cannot be checked for method override fields", Clip(ce))
		}
	}
	if form {
		if n, ok := overrideInForm(string(b.Data), InForm); ok {
			return n, nil
		}
	}
	if isJSON {
		if !json.Valid(b.Data) {
			if strictJSON {
				return "", errors.New("a body declared as JSON that is not valid JSON cannot be checked for method override fields")
			}
		} else if n, ok := overrideInJSON(b.Data); ok {
			return n, nil
		}
	}
	if multi {
		for _, boundary := range boundaries {
			n, err := overrideInMultipart(b.Data, boundary)
			if err != nil || n != "" {
				return n, err
			}
		}
	}
	return "", nil
}

// overrideInJSON returns the refused name a valid JSON text has as a
// top-level field, if it is an object.
func overrideInJSON(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		name, _ := t.(string)
		if n, ok := overrideName(name, InJSON, false); ok {
			return n, true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

// overrideInMultipart returns the refused name a multipart body has as a
// part's form name, or an error when it does not parse.
func overrideInMultipart(data []byte, boundary string) (string, error) {
	return scanMultipart(bytes.NewReader(data), boundary)
}

// scanMultipart is overrideInMultipart over a stream: part bodies are
// read through and dropped, never held.
func scanMultipart(r io.Reader, boundary string) (string, error) {
	bad := errors.New("a multipart body that does not parse cannot be checked for method override fields")
	if boundary == "" {
		return "", bad
	}
	mr := multipart.NewReader(r, boundary)
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			return "", nil
		}
		if err != nil {
			return "", bad
		}
		_, params, _ := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
		if n, ok := overrideName(params["name"], InForm, false); ok {
			return n, nil
		}
		// A name the standard parser cannot read may still be one to
		// a lenient server: look at the raw header too.
		if n, ok := overrideInRawDisposition(p.Header.Values("Content-Disposition")); ok {
			return n, nil
		}
	}
}

// overrideInRawDisposition looks for a refused name in the raw
// Content-Disposition values of a part, as a lenient parser reads
// name="..." or name=...: what follows each "name=" up to a quote, ';'
// or the end.
func overrideInRawDisposition(values []string) (string, bool) {
	for _, v := range values {
		// ASCII letters only: strings.ToLower would change the length
		// of invalid UTF-8, and the indexes below are into v.
		low := []byte(v)
		for i, c := range low {
			low[i] = lower(c)
		}
		for i := 0; ; {
			j := strings.Index(string(low[i:]), "name")
			if j < 0 {
				break
			}
			rest := strings.TrimLeft(v[i+j+len("name"):], " \t*")
			i += j + len("name")
			rest, ok := strings.CutPrefix(rest, "=")
			if !ok {
				continue
			}
			rest = strings.TrimLeft(rest, " \t\"'")
			if k := strings.IndexAny(rest, "\"';"); k >= 0 {
				rest = rest[:k]
			}
			if n, ok := overrideName(strings.TrimSpace(rest), InForm, false); ok {
				return n, true
			}
		}
	}
	return "", false
}
