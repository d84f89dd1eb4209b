package render

import (
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"keyhole.dev/keyhole/proxy/config"
)

// appendProxyConfig appends c to b as encodeJSON writes it after a round
// trip through a generic value (genericProxyConfigJSON): object keys
// sorted, 2-space indentation, fields left out where their json tag says
// omitempty, no HTML escaping and a final newline. It writes the fields
// directly, without reflection and without the generic value, which cost
// a render at 10,000 Connections more than checking them did.
//
// valid is false when a string in c is not valid UTF-8: JSON cannot carry
// it unchanged, and the caller takes the generic path, whose bytes and
// refusal are then exactly what they always were. TestAppendProxyConfig
// holds the two paths to the same bytes and fails when config.Config
// gains a field this function does not write.
func appendProxyConfig(b []byte, c *config.Config) (out []byte, valid bool) {
	w := jsonWriter{b: b, valid: true}
	n := w.open('{')
	w.key(&n, 1, "apiVersion")
	w.str(c.APIVersion)
	w.key(&n, 1, "ca")
	w.ca(c.CA, 1)
	if len(c.Hosts) > 0 {
		w.key(&n, 1, "hosts")
		m := w.open('[')
		for i := range c.Hosts {
			w.item(&m, 2)
			w.host(&c.Hosts[i], 2)
		}
		w.close(m, 1, ']')
	}
	if len(c.InternalHosts) > 0 {
		w.key(&n, 1, "internalHosts")
		w.strs(c.InternalHosts, 1)
	}
	w.key(&n, 1, "kind")
	w.str(c.Kind)
	if len(c.Passthrough) > 0 {
		w.key(&n, 1, "passthrough")
		w.strs(c.Passthrough, 1)
	}
	w.key(&n, 1, "sandbox")
	m := w.open('{')
	w.key(&m, 2, "name")
	w.str(c.Sandbox.Name)
	if c.Sandbox.Namespace != "" {
		w.key(&m, 2, "namespace")
		w.str(c.Sandbox.Namespace)
	}
	w.close(m, 1, '}')
	if c.ScrubResponseBodies {
		w.key(&n, 1, "scrubResponseBodies")
		w.b = append(w.b, "true"...)
	}
	if c.SecretsDir != "" {
		w.key(&n, 1, "secretsDir")
		w.str(c.SecretsDir)
	}
	if u := c.UpstreamProxy; u != nil {
		w.key(&n, 1, "upstreamProxy")
		w.upstreamProxy(u, 1)
	}
	w.close(n, 0, '}')
	w.b = append(w.b, '\n')
	return w.b, w.valid
}

// jsonWriter appends indented JSON. Objects and arrays count their
// members so far (n) to place commas and to write an empty one as {} or
// [], as encoding/json's indentation does.
type jsonWriter struct {
	b     []byte
	valid bool
}

func (w *jsonWriter) open(c byte) int {
	w.b = append(w.b, c)
	return 0
}

func (w *jsonWriter) close(n, depth int, c byte) {
	if n > 0 {
		w.newline(depth)
	}
	w.b = append(w.b, c)
}

func (w *jsonWriter) newline(depth int) {
	w.b = append(w.b, '\n')
	for range depth {
		w.b = append(w.b, ' ', ' ')
	}
}

// item starts the next member of an array at depth.
func (w *jsonWriter) item(n *int, depth int) {
	if *n > 0 {
		w.b = append(w.b, ',')
	}
	*n++
	w.newline(depth)
}

// key starts the next member of an object at depth: "k": .
func (w *jsonWriter) key(n *int, depth int, k string) {
	w.item(n, depth)
	w.str(k)
	w.b = append(w.b, ':', ' ')
}

func (w *jsonWriter) ca(ca config.CA, depth int) {
	n := w.open('{')
	if ca.CertFile != "" {
		w.key(&n, depth+1, "certFile")
		w.str(ca.CertFile)
	}
	if ca.KeyFile != "" {
		w.key(&n, depth+1, "keyFile")
		w.str(ca.KeyFile)
	}
	w.close(n, depth, '}')
}

