package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
)

// The error classes Load, Decode and Validate wrap. Callers map them to
// exit codes with errors.Is.
var (
	// ErrRead is wrapped when the file cannot be read at all.
	ErrRead = errors.New("cannot read proxy config")
	// ErrDecode is wrapped when the bytes are not one well-formed JSON
	// object with only known fields.
	ErrDecode = errors.New("cannot decode proxy config")
	// ErrInvalid is wrapped by every problem Validate finds.
	ErrInvalid = errors.New("invalid proxy config")
)

// MaxFileSize bounds the config file Load accepts, so a wrong path (a
// device, a huge log) fails fast instead of exhausting memory.
const MaxFileSize = 4 << 20

// Load reads, decodes and validates the config file at path. The file is
// JSON, as `keyhole render` writes it. Errors name the file and wrap
// ErrRead, ErrDecode or ErrInvalid.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRead, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRead, path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrRead, path, MaxFileSize)
	}
	c, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Decode parses one JSON config strictly — unknown fields, trailing data
// and a wrong apiVersion or kind are errors — and validates it. Strictness
// is the point: a misspelled "rules" must not silently allow everything.
func Decode(data []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: unexpected data after the config object", ErrDecode)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate reports every problem in c, each wrapping ErrInvalid, joined
// with errors.Join. A valid config is safe for the proxy to enforce as is:
// names are canonical, each injection has exactly one form, templates
// parse and rules are well formed.
func (c *Config) Validate() error {
	v := &validator{}
	if c.APIVersion != APIVersion {
		v.addf("apiVersion", "is %q, want %q", c.APIVersion, APIVersion)
	}
	if c.Kind != Kind {
		v.addf("kind", "is %q, want %q", c.Kind, Kind)
	}
	if c.Sandbox.Name == "" {
		v.addf("sandbox.name", "is empty")
	}
	seen := map[string]string{}
	for i, h := range c.Hosts {
		at := fmt.Sprintf("hosts[%d]", i)
		if err := CheckHostName(h.Name); err != nil {
			v.addf(at+".name", "%v", err)
		} else if prev, dup := seen[h.Name]; dup {
			v.addf(at+".name", "%q is already listed at %s", h.Name, prev)
		} else {
			seen[h.Name] = at
		}
		if h.Connection == "" {
			v.addf(at+".connection", "is empty")
		}
		v.inject(at+".inject", h.Inject)
		for j, r := range h.Rules {
			rat := fmt.Sprintf("%s.rules[%d]", at, j)
			v.rule(rat, r)
			if r.Inject != nil {
				v.ruleInject(rat+".inject", h.Inject, *r.Inject)
			}
		}
	}
	for i, name := range c.Passthrough {
		at := fmt.Sprintf("passthrough[%d]", i)
		if err := CheckHostName(name); err != nil {
			v.addf(at, "%v", err)
		} else if prev, dup := seen[name]; dup {
			v.addf(at, "%q is already listed at %s; a host is either injected or passed through", name, prev)
		} else {
			seen[name] = at
		}
	}
	v.tokenHosts(c, seen)
	listed := map[string]bool{}
	for i, name := range c.InternalHosts {
		at := fmt.Sprintf("internalHosts[%d]", i)
		switch {
		case seen[name] == "":
			v.addf(at, "%q is neither an injected nor a passthrough host", name)
		case listed[name]:
			v.addf(at, "%q is listed twice", name)
		}
		listed[name] = true
	}
	if c.UpstreamProxy != nil {
		v.upstreamProxy("upstreamProxy", c.UpstreamProxy)
	}
	return errors.Join(v.errs...)
}

type validator struct{ errs []error }

func (v *validator) addf(path, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%w: %s: %s", ErrInvalid, path, fmt.Sprintf(format, args...)))
}

func (v *validator) inject(at string, in Inject) {
	switch {
	case in.Workload():
		if in.Secret != "" {
			v.addf(at+".secret", "is %q, but the credential is the proxy's workload identity, which reads no Secret", in.Secret)
		}
	default:
		if err := CheckSecretName(in.Secret); err != nil {
			v.addf(at+".secret", "%v", err)
		}
	}
	forms := 0
	if in.Header != nil {
		forms++
		v.header(at+".header", in.Header)
	}
	if in.Basic != nil {
		forms++
		v.key(at+".basic.usernameKey", in.Basic.UsernameKey)
		v.key(at+".basic.passwordKey", in.Basic.PasswordKey)
	}
	if in.Substitute != nil {
		forms++
		v.key(at+".substitute.key", in.Substitute.Key)
		if err := CheckPlaceholder(in.Substitute.Placeholder); err != nil {
			v.addf(at+".substitute.placeholder", "%v", err)
		}
		seen := map[string]int{}
		for i, name := range in.Substitute.Headers {
			hat := fmt.Sprintf("%s.substitute.headers[%d]", at, i)
			switch {
			case !isToken(name):
				v.addf(hat, "%q is not a valid header name", name)
			case forbiddenHeader(name):
				v.addf(hat, "%s cannot carry the credential: it is hop-by-hop or frames the request", name)
			default:
				if j, dup := seen[strings.ToLower(name)]; dup {
					v.addf(hat, "%s is already listed at headers[%d]", name, j)
				}
				seen[strings.ToLower(name)] = i
			}
		}
	}
	if in.GitHubApp != nil {
		forms++
		v.githubApp(at+".githubApp", in.GitHubApp)
	}
	if in.AWSSigV4 != nil {
		forms++
		v.awsSigV4(at+".awsSigV4", in.AWSSigV4)
	}
	if in.OAuth2 != nil {
		forms++
		v.oauth2(at+".oauth2", in.OAuth2)
	}
	if in.Google != nil {
		forms++
		v.google(at+".googleServiceAccount", in.Google)
	}
	if forms != 1 {
		v.addf(at, "sets %d of header, basic, substitute, githubApp, awsSigV4, oauth2 and googleServiceAccount; exactly one is required", forms)
	}
}

// ruleInject checks a rule's own injection: a form of the host's
// credential (its Secret), a header or basic auth. A minted or
// substituted credential is one per host.
func (v *validator) ruleInject(at string, host, in Inject) {
	if in.Substitute != nil || in.GitHubApp != nil || host.Substitute != nil || host.GitHubApp != nil || in.Workload() || host.Workload() {
		v.addf(at, "a rule's own injection sets header or basic, on a host whose injection sets header or basic")
		return
	}
	v.inject(at, in)
	if in.Secret != host.Secret {
		v.addf(at+".secret", "is %q, not the host's Secret %q: a host's rules split one credential's forms", in.Secret, host.Secret)
	}
}

// HeaderForbidden reports whether the proxy refuses to inject a
// credential into header name (in any letter case): it frames the message
// or is hop-by-hop. The compiler reports such a header before a config
// holding it is rendered.
func HeaderForbidden(name string) bool { return forbiddenHeader(name) }

// forbiddenHeader reports whether name may not be injected: it frames the
// message or is hop-by-hop, so setting it would break or smuggle requests.
func forbiddenHeader(name string) bool {
	switch strings.ToLower(name) {
	case "host", "content-length", "transfer-encoding", "connection", "keep-alive",
		"proxy-authorization", "proxy-authenticate", "proxy-connection", "te", "trailer", "upgrade":
		return true
	}
	return false
}

func (v *validator) header(at string, h *HeaderInject) {
	switch {
	case !isToken(h.Name):
		v.addf(at+".name", "%q is not a valid header name", h.Name)
	case forbiddenHeader(h.Name):
		v.addf(at+".name", "%s cannot be injected: it is hop-by-hop or frames the request", h.Name)
	}
	t, err := ParseTemplate(h.Value)
	if err != nil {
		// Keep ErrTemplate in the chain so callers can tell it apart.
		v.errs = append(v.errs, fmt.Errorf("%w: %s: %w", ErrInvalid, at+".value", err))
		return
	}
	if t.LiteralBreak() {
		v.addf(at+".value", "holds a line break or NUL outside a key reference")
	}
	for _, k := range t.Keys() {
		v.key(at+".value", k)
	}
}

func (v *validator) key(at, k string) {
	if err := CheckSecretKey(k); err != nil {
		v.addf(at, "%v", err)
	}
}

func (v *validator) rule(at string, r Rule) {
	if len(r.Methods) == 0 {
		v.addf(at+".methods", "is empty; list the methods the rule allows")
	}
	for i, m := range r.Methods {
		if !isToken(m) || strings.ToUpper(m) != m {
			v.addf(fmt.Sprintf("%s.methods[%d]", at, i), "%q is not an upper-case HTTP method", m)
		}
	}
	if len(r.PathPrefixes) == 0 && len(r.PathPatterns) == 0 {
		v.addf(at, "has neither pathPrefixes nor pathPatterns, so it matches nothing")
	}
	if r.EncodedSlash != "" && !slices.Contains(EncodedSlashModes(), r.EncodedSlash) {
		v.addf(at+".encodedSlash", "%q is not an encodedSlash mode; want %s", r.EncodedSlash, strings.Join(EncodedSlashModes(), ", "))
	}
	if r.WebSocket && !slices.Contains(r.Methods, http.MethodGet) {
		v.addf(at+".websocket", "needs GET among the rule's methods: a WebSocket handshake is a GET")
	}
	if r.WebSocket && (len(r.Body) > 0 || r.GraphQL != nil || r.MCP != nil) {
		v.addf(at+".websocket", "cannot go with a body or GraphQL condition: a WebSocket handshake has no body, and the frames after it are not checked against one")
	}
	for i, p := range r.PathPrefixes {
		if err := CheckRulePath(p, false, r.EncodedSlash); err != nil {
			v.addf(fmt.Sprintf("%s.pathPrefixes[%d]", at, i), "%v", err)
		}
	}
	for i, p := range r.PathPatterns {
		if err := CheckRulePath(p, true, r.EncodedSlash); err != nil {
			v.addf(fmt.Sprintf("%s.pathPatterns[%d]", at, i), "%v", err)
		}
	}
	// In field order, so the same config is always refused with the
	// same message.
	var fields []string
	if len(r.Body) > 0 {
		fields = slices.Sorted(maps.Keys(r.Body))
	}
	for _, field := range fields {
		values := r.Body[field]
		if field == "" {
			v.addf(at+".body", "has an empty field name")
		}
		if len(values) == 0 {
			v.addf(at+".body."+field, "lists no values, so it matches nothing")
		}
	}
	if r.MCP != nil {
		v.mcp(at, r)
	}
	if g := r.GraphQL; g != nil {
		if len(r.Body) > 0 {
			v.addf(at, "sets both body and graphql; a rule has one body condition")
		}
		if len(g.Operations) == 0 {
			v.addf(at+".graphql.operations", "is empty; list the operation types the rule allows, e.g. query")
		}
		for i, op := range g.Operations {
			if !slices.Contains(GraphQLOperations(), op) {
				v.addf(fmt.Sprintf("%s.graphql.operations[%d]", at, i), "%q is not a GraphQL operation type; want one of %s", op, strings.Join(GraphQLOperations(), ", "))
			}
		}
	}
}

// CheckHostName reports whether name is a canonical DNS name: lowercase,
// no port, no trailing dot, labels of letters, digits and hyphens. The
// proxy compares canonical names byte for byte, so anything else would
// never match or, worse, match ambiguously.
func CheckHostName(name string) error {
	if name == "" {
		return errors.New("host name is empty")
	}
	if len(name) > 253 {
		return fmt.Errorf("host name %q is longer than 253 characters", name)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("host name %q has an empty or over-long label", name)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("host name %q has a label starting or ending with '-'", name)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("host name %q is not a lowercase DNS name (no ports, wildcards or upper case)", name)
			}
		}
	}
	return nil
}

