// Package policy is the egress proxy's decision, apart from the network:
// NewPolicy compiles a config.Config, and Policy.Decide turns a
// RequestInfo into a Decision with an enumerated Reason and, when it
// allows an injected host, the compiled HostPolicy it was made against,
// which is all the server then applies. It also owns what a request to
// an injected host may be (the method and override policy, the rules
// and their body conditions) and the classes of address the proxy dials.
// `keyhole explain`, `keyhole diff` and the compiler call the same
// functions to show the verdict the proxy would give, without a server
// or secret files.
package policy

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
)

// RefusedHeader carries the refusal reason on every response the proxy
// itself refuses. Sandbox tools and users grep for it.
const RefusedHeader = "X-Omnia-Egress-Refused"

// Reason is why a request was allowed or refused. The refusal values are
// a compatibility contract with the product documents: keep them exactly.
type Reason string

// The reasons. Decide returns every one except ReasonCredentialUnavailable,
// which only reading the mounted Secret can reveal (see Inject), and
// ReasonUpstreamProxyFailed, which only dialling through the configured
// forward proxy can.
const (
	ReasonAllowed               Reason = "allowed"
	ReasonHostNotAllowed        Reason = "host-not-allowed"
	ReasonL7NotAllowed          Reason = "l7-not-allowed"
	ReasonHostMismatch          Reason = "host-mismatch"
	ReasonCredentialUnavailable Reason = "credential-unavailable"
	ReasonUpstreamProxyFailed   Reason = "upstream-proxy-failed"
)

// Status is the HTTP status the proxy answers a refusal with; 0 for
// ReasonAllowed, whose status is the upstream's.
func (r Reason) Status() int {
	switch r {
	case ReasonHostNotAllowed, ReasonL7NotAllowed, ReasonHostMismatch:
		return http.StatusForbidden
	case ReasonCredentialUnavailable, ReasonUpstreamProxyFailed:
		return http.StatusBadGateway
	}
	return 0
}

// Action is what the proxy does with a request.
type Action string

// The actions. Only ActionRefuse carries a refusal reason.
const (
	// ActionRefuse answers with Reason.Status() and RefusedHeader.
	ActionRefuse Action = "refuse"
	// ActionTunnel answers a CONNECT to a passthrough host and copies
	// bytes both ways, untouched.
	ActionTunnel Action = "tunnel"
	// ActionIntercept answers a CONNECT to an injected host and
	// terminates its TLS with a leaf from the sandbox CA.
	ActionIntercept Action = "intercept"
	// ActionInject forwards a request read inside an intercepted tunnel,
	// with the credential injected.
	ActionInject Action = "inject"
	// ActionForward forwards an absolute-form http:// request to a
	// passthrough host, without injection.
	ActionForward Action = "forward"
	// ActionAudit forwards, without the credential, a request to an
	// injected host that only the host's rules refuse, because its
	// Connection is in audit mode (config.Host.Audit). Reason is the
	// refusal's and Message says why, as a refusal's would; the proxy
	// logs it loudly. Every other refusal holds in audit mode.
	ActionAudit Action = "audit"
)

// Kind says where a request was read, which decides what it may do.
type Kind int

// The kinds of request the proxy reads.
const (
	// KindConnect is a CONNECT on the proxy's listener; Target is its
	// authority, host:port.
	KindConnect Kind = iota
	// KindTunnel is a request read inside an intercepted tunnel.
	KindTunnel
	// KindPlain is a non-CONNECT request on the proxy's listener; a
	// forward proxy expects absolute-form http:// targets there.
	KindPlain
)