func (w *jsonWriter) upstreamProxy(u *config.UpstreamProxy, depth int) {
	n := w.open('{')
	if u.AllowInternalAddress {
		w.key(&n, depth+1, "allowInternalAddress")
		w.b = append(w.b, "true"...)
	}
	if a := u.Auth; a != nil {
		w.key(&n, depth+1, "auth")
		m := w.open('{')
		w.key(&m, depth+2, "passwordKey")
		w.str(a.PasswordKey)
		w.key(&m, depth+2, "secret")
		w.str(a.Secret)
		w.key(&m, depth+2, "usernameKey")
		w.str(a.UsernameKey)
		w.close(m, depth+1, '}')
	}
	if len(u.NoProxy) > 0 {
		w.key(&n, depth+1, "noProxy")
		w.strs(u.NoProxy, depth+1)
	}
	if u.Resolve != "" {
		w.key(&n, depth+1, "resolve")
		w.str(u.Resolve)
	}
	w.key(&n, depth+1, "url")
	w.str(u.URL)
	w.close(n, depth, '}')
}

func (w *jsonWriter) host(h *config.Host, depth int) {
	n := w.open('{')
	if h.Audit {
		w.key(&n, depth+1, "audit")
		w.b = append(w.b, "true"...)
	}
	w.key(&n, depth+1, "connection")
	w.str(h.Connection)
	w.key(&n, depth+1, "inject")
	w.inject(&h.Inject, depth+1)
	w.key(&n, depth+1, "name")
	w.str(h.Name)
	if len(h.Rules) > 0 {
		w.key(&n, depth+1, "rules")
		m := w.open('[')
		for i := range h.Rules {
			w.item(&m, depth+2)
			w.rule(&h.Rules[i], depth+2)
		}
		w.close(m, depth+1, ']')
	}
	w.close(n, depth, '}')
}

func (w *jsonWriter) inject(in *config.Inject, depth int) {
	n := w.open('{')
	if a := in.AWSSigV4; a != nil {
		w.key(&n, depth+1, "awsSigV4")
		m := w.open('{')
		if a.AccessKeyIDKey != "" {
			w.key(&m, depth+2, "accessKeyIdKey")
			w.str(a.AccessKeyIDKey)
		}
		if a.Identity != "" {
			w.key(&m, depth+2, "identity")
			w.str(a.Identity)
		}
		w.key(&m, depth+2, "region")
		w.str(a.Region)
		if a.SecretAccessKeyKey != "" {
			w.key(&m, depth+2, "secretAccessKeyKey")
			w.str(a.SecretAccessKeyKey)
		}
		w.key(&m, depth+2, "service")
		w.str(a.Service)
		if a.SessionTokenKey != "" {
			w.key(&m, depth+2, "sessionTokenKey")
			w.str(a.SessionTokenKey)
		}
		w.close(m, depth+1, '}')
	}
	if b := in.Basic; b != nil {
		w.key(&n, depth+1, "basic")
		m := w.open('{')
		w.key(&m, depth+2, "passwordKey")
		w.str(b.PasswordKey)
		w.key(&m, depth+2, "usernameKey")
		w.str(b.UsernameKey)
		w.close(m, depth+1, '}')
	}
	if g := in.GitHubApp; g != nil {
		w.key(&n, depth+1, "githubApp")
		w.githubApp(g, depth+1)
	}
	if g := in.Google; g != nil {
		w.key(&n, depth+1, "googleServiceAccount")
		m := w.open('{')
		if g.Audience != "" {
			w.key(&m, depth+2, "audience")
			w.str(g.Audience)
		}
		if g.Identity != "" {
			w.key(&m, depth+2, "identity")
			w.str(g.Identity)
		}
		if g.KeyKey != "" {
			w.key(&m, depth+2, "keyKey")
			w.str(g.KeyKey)
		}
		if len(g.Scopes) > 0 {
			w.key(&m, depth+2, "scopes")
			w.strs(g.Scopes, depth+2)
		}
		if g.TokenURL != "" {
			w.key(&m, depth+2, "tokenUrl")
			w.str(g.TokenURL)
		}
		w.close(m, depth+1, '}')
	}
	if h := in.Header; h != nil {
		w.key(&n, depth+1, "header")
		m := w.open('{')
		w.key(&m, depth+2, "name")
		w.str(h.Name)
		w.key(&m, depth+2, "value")
		w.str(h.Value)
		w.close(m, depth+1, '}')
	}
	if o := in.OAuth2; o != nil {
		w.key(&n, depth+1, "oauth2")
		w.oauth2(o, depth+1)
	}
	if in.Secret != "" {
		w.key(&n, depth+1, "secret")
		w.str(in.Secret)
	}
	if s := in.Substitute; s != nil {
		w.key(&n, depth+1, "substitute")
		m := w.open('{')
		if len(s.Headers) > 0 {
			w.key(&m, depth+2, "headers")
			w.strs(s.Headers, depth+2)
		}
		w.key(&m, depth+2, "key")
		w.str(s.Key)
		w.key(&m, depth+2, "placeholder")
		w.str(s.Placeholder)
		w.close(m, depth+1, '}')
	}
	w.close(n, depth, '}')
}

