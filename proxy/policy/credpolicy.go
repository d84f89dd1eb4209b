package policy

import (
	"net/http"
	"net/url"
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

// OverrideRule is a request header refused on injected hosts.
type OverrideRule struct {
	// Name is the header, matched in any letter case and with '_' read
	// as '-' (CGI-style servers turn both into the same variable).
	Name string
	// Why names what honours it and what it changes.
	Why string
}

// OverrideHeaders returns the headers refused on injected hosts: each
// makes some server or framework run another method or path than the
// request line's, which the host's rules checked. A sandbox client has
// no need to send any of them to an API. Refusing, rather than
// stripping, keeps the request from running as something the client did
// not mean (a POST it meant as a DELETE) and tells the client why.
func OverrideHeaders() []OverrideRule {
	t := overrideTable()
	return t[:]
}

// overrideTable is OverrideHeaders as an array, for the same reason as
// methodTable.
func overrideTable() [13]OverrideRule {
	const method = "the method the server runs instead of the request line's (the rules checked that one)"
	const path = "the path the server routes instead of the request line's (the rules checked that one)"
	return [...]OverrideRule{
		{Name: "X-HTTP-Method-Override", Why: "Rack (Rails, Sinatra), Express method-override, ASP.NET Web API, Jersey, Ktor, Symfony, Google APIs: " + method},
		{Name: "X-HTTP-Method", Why: "OData and Microsoft REST APIs (SharePoint, Dynamics): " + method},
		{Name: "X-Method-Override", Why: "method-override middlewares configured with it: " + method},
		{Name: "X-Original-Method", Why: "auth services behind nginx auth_request read it as the method to authorize: " + method},
		{Name: "X-Forwarded-Method", Why: "Traefik ForwardAuth and ingress auth services read it as the method to authorize: " + method},
		{Name: "X-Original-URL", Why: "IIS URL Rewrite, Symfony and Zend Framework before their fixes: " + path},
		{Name: "X-Rewrite-URL", Why: "IIS ISAPI_Rewrite, Symfony and Zend Framework before their fixes: " + path},
		{Name: "X-Override-URL", Why: "frameworks that take a rewritten URL from it: " + path},
		{Name: "X-Original-URI", Why: "auth services behind nginx auth_request read it as the path to authorize: " + path},
		{Name: "X-Forwarded-Uri", Why: "Traefik ForwardAuth and auth services read it as the path to authorize: " + path},
		{Name: "X-Forwarded-Path", Why: "gateways and frameworks that rebuild the request path from it: " + path},
		{Name: "X-Forwarded-Prefix", Why: "Spring's ForwardedHeaderFilter, ASP.NET Core and Symfony prepend it to the path they see: " + path},
		{Name: "X-Envoy-Original-Path", Why: "services behind Envoy read it as the path before rewriting: " + path},
	}
}

// overrideHeader returns the refused header h names, if any.
func overrideHeader(h http.Header) (string, bool) {
	for k := range h {
		// Every refused name starts with "X-": skip the rest cheaply.
		if len(k) < 2 || k[0] != 'X' && k[0] != 'x' {
			continue
		}
		for _, r := range overrideTable() {
			if SameHeaderName(k, r.Name) {
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

// OverrideParam is the query parameter refused on injected hosts:
// Rails, Laravel, Symfony, Express method-override and most frameworks
// that emulate PUT and DELETE for HTML forms read the method to run
// from it (Symfony and Express from the query string too). Rules match
// the path, not the query, so it would otherwise go unchecked.
const OverrideParam = "_method"

// overrideParam reports whether the query of target names OverrideParam,
// spelt as any server could read it: in any letter case, percent-encoded,
// with PHP's dropping of leading spaces and renaming of '.', ' ' and '['
// to '_', as PHP's array form "_method[]", and cut at an encoded NUL as
// PHP cuts it ("_method%00x"). Parameters are split on '&' and ';'.
func overrideParam(target string) bool {
	_, query, ok := strings.Cut(target, "?")
	if !ok {
		return false
	}
	for query != "" {
		var param string
		if i := strings.IndexAny(query, "&;"); i >= 0 {
			param, query = query[:i], query[i+1:]
		} else {
			param, query = query, ""
		}
		name, _, _ := strings.Cut(param, "=")
		if len(name) < len(OverrideParam) {
			continue
		}
		if dec, err := url.QueryUnescape(name); err == nil {
			name = dec
		}
		// PHP, and any reader that keeps names as C strings, ends a
		// name at NUL: "_method%00x" is _method to it.
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		name = strings.TrimLeft(name, " ")
		// PHP reads "_method[]" as an array named _method.
		if i := strings.IndexByte(name, '['); i > 0 && strings.IndexByte(name[i:], ']') > 0 && strings.EqualFold(name[:i], OverrideParam) {
			return true
		}
		name = strings.Map(func(r rune) rune {
			if r == '.' || r == ' ' || r == '[' {
				return '_'
			}
			return r
		}, name)
		if strings.EqualFold(name, OverrideParam) {
			return true
		}
	}
	return false
}