// RequestInfo is everything Decide looks at. It holds no credential.
type RequestInfo struct {
	Kind Kind
	// Method is the request method as sent.
	Method string
	// Target is the request-target as sent: host:port for CONNECT, the
	// origin-form path and query inside a tunnel, an absolute URL for a
	// plain proxy request.
	Target string
	// ConnectHost is the CONNECT authority of the tunnel (KindTunnel).
	ConnectHost string
	// SNI is the TLS server name the client sent in the tunnel (KindTunnel).
	SNI string
	// Host is the request's Host (KindTunnel), or for an absolute-form
	// target the target's authority, as the server read it.
	Host string
	// Header is the request's header (KindTunnel), checked for the
	// override headers an injected host refuses; nil checks none.
	Header http.Header
	// Body is the request body (KindTunnel), read when the host's rules
	// need it or when its Content-Type (OverrideBodyType) lets servers
	// read fields from it, which are checked for overrides.
	Body []byte
	// BodyComplete is false when Body was cut at the read limit, so no
	// Body rule can match it; nor can Decide see all of its override
	// fields, which the server then looks for as the body streams
	// (NewOverrideScanner).
	BodyComplete bool
	// ContentType and ContentEncoding are every value of those request
	// headers, as sent: a Body rule needs a body declared as JSON.
	ContentType     []string
	ContentEncoding []string
	// WebSocket is set for a well-formed WebSocket handshake
	// (KindTunnel): a bodiless GET asking to upgrade to websocket alone,
	// with Sec-WebSocket-Version 13 and a Sec-WebSocket-Key of 16 bytes
	// (IsWebSocketHandshake), as read before hop-by-hop headers were
	// stripped.
	WebSocket bool
}

// Decision is the verdict on one request. It is a value: log it, count it,
// print it; it holds no secret.
type Decision struct {
	Action Action
	Reason Reason
	// Host is the canonical host the request names ("" if it names none).
	Host string
	// Connection is the Connection the host's credential comes from.
	Connection string
	// Message is a one-line human explanation for a refusal.
	Message string
	// MCP, set for a request to an MCP endpoint (a path a rule with an
	// MCP condition covers), says how the proxy answers it (mcp.go).
	MCP *MCPExchange
	// WebSocket is set when the request is a WebSocket handshake that
	// a rule with websocket: true allows (ActionInject): the proxy asks
	// the upstream to upgrade and relays the frames. A handshake no such
	// rule allows is decided as a plain request, and goes out without
	// its Upgrade.
	WebSocket bool
	// host is the injected host's compiled policy the decision was
	// made against: set for ActionIntercept and ActionInject, nil
	// otherwise.
	host *HostPolicy
	// WouldAllow is, for ActionAudit, the rule that would allow the
	// request, in keyhole suggest's words (auditDecision).
	WouldAllow string
}

// HostPolicy is the injected host's compiled policy the decision was made
// against, which is what the proxy applies (the credential, the header it
// sets, whether response bodies are scrubbed): set for ActionIntercept
// and ActionInject, nil for every other action, refusals included.
func (d Decision) HostPolicy() *HostPolicy { return d.host }

// Allowed reports whether the proxy goes ahead with the request.
func (d Decision) Allowed() bool { return d.Action != ActionRefuse }

// Refusal builds a refusal decision; the message is one line.
func Refusal(reason Reason, host, format string, args ...any) Decision {
	msg := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, fmt.Sprintf(format, args...))
	return Decision{Action: ActionRefuse, Reason: reason, Host: host, Message: msg}
}

// Policy is a compiled config: the injected and passthrough hosts indexed
// by name, templates parsed. It is immutable and safe for concurrent use.
type Policy struct {
	sandbox     config.SandboxRef
	hosts       map[string]*HostPolicy
	passthrough map[string]bool
	internal    map[string]bool // hosts that may resolve to internal addresses
	names       map[string]bool // every host's name without its port
}

// HostPolicy is one injected host, compiled.
type HostPolicy struct {
	// Host is the config entry, unchanged.
	config.Host
	template  *config.Template // nil unless Inject.Header is set
	needsBody bool
	// decided holds the names the host's body and GraphQL conditions
	// decide on, refused wherever else a framework reads them.
	decided decidedNames
	// graphQL is set when a rule has a GraphQL condition, mcp when one
	// has an MCP condition.
	graphQL, mcp bool
	// scrubBodies is the config's ScrubResponseBodies.
	scrubBodies bool
	// forms holds, per rule, the host compiled with the rule's own
	// Inject, or nil where the rule takes the host's: what a request the
	// rule decides gets. nil when no rule has its own.
	forms []*HostPolicy
	// form numbers each rule's injection form, equal forms alike, so that
	// two rules of different forms allowing one request are told apart.
	form []int
}

