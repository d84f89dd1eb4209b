package policy

import (
	"net/http"
	"testing"
)

func TestIsWebSocketHandshake(t *testing.T) {
	good := func() http.Header {
		return http.Header{
			"Connection": {"keep-alive, Upgrade"}, "Upgrade": {"websocket"},
			"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="},
		}
	}
	with := func(f func(http.Header)) http.Header { h := good(); f(h); return h }
	tests := map[string]struct {
		method       string
		http10, body bool
		header       http.Header
		want         bool
	}{
		"handshake":                   {method: "GET", header: good(), want: true},
		"upper-case WebSocket":        {method: "GET", header: with(func(h http.Header) { h["Upgrade"] = []string{"WebSocket"} }), want: true},
		"POST":                        {method: "POST", header: good()},
		"HTTP/1.0":                    {method: "GET", http10: true, header: good()},
		"a body":                      {method: "GET", body: true, header: good()},
		"Connection does not name it": {method: "GET", header: with(func(h http.Header) { h["Connection"] = []string{"keep-alive"} })},
		"no Connection":               {method: "GET", header: with(func(h http.Header) { delete(h, "Connection") })},
		"h2c":                         {method: "GET", header: with(func(h http.Header) { h["Upgrade"] = []string{"h2c"} })},
		"websocket and h2c":           {method: "GET", header: with(func(h http.Header) { h["Upgrade"] = []string{"websocket, h2c"} })},
		"two Upgrade lines":           {method: "GET", header: with(func(h http.Header) { h["Upgrade"] = []string{"websocket", "h2c"} })},
		"version 8":                   {method: "GET", header: with(func(h http.Header) { h["Sec-Websocket-Version"] = []string{"8"} })},
		"two versions":                {method: "GET", header: with(func(h http.Header) { h["Sec-Websocket-Version"] = []string{"13", "8"} })},
		"no key":                      {method: "GET", header: with(func(h http.Header) { delete(h, "Sec-Websocket-Key") })},
		"a key of 5 bytes":            {method: "GET", header: with(func(h http.Header) { h["Sec-Websocket-Key"] = []string{"c2hvcnQ="} })},
		"a key that is not base64":    {method: "GET", header: with(func(h http.Header) { h["Sec-Websocket-Key"] = []string{"dGhlIHNhbXBsZSBub25jZQ!!"} })},
		"two keys": {method: "GET", header: with(func(h http.Header) {
			h["Sec-Websocket-Key"] = []string{"dGhlIHNhbXBsZSBub25jZQ==", "dGhlIHNhbXBsZSBub25jZQ=="}
		})},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := IsWebSocketHandshake(tc.method, !tc.http10, !tc.body, tc.header); got != tc.want {
				t.Errorf("IsWebSocketHandshake = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDecideWebSocket: a handshake upgrades only where a rule with
// websocket: true allows its path; elsewhere it is decided as the plain
// request it goes out as, and a plain request never upgrades.
func TestDecideWebSocket(t *testing.T) {
	p := policyOf(t, `{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig","sandbox":{"name":"s"},
		"hosts":[{"name":"api.github.com","connection":"c","inject":{"secret":"sec","header":{"name":"Authorization","value":"Bearer {{ .token }}"}},
		  "rules":[{"methods":["GET"],"pathPrefixes":["/v1"]},
		           {"methods":["GET"],"pathPrefixes":["/v1/realtime"],"websocket":true}]}]}`)
	ws := func(method, target string) RequestInfo { r := tunnelReq(method, target); r.WebSocket = true; return r }
	tests := map[string]struct {
		req       RequestInfo
		action    Action
		webSocket bool
	}{
		"handshake on the websocket path":         {req: ws("GET", "/v1/realtime?model=x"), action: ActionInject, webSocket: true},
		"handshake below it":                      {req: ws("GET", "/v1/realtime/sessions"), action: ActionInject, webSocket: true},
		"handshake on a path another rule allows": {req: ws("GET", "/v1/models"), action: ActionInject},
		"handshake nowhere allowed":               {req: ws("GET", "/v2/realtime"), action: ActionRefuse},
		"plain request on the websocket path":     {req: tunnelReq("GET", "/v1/realtime"), action: ActionInject},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := p.Decide(tc.req)
			if d.Action != tc.action || d.WebSocket != tc.webSocket {
				t.Errorf("Decide = %s, websocket %v (%s); want %s, websocket %v", d.Action, d.WebSocket, d.Message, tc.action, tc.webSocket)
			}
		})
	}
}
