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
	w.strKey(&n, 1, "apiVersion", c.APIVersion)
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
	w.strsOmit(&n, 1, "internalHosts", c.InternalHosts)
	w.strKey(&n, 1, "kind", c.Kind)
	w.strsOmit(&n, 1, "passthrough", c.Passthrough)
	w.key(&n, 1, "sandbox")
	m := w.open('{')
	w.strKey(&m, 2, "name", c.Sandbox.Name)
	w.strOmit(&m, 2, "namespace", c.Sandbox.Namespace)
	w.close(m, 1, '}')
	w.trueOmit(&n, 1, "scrubResponseBodies", c.ScrubResponseBodies)
	w.strOmit(&n, 1, "secretsDir", c.SecretsDir)
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

// strKey writes the member "k": v of an object at depth.
func (w *jsonWriter) strKey(n *int, depth int, k, v string) {
	w.key(n, depth, k)
	w.str(v)
}

// strOmit writes the member "k": v unless v is empty, as omitempty does.
func (w *jsonWriter) strOmit(n *int, depth int, k, v string) {
	if v != "" {
		w.strKey(n, depth, k, v)
	}
}

// strsKey writes the member "k": vs; nil is null.
func (w *jsonWriter) strsKey(n *int, depth int, k string, vs []string) {
	w.key(n, depth, k)
	w.strs(vs, depth)
}

// strsOmit writes the member "k": vs unless vs is empty, as omitempty
// does.
func (w *jsonWriter) strsOmit(n *int, depth int, k string, vs []string) {
	if len(vs) > 0 {
		w.strsKey(n, depth, k, vs)
	}
}

// trueOmit writes the member "k": true when v is, as omitempty does for a
// bool.
func (w *jsonWriter) trueOmit(n *int, depth int, k string, v bool) {
	if v {
		w.key(n, depth, k)
		w.b = append(w.b, "true"...)
	}
}

func (w *jsonWriter) ca(ca config.CA, depth int) {
	n := w.open('{')
	w.strOmit(&n, depth+1, "certFile", ca.CertFile)
	w.strOmit(&n, depth+1, "keyFile", ca.KeyFile)
	w.close(n, depth, '}')
}

func (w *jsonWriter) upstreamProxy(u *config.UpstreamProxy, depth int) {
	n := w.open('{')
	w.trueOmit(&n, depth+1, "allowInternalAddress", u.AllowInternalAddress)
	if a := u.Auth; a != nil {
		w.key(&n, depth+1, "auth")
		m := w.open('{')
		w.strKey(&m, depth+2, "passwordKey", a.PasswordKey)
		w.strKey(&m, depth+2, "secret", a.Secret)
		w.strKey(&m, depth+2, "usernameKey", a.UsernameKey)
		w.close(m, depth+1, '}')
	}
	w.strsOmit(&n, depth+1, "noProxy", u.NoProxy)
	w.strOmit(&n, depth+1, "resolve", u.Resolve)
	w.strKey(&n, depth+1, "url", u.URL)
	w.close(n, depth, '}')
}

func (w *jsonWriter) host(h *config.Host, depth int) {
	n := w.open('{')
	w.trueOmit(&n, depth+1, "audit", h.Audit)
	w.strKey(&n, depth+1, "connection", h.Connection)
	w.key(&n, depth+1, "inject")
	w.inject(&h.Inject, depth+1)
	w.strKey(&n, depth+1, "name", h.Name)
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
		w.strOmit(&m, depth+2, "accessKeyIdKey", a.AccessKeyIDKey)
		w.strOmit(&m, depth+2, "identity", a.Identity)
		w.strKey(&m, depth+2, "region", a.Region)
		w.strOmit(&m, depth+2, "secretAccessKeyKey", a.SecretAccessKeyKey)
		w.strKey(&m, depth+2, "service", a.Service)
		w.strOmit(&m, depth+2, "sessionTokenKey", a.SessionTokenKey)
		w.close(m, depth+1, '}')
	}
	if b := in.Basic; b != nil {
		w.key(&n, depth+1, "basic")
		m := w.open('{')
		w.strKey(&m, depth+2, "passwordKey", b.PasswordKey)
		w.strKey(&m, depth+2, "usernameKey", b.UsernameKey)
		w.close(m, depth+1, '}')
	}
	if g := in.GitHubApp; g != nil {
		w.key(&n, depth+1, "githubApp")
		w.githubApp(g, depth+1)
	}
	if g := in.Google; g != nil {
		w.key(&n, depth+1, "googleServiceAccount")
		m := w.open('{')
		w.strOmit(&m, depth+2, "audience", g.Audience)
		w.strOmit(&m, depth+2, "identity", g.Identity)
		w.strOmit(&m, depth+2, "keyKey", g.KeyKey)
		w.strsOmit(&m, depth+2, "scopes", g.Scopes)
		w.strOmit(&m, depth+2, "tokenUrl", g.TokenURL)
		w.close(m, depth+1, '}')
	}
	if h := in.Header; h != nil {
		w.key(&n, depth+1, "header")
		m := w.open('{')
		w.strKey(&m, depth+2, "name", h.Name)
		w.strKey(&m, depth+2, "value", h.Value)
		w.close(m, depth+1, '}')
	}
	if o := in.OAuth2; o != nil {
		w.key(&n, depth+1, "oauth2")
		w.oauth2(o, depth+1)
	}
	w.strOmit(&n, depth+1, "secret", in.Secret)
	if s := in.Substitute; s != nil {
		w.key(&n, depth+1, "substitute")
		m := w.open('{')
		w.strsOmit(&m, depth+2, "headers", s.Headers)
		w.strKey(&m, depth+2, "key", s.Key)
		w.strKey(&m, depth+2, "placeholder", s.Placeholder)
		w.close(m, depth+1, '}')
	}
	w.close(n, depth, '}')
}