// NewPolicy validates cfg and compiles it.
func NewPolicy(cfg *config.Config) (*Policy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Policy{sandbox: cfg.Sandbox, hosts: map[string]*HostPolicy{}, passthrough: map[string]bool{}}
	for _, h := range cfg.Hosts {
		hp := &HostPolicy{Host: h, scrubBodies: cfg.ScrubResponseBodies}
		if h.Inject.Header != nil {
			t, err := config.ParseTemplate(h.Inject.Header.Value)
			if err != nil {
				return nil, fmt.Errorf("%w: host %s: %w", config.ErrInvalid, h.Name, err)
			}
			hp.template = t
		}
		for _, r := range h.Rules {
			if len(r.Body) > 0 || r.GraphQL != nil || r.MCP != nil {
				hp.needsBody = true
			}
			if r.GraphQL != nil {
				hp.graphQL = true
			}
			if r.MCP != nil {
				hp.mcp = true
			}
		}
		hp.decided = newDecidedNames(h.Rules)
		if err := hp.compileForms(); err != nil {
			return nil, err
		}
		p.hosts[h.Name] = hp
	}
	for _, name := range cfg.Passthrough {
		p.passthrough[name] = true
	}
	p.internal = map[string]bool{}
	for _, name := range cfg.InternalHosts {
		p.internal[name] = true
	}
	p.names = map[string]bool{}
	for _, h := range cfg.Hosts {
		p.names[hostName(h.Name)] = true
	}
	for _, name := range cfg.Passthrough {
		p.names[hostName(name)] = true
	}
	return p, nil
}

// compileForms compiles the rules that set their own injection: each
// gets a copy of the host with that Inject and its template.
func (h *HostPolicy) compileForms() error {
	if !slices.ContainsFunc(h.Rules, func(r config.Rule) bool { return r.Inject != nil }) {
		return nil
	}
	base := *h
	h.forms = make([]*HostPolicy, len(h.Rules))
	h.form = make([]int, len(h.Rules))
	seen := []config.Inject{h.Inject}
	for i, r := range h.Rules {
		if r.Inject == nil || sameInject(*r.Inject, h.Inject) {
			continue
		}
		v := base
		v.Inject = *r.Inject
		v.template = nil
		if r.Inject.Header != nil {
			t, err := config.ParseTemplate(r.Inject.Header.Value)
			if err != nil {
				return fmt.Errorf("%w: host %s: rule %d: %w", config.ErrInvalid, h.Name, i, err)
			}
			v.template = t
		}
		h.forms[i] = &v
		n := slices.IndexFunc(seen, func(in config.Inject) bool { return sameInject(in, *r.Inject) })
		if n < 0 {
			n = len(seen)
			seen = append(seen, *r.Inject)
		}
		h.form[i] = n
	}
	return nil
}

// sameInject reports whether two header or basic injections set the
// same credential the same way.
func sameInject(a, b config.Inject) bool {
	if a.Secret != b.Secret || (a.Header == nil) != (b.Header == nil) || (a.Basic == nil) != (b.Basic == nil) ||
		a.Substitute != nil || b.Substitute != nil || a.GitHubApp != nil || b.GitHubApp != nil {
		return false
	}
	return (a.Header == nil || *a.Header == *b.Header) && (a.Basic == nil || *a.Basic == *b.Basic)
}

// formOf is the host as a request that rule i decides gets it.
func (h *HostPolicy) formOf(i int) *HostPolicy {
	if i < 0 || h.forms == nil || h.forms[i] == nil {
		return h
	}
	return h.forms[i]
}

// NameAllowed reports whether name (lowercase, no trailing dot, no port)
// is the name of a host the config injects or passes through, on any
// port: the names the sandbox may resolve.
func (p *Policy) NameAllowed(name string) bool { return p.names[name] }

// Host returns the injected host named by a canonical name, or nil.
func (p *Policy) Host(name string) *HostPolicy { return p.hosts[name] }

// Template is the compiled value template of the host's header
// injection; nil when the injection is basic auth.
func (h *HostPolicy) Template() *config.Template { return h.template }

// Passthrough reports whether host (host:port, canonical) is tunnelled
// without injection.
func (p *Policy) Passthrough(host string) bool { return p.passthrough[host] }

// NeedsBody reports whether a rule of this host looks at request bodies,
// so the server knows to read (bounded) and replay them.
func (h *HostPolicy) NeedsBody() bool { return h.needsBody }

// ScrubResponseBodies reports whether the credential is scrubbed from the
// bodies of this host's responses too, not only from their headers (the
// config's ScrubResponseBodies).
func (h *HostPolicy) ScrubResponseBodies() bool { return h.scrubBodies }