// MinPlaceholderLen keeps placeholders long enough that substituting one
// cannot rewrite unrelated header text by accident.
const MinPlaceholderLen = 8

// CheckPlaceholder reports whether p can be substituted safely: printable
// ASCII without spaces, and at least MinPlaceholderLen characters.
func CheckPlaceholder(p string) error {
	if len(p) < MinPlaceholderLen {
		return fmt.Errorf("placeholder %q is shorter than %d characters", p, MinPlaceholderLen)
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] >= 0x7f {
			return fmt.Errorf("placeholder %q holds a space, control or non-ASCII character", p)
		}
	}
	return nil
}

// CheckPathPrefix reports whether p is a prefix the proxy can match
// without normalizing: "/" or "/seg/seg" with no empty, dot or encoded
// segments and no trailing slash.
func CheckPathPrefix(p string) error {
	return CheckRulePath(p, false, "")
}

// CheckPathPattern is CheckPathPrefix that also allows "*" segments and a
// final "**".
func CheckPathPattern(p string) error {
	return CheckRulePath(p, true, "")
}

// CheckRulePath is CheckPathPrefix (CheckPathPattern when pattern) for a
// rule whose EncodedSlash is encodedSlash. With EncodedSlashSegment a
// segment may also be pieces joined by an encoded '/' (%2F, either case),
// each piece neither empty nor a dot segment, and in a pattern a piece may
// be "*": the rule then reads as the same place whichever way an upstream
// reads the %2F.
func CheckRulePath(p string, pattern bool, encodedSlash string) error {
	if p == "/" {
		return nil
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q does not start with '/'", p)
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		switch {
		case s == "":
			return fmt.Errorf("path %q has an empty segment or a trailing '/'", p)
		case s == "." || s == "..":
			return fmt.Errorf("path %q has a dot segment", p)
		case pattern && s == "**" && i != len(segs)-1:
			return fmt.Errorf("pattern %q uses \"**\" before the last segment", p)
		case pattern && (s == "*" || s == "**"):
			continue
		}
		pieces := []string{s}
		if HasEncodedSlash(s) {
			if encodedSlash != EncodedSlashSegment {
				return fmt.Errorf("path %q holds an encoded '/' (%%2F), which a rule names only with encodedSlash: %s", p, EncodedSlashSegment)
			}
			pieces = SplitEncodedSlash(s)
		}
		for _, piece := range pieces {
			if err := checkPiece(p, piece, pattern, len(pieces) > 1); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkPiece checks one segment of path p, or one piece of a segment
// that holds an encoded '/' (inPieces).
func checkPiece(p, s string, pattern, inPieces bool) error {
	switch {
	case inPieces && s == "":
		return fmt.Errorf("path %q has an encoded '/' at the start or end of a segment, or beside another", p)
	case inPieces && (s == "." || s == ".."):
		return fmt.Errorf("path %q has a dot segment between encoded '/'", p)
	case inPieces && pattern && s == "*":
		return nil
	case inPieces && s == "**":
		return fmt.Errorf("pattern %q uses \"**\" beside an encoded '/'; it stands only for the last segments", p)
	case strings.ContainsAny(s, "*"):
		if pattern {
			return fmt.Errorf("pattern %q uses '*' inside a segment; a wildcard is a whole segment", p)
		}
		return fmt.Errorf("prefix %q holds '*'; use pathPatterns for wildcards", p)
	}
	for j := 0; j < len(s); j++ {
		c := s[j]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("%;?#\\", c) >= 0 {
			return fmt.Errorf("path %q holds %q; write paths literally, without encoding, parameters or queries", p, string(c))
		}
	}
	return nil
}

// HasEncodedSlash reports whether s holds an encoded '/' (%2F or %2f).
// In a path whose every '%' begins an escape, as the proxy accepts them,
// each match is an escape of its own: %252F holds none.
func HasEncodedSlash(s string) bool {
	return strings.Contains(s, "%2F") || strings.Contains(s, "%2f")
}

// SplitEncodedSlash splits a segment at each encoded '/' (%2F or %2f).
func SplitEncodedSlash(s string) []string {
	return strings.Split(CanonicalEncodedSlash(s), "%2F")
}

// CanonicalEncodedSlash spells every encoded '/' of s as %2F, so that a
// rule and a request that spell it in other cases compare equal.
func CanonicalEncodedSlash(s string) string {
	if !strings.Contains(s, "%2f") {
		return s
	}
	return strings.ReplaceAll(s, "%2f", "%2F")
}

// isToken reports whether s is an RFC 9110 token (header names, methods).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