func (w *jsonWriter) oauth2(o *config.OAuth2Inject, depth int) {
	m := w.open('{')
	w.strOmit(&m, depth+1, "audience", o.Audience)
	w.strKey(&m, depth+1, "clientIdKey", o.ClientIDKey)
	w.strOmit(&m, depth+1, "clientSecretKey", o.ClientSecretKey)
	w.strKey(&m, depth+1, "grant", o.Grant)
	w.strOmit(&m, depth+1, "refreshTokenKey", o.RefreshTokenKey)
	w.strOmit(&m, depth+1, "resource", o.Resource)
	w.strsOmit(&m, depth+1, "scopes", o.Scopes)
	w.strKey(&m, depth+1, "tokenUrl", o.TokenURL)
	w.close(m, depth, '}')
}

func (w *jsonWriter) githubApp(g *config.GitHubAppInject, depth int) {
	m := w.open('{')
	w.strKey(&m, depth+1, "api", g.API)
	w.key(&m, depth+1, "appId")
	w.b = strconv.AppendInt(w.b, g.AppID, 10)
	if g.InstallationID != 0 {
		w.key(&m, depth+1, "installationId")
		w.b = strconv.AppendInt(w.b, g.InstallationID, 10)
	}
	w.strOmit(&m, depth+1, "owner", g.Owner)
	if len(g.Permissions) > 0 {
		w.key(&m, depth+1, "permissions")
		p := w.open('{')
		for _, name := range slices.Sorted(maps.Keys(g.Permissions)) {
			w.strKey(&p, depth+2, name, g.Permissions[name])
		}
		w.close(p, depth+1, '}')
	}
	w.strKey(&m, depth+1, "privateKeyKey", g.PrivateKeyKey)
	w.strsOmit(&m, depth+1, "repositories", g.Repositories)
	w.strKey(&m, depth+1, "scheme", g.Scheme)
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
			w.strsKey(&m, depth+2, f, r.Body[f])
		}
		w.close(m, depth+1, '}')
	}
	w.strOmit(&n, depth+1, "encodedSlash", r.EncodedSlash)
	if g := r.GraphQL; g != nil {
		w.key(&n, depth+1, "graphql")
		m := w.open('{')
		w.trueOmit(&m, depth+2, "batches", g.Batches)
		// operations has no omitempty: a nil list is written as null.
		w.strsKey(&m, depth+2, "operations", g.Operations)
		w.trueOmit(&m, depth+2, "persistedQueries", g.PersistedQueries)
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
	w.strsKey(&n, depth+1, "methods", r.Methods)
	w.strsOmit(&n, depth+1, "pathPatterns", r.PathPatterns)
	w.strsOmit(&n, depth+1, "pathPrefixes", r.PathPrefixes)
	w.trueOmit(&n, depth+1, "websocket", r.WebSocket)
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
				w.strsKey(&f, depth+3, field, m.Arguments[tool][field])
			}
			w.close(f, depth+2, '}')
		}
		w.close(a, depth+1, '}')
	}
	// methods has no omitempty: a nil list is written as null.
	w.strsKey(&n, depth+1, "methods", m.Methods)
	w.strsOmit(&n, depth+1, "resources", m.Resources)
	w.trueOmit(&n, depth+1, "responses", m.Responses)
	w.strsOmit(&n, depth+1, "tools", m.Tools)
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