// Decide gives the verdict on req. It never reads files or the network;
// the credential itself is checked later, by Inject.
func (p *Policy) Decide(req RequestInfo) Decision {
	switch req.Kind {
	case KindConnect:
		return p.decideConnect(req)
	case KindTunnel:
		return p.withMCP(p.decideTunnel(req, true), req)
	case KindPlain:
		return p.decidePlain(req)
	}
	return Refusal(ReasonHostNotAllowed, "", "unknown request kind")
}

func (p *Policy) decideConnect(req RequestInfo) Decision {
	host, err := CanonicalHost(req.Target, "443")
	if err != nil {
		return Refusal(ReasonHostNotAllowed, "", "CONNECT target refused: %v", err)
	}
	if h := p.hosts[host]; h != nil {
		return Decision{Action: ActionIntercept, Reason: ReasonAllowed, Host: host, Connection: h.Connection, host: h}
	}
	if p.passthrough[host] {
		return Decision{Action: ActionTunnel, Reason: ReasonAllowed, Host: host}
	}
	return Refusal(ReasonHostNotAllowed, host, "%s is not an allowed host for sandbox %s (only port 443 is reachable through CONNECT)", Clip(host), p.sandbox.Name)
}

// RefusedWhateverBody decides a request read in a tunnel on everything
// but its body (req.Body is not looked at) and reports whether it is
// refused whatever the body holds: its host, method, path, query string
// and headers, or no rule of its host allowing its method and path with
// any body. The server asks it before it reads a body, so that a request
// it would refuse anyway is answered at once, never made to wait for a
// body (or, with Expect: 100-continue, given a 100 it then hangs on). A
// request it does not refuse is decided by Decide once its body is read;
// any other kind of request is decided by Decide alone.
func (p *Policy) RefusedWhateverBody(req RequestInfo) (Decision, bool) {
	if req.Kind != KindTunnel {
		d := p.Decide(req)
		return d, !d.Allowed()
	}
	d := p.decideTunnel(req, false)
	return d, !d.Allowed()
}