func (w *jsonWriter) oauth2(o *config.OAuth2Inject, depth int) {
	m := w.open('{')
	field := func(k, v string, omitEmpty bool) {
		if v != "" || !omitEmpty {
			w.key(&m, depth+1, k)
			w.str(v)
		}
	}
	field("audience", o.Audience, true)
	field("clientIdKey", o.ClientIDKey, false)
	field("clientSecretKey", o.ClientSecretKey, true)
	field("grant", o.Grant, false)
	field("refreshTokenKey", o.RefreshTokenKey, true)
	field("resource", o.Resource, true)
	if len(o.Scopes) > 0 {
		w.key(&m, depth+1, "scopes")
		w.strs(o.Scopes, depth+1)
	}
	field("tokenUrl", o.TokenURL, false)
	w.close(m, depth, '}')
}

func (w *jsonWriter) githubApp(g *config.GitHubAppInject, depth int) {
	m := w.open('{')
	w.key(&m, depth+1, "api")
	w.str(g.API)
	w.key(&m, depth+1, "appId")
	w.b = strconv.AppendInt(w.b, g.AppID, 10)
	if g.InstallationID != 0 {
		w.key(&m, depth+1, "installationId")
		w.b = strconv.AppendInt(w.b, g.InstallationID, 10)
	}
	if g.Owner != "" {
		w.key(&m, depth+1, "owner")
		w.str(g.Owner)
	}
	if len(g.Permissions) > 0 {
		w.key(&m, depth+1, "permissions")
		p := w.open('{')
		for _, name := range slices.Sorted(maps.Keys(g.Permissions)) {
			w.key(&p, depth+2, name)
			w.str(g.Permissions[name])
		}
		w.close(p, depth+1, '}')
	}
	w.key(&m, depth+1, "privateKeyKey")
	w.str(g.PrivateKeyKey)
	if len(g.Repositories) > 0 {
		w.key(&m, depth+1, "repositories")
		w.strs(g.Repositories, depth+1)
	}
	w.key(&m, depth+1, "scheme")
	w.str(g.Scheme)
	w.close(m, depth, '}')
}

