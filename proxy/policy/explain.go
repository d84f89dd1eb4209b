package policy

import (
	"fmt"
	"strings"
)

// DecideURL gives the verdict on a request for rawURL as a well-behaved
// client would send it through the proxy: for https:// a CONNECT to
// host:443 and then, on an injected host, the request inside the tunnel
// with SNI and Host naming the same host; for http:// an absolute-form
// request. The URL's path and query are used exactly as typed, never
// normalized, so the verdict is the proxy's. body matters only for rules
// with a Body condition, and is sent as application/json. A fragment
// (#...) is dropped first: clients never send one. A wss:// URL is an
// https:// one whose GET is a WebSocket handshake. It is what
// `keyhole explain` prints.
func (p *Policy) DecideURL(method, rawURL string, body []byte) Decision {
	rawURL, _, _ = strings.Cut(rawURL, "#")
	var contentType []string
	if body != nil {
		contentType = []string{"application/json"}
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return Refusal(ReasonHostNotAllowed, "", "%q is not an absolute http://, https:// or wss:// URL", Clip(rawURL))
	}
	webSocket := false
	switch strings.ToLower(scheme) {
	case "http":
		return p.Decide(RequestInfo{Kind: KindPlain, Method: method, Target: rawURL, Body: body, BodyComplete: true, ContentType: contentType})
	case "wss":
		webSocket = method == "GET" && len(body) == 0
	case "https":
	default:
		return Refusal(ReasonHostNotAllowed, "", "scheme %q cannot go through the proxy", Clip(scheme))
	}
	authority, target := rest, "/"
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, target = rest[:i], rest[i:]
		if target[0] != '/' {
			target = "/" + target
		}
	}
	// Clients send userinfo as Authorization, never in the CONNECT.
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	connect := authority
	if !strings.Contains(strings.TrimPrefix(connect, "["), ":") || strings.HasSuffix(connect, "]") {
		connect += ":443"
	}
	d := p.Decide(RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: connect})
	if d.Action != ActionIntercept {
		return d
	}
	return p.Decide(RequestInfo{
		Kind: KindTunnel, Method: method, Target: target,
		ConnectHost: connect, SNI: d.Host, Host: d.Host,
		Body: body, BodyComplete: true, ContentType: contentType,
		WebSocket: webSocket,
	})
}

// String renders a decision on one line for people: the verdict, the
// reason and, for a refusal, the status and why.
func (d Decision) String() string {
	if d.Allowed() {
		s := fmt.Sprintf("%s %s (%s)", d.Action, d.Host, d.Reason)
		if d.Connection != "" {
			s += " with the credential of connection " + d.Connection
		}
		if d.WebSocket {
			s += ", upgraded to a WebSocket"
		}
		return s
	}
	return fmt.Sprintf("refuse: %d %s: %s", d.Reason.Status(), d.Reason, d.Message)
}