// decideTunnel decides a request read in a tunnel. Without bodyKnown it
// decides on everything but the body, and what it allows may still be
// refused by it (RefusedWhateverBody).
func (p *Policy) decideTunnel(req RequestInfo, bodyKnown bool) Decision {
	tunnel, err := CanonicalHost(req.ConnectHost, "443")
	h := p.hosts[tunnel]
	if err != nil || h == nil {
		// The tunnel was opened under an older config that allowed it.
		return Refusal(ReasonHostNotAllowed, tunnel, "%s is no longer an injected host for sandbox %s", Clip(tunnel), p.sandbox.Name)
	}
	if d, ok := sameHost(tunnel, "TLS server name", req.SNI); !ok {
		return d
	}
	if d, ok := sameHost(tunnel, "Host header", req.Host); !ok {
		return d
	}
	if _, rest, ok := strings.Cut(req.Target, "://"); ok && !strings.HasPrefix(req.Target, "/") {
		// Absolute-form inside a tunnel: its authority must agree too,
		// then TargetPath refuses it as not origin-form.
		authority := rest
		if i := strings.IndexAny(authority, "/?#"); i >= 0 {
			authority = authority[:i]
		}
		if d, ok := sameHost(tunnel, "absolute-form target", authority); !ok {
			return d
		}
	}
	refuse := func(format string, args ...any) Decision {
		d := Refusal(ReasonL7NotAllowed, tunnel, format, args...)
		d.Connection = h.Connection
		return d
	}
	if m, known := methodRule(req.Method); known && !m.Credential {
		return refuse("%s is never forwarded with a credential: %s", Clip(req.Method), m.Why)
	} else if !known && len(h.Rules) == 0 {
		return refuse("%s is forwarded with a credential only when a rule of connection %s names it", Clip(req.Method), h.Connection)
	}
	path, err := TargetPath(req.Target)
	slashed := false
	if errors.Is(err, errEncodedSlash) {
		// An encoded '/' inside a segment (npm's /@scope%2fname,
		// GitLab's group%2Fproject): upstreams read it as part of the
		// segment or as a separator, so a rule must allow the request
		// either way, and a host without rules allows
		// every path anyway. It is forwarded as sent.
		path, err = targetPath(req.Target, true)
		slashed = err == nil
	}
	if err != nil {
		return refuse("%v", err)
	}
	if name, ok := overrideHeader(req.Header); ok {
		return refuse("the %s header is refused on injected hosts: servers read it as another method or path than the request line's, which the rules checked", name)
	}
	if name, ok := overrideParam(req.Target); ok {
		return refuse("the %s query parameter is refused on injected hosts: servers read it as another method than the request line's, which the rules checked", name)
	}
	if revokesMintedToken(h, req.Method, path) {
		return refuse("%s %s is refused on %s: it revokes the token the proxy mints for connection %s, which serves other requests too", Clip(req.Method), Clip(path), tunnel, h.Connection)
	}
	body := Body{Data: req.Body, Complete: req.BodyComplete, ContentType: req.ContentType, ContentEncoding: h.OverrideEncodings(req.ContentEncoding)}
	if bodyKnown {
		if name, err := overrideInBody(body); err != nil {
			return refuse("%v", err)
		} else if name != "" {
			return refuse("the body's %s field is refused on injected hosts: servers read it as another method than the request line's, which the rules checked", name)
		}
	}
	// What a body or GraphQL condition decides on must be all the
	// upstream reads (readplaces.go).
	var graphQL []config.GraphQL
	if h.graphQL && isSafeMethod(req.Method) {
		graphQL = h.graphQLAt(path)
	}
	safeGraphQL := len(graphQL) > 0
	if h.decided != nil {
		_, rawQuery, _ := strings.Cut(req.Target, "?")
		if safeGraphQL {
			if bodyKnown && (len(req.Body) > 0 || !req.BodyComplete) {
				return refuse("%s %s on %s has a body: on a GraphQL endpoint a %s carries its request in the query string, and servers read one or the other", Clip(req.Method), Clip(path), tunnel, Clip(req.Method))
			}
			if err := checkGraphQLQuery(graphQL, h.decided, rawQuery); err != nil {
				return refuse("no rule of connection %s allows %s %s on %s: %s", h.Connection, Clip(req.Method), Clip(path), tunnel, strings.TrimPrefix(err.Error(), ErrBody.Error()+": "))
			}
		} else if name, ok := h.decided.decidedInForm(rawQuery); ok {
			return refuse("the query string's %s parameter is refused on %s: a rule of connection %s decides on %s in the body, and servers read it from the query string too", name, tunnel, h.Connection, name)
		}
		if bodyKnown {
			if name, ok := h.decided.decidedInBody(body); ok {
				return refuse("the body's %s form field is refused on %s: a rule of connection %s decides on %s in a JSON body, and servers read form fields as the same parameter", name, tunnel, h.Connection, name)
			}
		}
	}
	webSocket := false
	decided, split := -1, h.forms != nil
	if len(h.Rules) > 0 {
		allowed, why := false, ""
		for i, r := range h.Rules {
			if safeGraphQL {
				r.GraphQL = nil // its request was checked in the query string
			}
			if !bodyKnown {
				r.Body, r.GraphQL, r.MCP = nil, nil, nil
			}
			err := ruleAllows(r, req.Method, path, slashed, body)
			if err == nil {
				if split && decided >= 0 && h.form[i] != h.form[decided] {
					// Two forms for one request: which credential the
					// upstream wants cannot be told, so neither is sent.
					return refuse("rules %d and %d of connection %s both allow %s %s on %s and inject the credential in different forms; narrow one so each request has one", decided, i, h.Connection, Clip(req.Method), Clip(path), tunnel)
				}
				if !allowed || !webSocket && req.WebSocket && r.WebSocket {
					decided = i
				}
				allowed = true
				// A handshake looks on for a rule that lets it upgrade;
				// a host whose rules inject in several forms looks at
				// them all.
				if webSocket = webSocket || req.WebSocket && r.WebSocket; !split && (webSocket || !req.WebSocket) {
					break
				}
				continue
			}
			if why == "" && errors.Is(err, ErrBody) {
				// The method and path fit this rule; say why the body
				// did not.
				why = ": " + strings.TrimPrefix(err.Error(), ErrBody.Error()+": ")
			}
			if why == "" && errors.Is(err, errDoubleEncoded) {
				why = ": " + err.Error()
			}
		}
		if !allowed && h.Audit {
			// A rule's refusal, the one kind audit mode forwards
			// (audit.go).
			d := refuse("no rule of connection %s allows %s %s on %s%s", h.Connection, Clip(req.Method), Clip(path), tunnel, why)
			return auditDecision(d, req.Method, path)
		}
		if !allowed && slashed {
			return refuse("no rule of connection %s allows %s %s on %s both as sent and with its encoded '/' read as a separator, as some upstreams read it, nor with encodedSlash: segment, which reads it as part of its segment%s", h.Connection, Clip(req.Method), Clip(path), tunnel, why)
		}
		if !allowed {
			return refuse("no rule of connection %s allows %s %s on %s%s", h.Connection, Clip(req.Method), Clip(path), tunnel, why)
		}
	}
	return Decision{Action: ActionInject, Reason: ReasonAllowed, Host: tunnel, Connection: h.Connection, host: h.formOf(decided), WebSocket: webSocket}
}