func (w *jsonWriter) rule(r *config.Rule, depth int) {
	n := w.open('{')
	if len(r.Body) > 0 {
		w.key(&n, depth+1, "body")
		fields := make([]string, 0, len(r.Body))
		for f := range r.Body {
			fields = append(fields, f)
		}
		slices.Sort(fields)
		m := w.open('{')
		for _, f := range fields {
			w.key(&m, depth+2, f)
			w.strs(r.Body[f], depth+2)
		}
		w.close(m, depth+1, '}')
	}
	if r.EncodedSlash != "" {
		w.key(&n, depth+1, "encodedSlash")
		w.str(r.EncodedSlash)
	}
	if g := r.GraphQL; g != nil {
		w.key(&n, depth+1, "graphql")
		m := w.open('{')
		if g.Batches {
			w.key(&m, depth+2, "batches")
			w.b = append(w.b, "true"...)
		}
		// operations has no omitempty: a nil list is written as null.
		w.key(&m, depth+2, "operations")
		w.strs(g.Operations, depth+2)
		if g.PersistedQueries {
			w.key(&m, depth+2, "persistedQueries")
			w.b = append(w.b, "true"...)
		}
		w.close(m, depth+1, '}')
	}
	if r.Inject != nil {
		w.key(&n, depth+1, "inject")
		w.inject(r.Inject, depth+1)
	}
	if m := r.MCP; m != nil {
		w.key(&n, depth+1, "mcp")
		w.mcp(m, depth+1)
	}
	// methods has no omitempty: a nil list is written as null.
	w.key(&n, depth+1, "methods")
	w.strs(r.Methods, depth+1)
	if len(r.PathPatterns) > 0 {
		w.key(&n, depth+1, "pathPatterns")
		w.strs(r.PathPatterns, depth+1)
	}
	if len(r.PathPrefixes) > 0 {
		w.key(&n, depth+1, "pathPrefixes")
		w.strs(r.PathPrefixes, depth+1)
	}
	if r.WebSocket {
		w.key(&n, depth+1, "websocket")
		w.b = append(w.b, "true"...)
	}
	w.close(n, depth, '}')
}

// mcp writes a rule's MCP condition, whose key is at depth, its fields in
// name order.
func (w *jsonWriter) mcp(m *config.MCP, depth int) {
	n := w.open('{')
	if len(m.Arguments) > 0 {
		w.key(&n, depth+1, "arguments")
		a := w.open('{')
		for _, tool := range slices.Sorted(maps.Keys(m.Arguments)) {
			w.key(&a, depth+2, tool)
			f := w.open('{')
			for _, field := range slices.Sorted(maps.Keys(m.Arguments[tool])) {
				w.key(&f, depth+3, field)
				w.strs(m.Arguments[tool][field], depth+3)
			}
			w.close(f, depth+2, '}')
		}
		w.close(a, depth+1, '}')
	}
	// methods has no omitempty: a nil list is written as null.
	w.key(&n, depth+1, "methods")
	w.strs(m.Methods, depth+1)
	if len(m.Resources) > 0 {
		w.key(&n, depth+1, "resources")
		w.strs(m.Resources, depth+1)
	}
	if m.Responses {
		w.key(&n, depth+1, "responses")
		w.b = append(w.b, "true"...)
	}
	if len(m.Tools) > 0 {
		w.key(&n, depth+1, "tools")
		w.strs(m.Tools, depth+1)
	}
	w.close(n, depth, '}')
}

// strs writes a list of strings whose key is at depth; nil is null, as
// encoding/json writes a nil slice.
func (w *jsonWriter) strs(ss []string, depth int) {
	if ss == nil {
		w.b = append(w.b, "null"...)
		return
	}
	n := w.open('[')
	for _, s := range ss {
		w.item(&n, depth+1)
		w.str(s)
	}
	w.close(n, depth, ']')
}

const hexDigits = "0123456789abcdef"

// str writes s quoted as encoding/json does with HTML escaping off: \" \\
// \b \f \n \r \t, \u00XX for the other control characters, \u2028 and
// \u2029 escaped, everything else as is. A string that is not valid UTF-8
// marks the writer invalid.
func (w *jsonWriter) str(s string) {
	w.b = append(w.b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			w.b = append(w.b, s[start:i]...)
			switch c {
			case '"', '\\':
				w.b = append(w.b, '\\', c)
			case '\b':
				w.b = append(w.b, '\\', 'b')
			case '\f':
				w.b = append(w.b, '\\', 'f')
			case '\n':
				w.b = append(w.b, '\\', 'n')
			case '\r':
				w.b = append(w.b, '\\', 'r')
			case '\t':
				w.b = append(w.b, '\\', 't')
			default:
				w.b = append(w.b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			w.valid = false
			i++
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			w.b = append(w.b, s[start:i]...)
			w.b = append(w.b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	w.b = append(w.b, s[start:]...)
	w.b = append(w.b, '"')
}
