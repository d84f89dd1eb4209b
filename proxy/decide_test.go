package proxy

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

func testPolicy(t testing.TB) *Policy {
	t.Helper()
	cfg, err := config.Load(filepath.Join("config", "testdata", "github-acme.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tunnelReq is a request inside a tunnel to api.github.com where CONNECT,
// SNI and Host agree; cases override what they test.
func tunnelReq(method, target string) RequestInfo {
	return RequestInfo{Kind: KindTunnel, Method: method, Target: target, ConnectHost: "api.github.com:443", SNI: "api.github.com", Host: "api.github.com", BodyComplete: true}
}

func TestDecide(t *testing.T) {
	p := testPolicy(t)
	with := func(r RequestInfo, f func(*RequestInfo)) RequestInfo { f(&r); return r }
	tests := map[string]struct {
		req    RequestInfo
		action Action
		reason Reason
		host   string
	}{
		// CONNECT.
		"connect injected":          {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "api.github.com:443"}, action: ActionIntercept, reason: ReasonAllowed, host: "api.github.com"},
		"connect upper case dot":    {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "API.GitHub.com.:443"}, action: ActionIntercept, reason: ReasonAllowed, host: "api.github.com"},
		"connect passthrough":       {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "pypi.org:443"}, action: ActionTunnel, reason: ReasonAllowed, host: "pypi.org"},
		"connect unknown host":      {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "evil.example:443"}, action: ActionRefuse, reason: ReasonHostNotAllowed, host: "evil.example"},
		"connect other port":        {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "api.github.com:8443"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"connect ip literal":        {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "140.82.112.6:443"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"connect subdomain":         {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "x.api.github.com:443"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"connect garbage":           {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "a:b:c"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"connect userinfo":          {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "pypi.org@evil:443"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"tunnel allowed":            {req: tunnelReq("GET", "/repos/acme/widgets"), action: ActionInject, reason: ReasonAllowed, host: "api.github.com"},
		"tunnel allowed subpath":    {req: tunnelReq("GET", "/repos/acme/widgets/issues?state=open"), action: ActionInject, reason: ReasonAllowed},
		"tunnel head":               {req: tunnelReq("HEAD", "/repos/acme/widgets"), action: ActionInject, reason: ReasonAllowed},
		"tunnel post pulls":         {req: tunnelReq("POST", "/repos/acme/widgets/pulls"), action: ActionInject, reason: ReasonAllowed},
		"tunnel post elsewhere":     {req: tunnelReq("POST", "/repos/acme/widgets/issues"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel user":               {req: tunnelReq("GET", "/user"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel sibling repo":       {req: tunnelReq("GET", "/repos/acme/widgets-old"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel lower-case method":  {req: tunnelReq("get", "/repos/acme/widgets"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel delete":             {req: tunnelReq("DELETE", "/repos/acme/widgets"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel dot segment":        {req: tunnelReq("GET", "/repos/acme/widgets/../../other/x"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel encoded dot":        {req: tunnelReq("GET", "/repos/acme/widgets/%2e%2E/x"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel encoded slash":      {req: tunnelReq("GET", "/repos/acme/widgets%2fx"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel encoded backslash":  {req: tunnelReq("GET", "/repos/acme/widgets/%5cx"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel empty segment":      {req: tunnelReq("GET", "/repos//acme/widgets"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel trailing slash":     {req: tunnelReq("GET", "/repos/acme/widgets/"), action: ActionInject, reason: ReasonAllowed},
		"tunnel semicolon":          {req: tunnelReq("GET", "/repos/acme/widgets;x=1"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel control char":       {req: tunnelReq("GET", "/repos/acme/widgets\x01"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel asterisk form":      {req: tunnelReq("OPTIONS", "*"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel absolute same host": {req: with(tunnelReq("GET", "https://api.github.com/repos/acme/widgets"), func(r *RequestInfo) {}), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"tunnel absolute other":     {req: with(tunnelReq("GET", "https://evil.example/repos/acme/widgets"), func(r *RequestInfo) { r.Host = "evil.example" }), action: ActionRefuse, reason: ReasonHostMismatch},
		"tunnel host mismatch":      {req: with(tunnelReq("GET", "/repos/acme/widgets"), func(r *RequestInfo) { r.Host = "github.com" }), action: ActionRefuse, reason: ReasonHostMismatch},
		"tunnel host port 443":      {req: with(tunnelReq("GET", "/repos/acme/widgets"), func(r *RequestInfo) { r.Host = "API.github.com.:443" }), action: ActionInject, reason: ReasonAllowed},
		"tunnel host other port":    {req: with(tunnelReq("GET", "/repos/acme/widgets"), func(r *RequestInfo) { r.Host = "api.github.com:444" }), action: ActionRefuse, reason: ReasonHostMismatch},
		"tunnel sni mismatch":       {req: with(tunnelReq("GET", "/repos/acme/widgets"), func(r *RequestInfo) { r.SNI = "github.com" }), action: ActionRefuse, reason: ReasonHostMismatch},
		"tunnel no sni":             {req: with(tunnelReq("GET", "/repos/acme/widgets"), func(r *RequestInfo) { r.SNI = "" }), action: ActionRefuse, reason: ReasonHostMismatch},
		"tunnel no host":            {req: with(tunnelReq("GET", "/repos/acme/widgets"), func(r *RequestInfo) { r.Host = "" }), action: ActionRefuse, reason: ReasonHostMismatch},
		"tunnel host gone": {req: with(tunnelReq("GET", "/x"), func(r *RequestInfo) {
			r.ConnectHost, r.SNI, r.Host = "gone.example:443", "gone.example", "gone.example"
		}), action: ActionRefuse, reason: ReasonHostNotAllowed},
		"tunnel no rules host": {req: with(tunnelReq("PUT", "/anything/at/all"), func(r *RequestInfo) {
			r.ConnectHost, r.SNI, r.Host = "uploads.github.com:443", "uploads.github.com", "uploads.github.com"
		}), action: ActionInject, reason: ReasonAllowed},
		"git clone refs":            {req: gitReq("GET", "/acme/widgets.git/info/refs?service=git-upload-pack", ""), action: ActionInject, reason: ReasonAllowed},
		"git clone pack":            {req: gitReq("POST", "/acme/widgets.git/git-upload-pack", ""), action: ActionInject, reason: ReasonAllowed},
		"git push pack":             {req: gitReq("POST", "/acme/widgets.git/git-receive-pack", ""), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"lfs download":              {req: gitReq("POST", "/acme/widgets.git/info/lfs/objects/batch", `{"operation":"download","objects":[]}`), action: ActionInject, reason: ReasonAllowed},
		"lfs upload":                {req: gitReq("POST", "/acme/widgets.git/info/lfs/objects/batch", `{"operation":"upload","objects":[]}`), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"lfs duplicate field":       {req: gitReq("POST", "/acme/widgets.git/info/lfs/objects/batch", `{"operation":"download","Operation":"upload"}`), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"lfs truncated body":        {req: with(gitReq("POST", "/acme/widgets.git/info/lfs/objects/batch", `{"operation":"download"}`), func(r *RequestInfo) { r.BodyComplete = false }), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"plain passthrough":         {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://pypi.org/simple/", Host: "pypi.org"}, action: ActionForward, reason: ReasonAllowed, host: "pypi.org"},
		"plain passthrough port 80": {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://PyPI.org.:80/simple/"}, action: ActionForward, reason: ReasonAllowed, host: "pypi.org"},
		"plain other port":          {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://pypi.org:8080/"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"plain injected host":       {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://api.github.com/repos/acme/widgets"}, action: ActionRefuse, reason: ReasonL7NotAllowed, host: "api.github.com"},
		"plain unknown host":        {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://evil.example/"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"plain origin form":         {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "/healthz"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"plain userinfo":            {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://evil@pypi.org/"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"plain https scheme":        {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "https://pypi.org/"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := p.Decide(tc.req)
			if d.Action != tc.action || d.Reason != tc.reason {
				t.Fatalf("Decide = %+v, want %s/%s", d, tc.action, tc.reason)
			}
			if tc.host != "" && d.Host != tc.host {
				t.Errorf("Host = %q, want %q", d.Host, tc.host)
			}
			if d.Allowed() != (tc.action != ActionRefuse) {
				t.Errorf("Allowed() = %v for %s", d.Allowed(), d.Action)
			}
			if !d.Allowed() && (d.Message == "" || strings.ContainsAny(d.Message, "\r\n")) {
				t.Errorf("refusal message %q is not one line", d.Message)
			}
		})
	}
}

func gitReq(method, target, body string) RequestInfo {
	return RequestInfo{Kind: KindTunnel, Method: method, Target: target, ConnectHost: "github.com:443", SNI: "github.com", Host: "github.com", Body: []byte(body), BodyComplete: true}
}

func TestReasonStatus(t *testing.T) {
	tests := map[string]struct {
		reason Reason
		status int
	}{
		"allowed":                {reason: ReasonAllowed, status: 0},
		"host-not-allowed":       {reason: ReasonHostNotAllowed, status: http.StatusForbidden},
		"l7-not-allowed":         {reason: ReasonL7NotAllowed, status: http.StatusForbidden},
		"host-mismatch":          {reason: ReasonHostMismatch, status: http.StatusForbidden},
		"credential-unavailable": {reason: ReasonCredentialUnavailable, status: http.StatusBadGateway},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if string(tc.reason) != name {
				t.Errorf("reason spelled %q, want %q (a compatibility contract)", tc.reason, name)
			}
			if got := tc.reason.Status(); got != tc.status {
				t.Errorf("Status() = %d, want %d", got, tc.status)
			}
		})
	}
}

func TestDecideOneShot(t *testing.T) {
	cfg, err := config.Load(filepath.Join("config", "testdata", "github-acme.json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decide(cfg, tunnelReq("GET", "/user"))
	if err != nil || d.Reason != ReasonL7NotAllowed {
		t.Fatalf("Decide = %+v, %v; want l7-not-allowed", d, err)
	}
	if _, err := Decide(&config.Config{}, tunnelReq("GET", "/")); err == nil {
		t.Fatal("Decide accepted an invalid config")
	}
}

func FuzzDecide(f *testing.F) {
	p := testPolicy(f)
	f.Add(int8(1), "GET", "/repos/acme/widgets", "api.github.com:443", "api.github.com", "api.github.com", []byte(nil))
	f.Add(int8(1), "POST", "/acme/widgets.git/info/lfs/objects/batch", "github.com:443", "github.com", "github.com", []byte(`{"operation":"download"}`))
	f.Add(int8(0), "CONNECT", "API.github.com.:443", "", "", "", []byte(nil))
	f.Add(int8(2), "GET", "http://pypi.org/simple/", "", "", "pypi.org", []byte(nil))
	f.Add(int8(1), "GET", "/repos/acme/widgets/%2e%2e/x", "api.github.com:443", "api.github.com", "api.github.com", []byte(nil))
	f.Fuzz(func(t *testing.T, kind int8, method, target, connect, sni, host string, body []byte) {
		req := RequestInfo{Kind: Kind(kind % 3), Method: method, Target: target, ConnectHost: connect, SNI: sni, Host: host, Body: body, BodyComplete: true}
		d := p.Decide(req)
		if d.Reason == "" || d.Action == "" {
			t.Fatalf("empty decision for %+v", req)
		}
		if d.Allowed() {
			if d.Reason != ReasonAllowed {
				t.Fatalf("allowed with reason %s", d.Reason)
			}
			if req.Kind == KindTunnel {
				// Whatever is allowed in a tunnel is a clean origin-form
				// path on the tunnel's own host.
				if _, err := TargetPath(target); err != nil {
					t.Fatalf("allowed unclean target %q", target)
				}
				if c, _ := CanonicalHost(host, "443"); c != d.Host {
					t.Fatalf("allowed Host %q on tunnel %q", host, d.Host)
				}
			}
		} else if d.Reason.Status() == 0 || strings.ContainsAny(d.Message, "\r\n") {
			t.Fatalf("bad refusal %+v", d)
		}
	})
}