// errDoubleEncoded is ruleAllows' answer for a path holding an encoded
// '/' that a rule with encodedSlash: segment would match but that also
// holds an encoded '%' beginning an escape.
var errDoubleEncoded = errors.New("the path holds an encoded '%' that begins an escape (%252F), which an upstream decoding twice reads otherwise; a rule with encodedSlash: segment refuses it")

// ruleAllows is one rule's verdict on a request whose path (as
// targetPath accepts it with slashes) holds an encoded '/' when slashed.
// A rule with encodedSlash: segment matches the path with each %2F part
// of its segment and refuses double encoding (%252F) beside it, whose
// reading depends on how often the upstream decodes; any other rule
// must allow the path both as sent and with each %2F read as '/'.
func ruleAllows(r config.Rule, method, path string, slashed bool, body Body) error {
	err := matchRule(r, method, path, body)
	switch {
	case err != nil:
		return err
	case !slashed:
		return nil
	case r.EncodedSlash == config.EncodedSlashSegment:
		if doubleEncoded(path) {
			return errDoubleEncoded
		}
		return nil
	}
	return matchRule(r, method, decodeSlashes(path), body)
}

// RuleAllows reports whether rule r lets a request with this method,
// path and body through as Decide does. path is as sent and, unlike
// TargetPath's, may hold an encoded '/' (%2F) inside a segment, which r
// reads as its EncodedSlash says; what Decide refuses whatever the rules
// (a dot segment, an empty one left by a %2F) is not checked here.
func RuleAllows(r config.Rule, method, path string, body Body) bool {
	return ruleAllows(r, method, path, config.HasEncodedSlash(path), body) == nil
}

// sameHost checks that got (an SNI, Host or absolute-form authority) names
// the tunnel's host once canonicalized.
func sameHost(tunnel, what, got string) (Decision, bool) {
	c, err := CanonicalHost(got, "443")
	if err != nil || c != tunnel {
		return Refusal(ReasonHostMismatch, tunnel, "the %s %q does not name the tunnel's host %s; send each host's requests on its own connection", what, Clip(got), tunnel), false
	}
	return Decision{}, true
}

func (p *Policy) decidePlain(req RequestInfo) Decision {
	scheme, rest, ok := strings.Cut(req.Target, "://")
	if !ok || strings.HasPrefix(req.Target, "/") {
		return Refusal(ReasonHostNotAllowed, "", "this is a forward proxy: send absolute-form http:// requests or CONNECT")
	}
	authority := rest
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	if strings.Contains(authority, "@") {
		return Refusal(ReasonHostNotAllowed, "", "userinfo in a proxy request target is refused")
	}
	scheme = strings.ToLower(scheme)
	host, err := CanonicalHost(authority, "80")
	if err != nil {
		return Refusal(ReasonHostNotAllowed, "", "target refused: %v", err)
	}
	if h := p.hosts[strings.TrimSuffix(host, ":443")]; h != nil {
		d := Refusal(ReasonL7NotAllowed, strings.TrimSuffix(host, ":443"), "credentials are injected only over HTTPS: use https://%s through CONNECT", h.Name)
		d.Connection = h.Connection
		return d
	}
	if scheme == "http" && p.passthrough[host] {
		return Decision{Action: ActionForward, Reason: ReasonAllowed, Host: host}
	}
	return Refusal(ReasonHostNotAllowed, host, "%s://%s is not an allowed target for sandbox %s (plain requests reach passthrough hosts on port 80 only)", Clip(scheme), Clip(host), p.sandbox.Name)
}
