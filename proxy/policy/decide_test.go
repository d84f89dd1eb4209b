package policy

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// testPolicy is the policy of the config package's github-acme fixture.
func testPolicy(t testing.TB) *Policy {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join("..", "config", "testdata", "github-acme.json"))
	if err != nil {
		t.Fatal(err)
	}
	return policyOf(t, string(cfg))
}

// policyOf is the policy of a proxy config given as JSON.
func policyOf(t testing.TB, cfg string) *Policy {
	t.Helper()
	c, err := config.Decode([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(c)
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
		// The method policy: some methods never carry a credential,
		// whatever the rules say; a host without rules forwards only
		// the methods APIs are called with.
		"no rules trace":        {req: uploadsReq("TRACE", "/"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"no rules lower trace":  {req: uploadsReq("trace", "/"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"no rules track":        {req: uploadsReq("TRACK", "/"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"no rules connect":      {req: uploadsReq("CONNECT", "uploads.github.com:443"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"no rules connect path": {req: uploadsReq("CONNECT", "/"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"no rules options star": {req: uploadsReq("OPTIONS", "*"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"no rules options path": {req: uploadsReq("OPTIONS", "/x"), action: ActionInject, reason: ReasonAllowed},
		"no rules propfind":     {req: uploadsReq("PROPFIND", "/"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"no rules purge":        {req: uploadsReq("PURGE", "/"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"no rules lower get":    {req: uploadsReq("get", "/"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"no rules delete":       {req: uploadsReq("DELETE", "/x"), action: ActionInject, reason: ReasonAllowed},
		"rules trace":           {req: tunnelReq("TRACE", "/repos/acme/widgets"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"rules connect":         {req: tunnelReq("CONNECT", "api.github.com:443"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		// Override headers and the _method parameter are refused on
		// injected hosts, with or without rules.
		"method override post":         {req: withHeader(tunnelReq("POST", "/repos/acme/widgets/pulls"), "X-HTTP-Method-Override", "DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-http-method":                {req: withHeader(tunnelReq("POST", "/repos/acme/widgets/pulls"), "X-HTTP-Method", "DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-method-override":            {req: withHeader(tunnelReq("POST", "/repos/acme/widgets/pulls"), "X-Method-Override", "DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"override lower case":          {req: withHeader(tunnelReq("POST", "/repos/acme/widgets/pulls"), "x-http-method-override", "DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"override underscores":         {req: withHeader(tunnelReq("POST", "/repos/acme/widgets/pulls"), "X_HTTP_METHOD_OVERRIDE", "DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"override empty value":         {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-HTTP-Method-Override", ""), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-original-method":            {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-Original-Method", "DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-forwarded-method":           {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-Forwarded-Method", "DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-original-url":               {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-Original-URL", "/user"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-rewrite-url":                {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-Rewrite-Url", "/user"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-override-url":               {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-Override-URL", "/user"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-original-uri":               {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-Original-URI", "/user"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-forwarded-uri":              {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-Forwarded-Uri", "/user"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-forwarded-path":             {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-Forwarded-Path", "/user"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-forwarded-prefix":           {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-Forwarded-Prefix", "/user"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"x-envoy-original-path":        {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-Envoy-Original-Path", "/user"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"override on no rules":         {req: withHeader(uploadsReq("GET", "/x"), "X-HTTP-Method-Override", "TRACE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"other x- header":              {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-Request-Id", "/user"), action: ActionInject, reason: ReasonAllowed},
		"near miss header":             {req: withHeader(tunnelReq("GET", "/repos/acme/widgets"), "X-HTTP-Method-Overrides", "DELETE"), action: ActionInject, reason: ReasonAllowed},
		"_method query":                {req: tunnelReq("POST", "/repos/acme/widgets/pulls?_method=DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"_method after others":         {req: tunnelReq("POST", "/repos/acme/widgets/pulls?a=1&_method=DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"_method after ;":              {req: tunnelReq("POST", "/repos/acme/widgets/pulls?a=1;_method=DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"_method encoded":              {req: tunnelReq("POST", "/repos/acme/widgets/pulls?%5Fmethod=DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"_method upper case":           {req: tunnelReq("POST", "/repos/acme/widgets/pulls?_METHOD=DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"_method php dot":              {req: tunnelReq("POST", "/repos/acme/widgets/pulls?.method=DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"_method php space":            {req: tunnelReq("POST", "/repos/acme/widgets/pulls?+_method=DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"_method php array":            {req: tunnelReq("POST", "/repos/acme/widgets/pulls?_method[]=DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"_method without value":        {req: tunnelReq("GET", "/repos/acme/widgets?_method"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"_method cut at NUL":           {req: tunnelReq("GET", "/repos/acme/widgets?a=1&_method%00x=DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"_method php array cut at NUL": {req: tunnelReq("GET", "/repos/acme/widgets?_method%00[]=DELETE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"_method double encoded":       {req: tunnelReq("GET", "/repos/acme/widgets?%255fmethod=DELETE"), action: ActionInject, reason: ReasonAllowed},
		"_method on no rules":          {req: uploadsReq("POST", "/x?_method=TRACE"), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"method query allowed":         {req: tunnelReq("GET", "/repos/acme/widgets?method=DELETE&x_method=1&_methods=2"), action: ActionInject, reason: ReasonAllowed},
		"_method as value":             {req: tunnelReq("GET", "/repos/acme/widgets?q=_method"), action: ActionInject, reason: ReasonAllowed},
		"git clone refs":               {req: gitReq("GET", "/acme/widgets.git/info/refs?service=git-upload-pack", ""), action: ActionInject, reason: ReasonAllowed},
		"git clone pack":               {req: gitReq("POST", "/acme/widgets.git/git-upload-pack", ""), action: ActionInject, reason: ReasonAllowed},
		"git push pack":                {req: gitReq("POST", "/acme/widgets.git/git-receive-pack", ""), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"lfs download":                 {req: gitReq("POST", "/acme/widgets.git/info/lfs/objects/batch", `{"operation":"download","objects":[]}`), action: ActionInject, reason: ReasonAllowed},
		"lfs upload":                   {req: gitReq("POST", "/acme/widgets.git/info/lfs/objects/batch", `{"operation":"upload","objects":[]}`), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"lfs duplicate field":          {req: gitReq("POST", "/acme/widgets.git/info/lfs/objects/batch", `{"operation":"download","Operation":"upload"}`), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"lfs truncated body":           {req: with(gitReq("POST", "/acme/widgets.git/info/lfs/objects/batch", `{"operation":"download"}`), func(r *RequestInfo) { r.BodyComplete = false }), action: ActionRefuse, reason: ReasonL7NotAllowed},
		"plain passthrough":            {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://pypi.org/simple/", Host: "pypi.org"}, action: ActionForward, reason: ReasonAllowed, host: "pypi.org"},
		"plain passthrough port 80":    {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://PyPI.org.:80/simple/"}, action: ActionForward, reason: ReasonAllowed, host: "pypi.org"},
		"plain other port":             {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://pypi.org:8080/"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"plain injected host":          {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://api.github.com/repos/acme/widgets"}, action: ActionRefuse, reason: ReasonL7NotAllowed, host: "api.github.com"},
		"plain unknown host":           {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://evil.example/"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"plain origin form":            {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "/healthz"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"plain userinfo":               {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://evil@pypi.org/"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
		"plain https scheme":           {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "https://pypi.org/"}, action: ActionRefuse, reason: ReasonHostNotAllowed},
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

// uploadsReq is a request in a tunnel to uploads.github.com, a host
// without rules.
func uploadsReq(method, target string) RequestInfo {
	return RequestInfo{Kind: KindTunnel, Method: method, Target: target, ConnectHost: "uploads.github.com:443", SNI: "uploads.github.com", Host: "uploads.github.com", BodyComplete: true}
}

// withHeader adds a header to r, keyed exactly as given.
func withHeader(r RequestInfo, name, value string) RequestInfo {
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h[name] = append(h[name], value)
	r.Header = h
	return r
}

func gitReq(method, target, body string) RequestInfo {
	return RequestInfo{Kind: KindTunnel, Method: method, Target: target, ConnectHost: "github.com:443", SNI: "github.com", Host: "github.com", Body: []byte(body), BodyComplete: true,
		ContentType: []string{"application/vnd.git-lfs+json; charset=utf-8"}}
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

// TestDecisionHostPolicy: a decision to intercept or inject carries the
// compiled policy of the host it names, what the server applies, with
// the config's scrubbing; no other decision carries one.
func TestDecisionHostPolicy(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "config", "testdata", "github-acme.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ScrubResponseBodies = true
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		req  RequestInfo
		host string // the host policy's name; "" for none
	}{
		"intercept":           {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "API.github.com.:443"}, host: "api.github.com"},
		"inject":              {req: tunnelReq("GET", "/repos/acme/widgets"), host: "api.github.com"},
		"tunnel":              {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "pypi.org:443"}},
		"forward":             {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://pypi.org/simple/"}},
		"refused, not listed": {req: RequestInfo{Kind: KindConnect, Method: "CONNECT", Target: "example.com:443"}},
		"refused by a rule":   {req: tunnelReq("GET", "/user")},
		"refused, plain http to an injected host": {req: RequestInfo{Kind: KindPlain, Method: "GET", Target: "http://api.github.com/"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := p.Decide(tc.req)
			hp := d.HostPolicy()
			if tc.host == "" {
				if hp != nil {
					t.Fatalf("%s decision carries the host policy of %s", d.Action, hp.Name)
				}
				return
			}
			if hp == nil || hp.Name != tc.host || hp != p.Host(tc.host) {
				t.Fatalf("%s decision carries %v, want the host policy of %s", d.Action, hp, tc.host)
			}
			if hp.Connection != d.Connection || !hp.ScrubResponseBodies() {
				t.Fatalf("host policy of connection %s, scrubbing %v; want connection %s, scrubbing", hp.Connection, hp.ScrubResponseBodies(), d.Connection)
			}
		})
	}
}

func TestDecideOneShot(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "config", "testdata", "github-acme.json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := decideOnce(cfg, tunnelReq("GET", "/user"))
	if err != nil || d.Reason != ReasonL7NotAllowed {
		t.Fatalf("Decide = %+v, %v; want l7-not-allowed", d, err)
	}
	if _, err := decideOnce(&config.Config{}, tunnelReq("GET", "/")); err == nil {
		t.Fatal("Decide accepted an invalid config")
	}
}

func FuzzDecide(f *testing.F) {
	p := testPolicy(f)
	const lfs = "application/vnd.git-lfs+json"
	// tunnel seeds a request inside a tunnel to host, where CONNECT, SNI
	// and Host agree.
	tunnel := func(method, target, host string, body []byte, contentType string) {
		f.Add(int8(KindTunnel), method, target, host+":443", host, host, body, contentType)
	}
	tunnel("GET", "/repos/acme/widgets", "api.github.com", nil, "")
	tunnel("POST", "/acme/widgets.git/info/lfs/objects/batch", "github.com", []byte(`{"operation":"download"}`), lfs)
	tunnel("POST", "/acme/widgets.git/info/lfs/objects/batch", "github.com", []byte(`{"operation":"download","OPERATION":"upload"}`), lfs)
	f.Add(int8(KindConnect), "CONNECT", "API.github.com.:443", "", "", "", []byte(nil), "")
	f.Add(int8(KindPlain), "GET", "http://pypi.org/simple/", "", "", "pypi.org", []byte(nil), "")
	tunnel("GET", "/repos/acme/widgets/%2e%2e/x", "api.github.com", nil, "")
	tunnel("trace", "/", "uploads.github.com", nil, "")
	tunnel("POST", "/x?%5fmethod=DELETE", "uploads.github.com", nil, "")
	tunnel("GET", "/@acme%2fwidgets", "uploads.github.com", nil, "")
	tunnel("GET", "/repos/acme/widgets/a%2F..%2Fb", "api.github.com", nil, "")
	tunnel("POST", "/acme/widgets%2Finfo/lfs/objects/batch", "github.com", []byte(`{"operation":"upload"}`), "application/json")
	// The catalog's rules (catalogPolicy), decided too: names a
	// condition decides on, elsewhere than the body; GraphQL over GET.
	tunnel("POST", "/graphql?query=mutation%7Bx%7D", "api.github.com", []byte(`{"query":"{a}"}`), "application/json")
	tunnel("POST", "/acme/widgets.git/info/lfs/objects/batch?%6Fperation[]=upload", "github.com", []byte(`{"operation":"download"}`), lfs)
	tunnel("GET", "/graphql?query=%7Ba%7D&operationName=&variables=%7B%7D", "api.github.com", nil, "")
	tunnel("HEAD", "/graphql/?query=query+Q%7Ba%7D+mutation+M%7Bb%7D&operationName=Q", "api.github.com", nil, "")
	tunnel("GET", "/graphql", "api.github.com", []byte(`{"query":"mutation{x}"}`), "application/json")
	tunnel("POST", "/acme/widgets.git/git-upload-pack", "github.com", []byte("a=1;operation=upload"), "")
	// Rules with encodedSlash: segment (slashConfig), decided too.
	tunnel("GET", "/@acme%2fwidgets", "npm-scope.example", nil, "")
	tunnel("GET", "/@acme%2f..%2f@other%2fx", "npm-scope.example", nil, "")
	tunnel("GET", "/@acme%2fx%252F..", "npm-scope.example", nil, "")
	tunnel("GET", "/api/v4/projects/acme%2Fwidgets/issues", "gitlab-project.example", nil, "")
	tunnel("GET", "/api/v4/projects/acme%2F%2e%2E%2Fother", "gitlab-project.example", nil, "")
	tunnel("GET", "/api/v4/groups/a%2fb", "gitlab-project.example", nil, "")
	tunnel("POST", "/api/v4/projects/a%2Fb/issues", "gitlab-project.example", nil, "")
	catalog, slash := catalogPolicy(f), policyOf(f, slashConfig)
	f.Fuzz(func(t *testing.T, kind int8, method, target, connect, sni, host string, body []byte, contentType string) {
		req := RequestInfo{Kind: Kind(kind % 3), Method: method, Target: target, ConnectHost: connect, SNI: sni, Host: host, Body: body, BodyComplete: true,
			ContentType: []string{contentType}}
		checkReadPlaces(t, catalog, req)
		if d := slash.Decide(req); d.Allowed() && req.Kind == KindTunnel {
			// Whatever it allows is clean, and with an encoded '/' only
			// where a rule allows it as assertEitherWay says.
			path, err := TargetPath(target)
			if errors.Is(err, errEncodedSlash) {
				if path, err = targetPath(target, true); err == nil {
					assertEitherWay(t, slash.Host(d.Host), method, path, Body{Data: body, Complete: true, ContentType: []string{contentType}})
				}
			}
			if err != nil {
				t.Fatalf("allowed unclean target %q on %s: %v", target, d.Host, err)
			}
			for _, r := range slash.Host(d.Host).Rules {
				if r.EncodedSlash == config.EncodedSlashSegment && MatchRule(r, method, path, Body{}) && config.HasEncodedSlash(path) && doubleEncoded(path) {
					t.Fatalf("allowed %q on %s, which holds a double encoding", target, d.Host)
				}
			}
		}
		d := p.Decide(req)
		if d.Reason == "" || d.Action == "" {
			t.Fatalf("empty decision for %+v", req)
		}
		// Only a decision to intercept or inject carries a host policy,
		// and it is the policy of the host it names.
		hp := d.HostPolicy()
		if carries := d.Action == ActionIntercept || d.Action == ActionInject; carries != (hp != nil) || hp != nil && hp != p.Host(d.Host) {
			t.Fatalf("%s decision on %q carries host policy %v", d.Action, d.Host, hp)
		}
		if d.Allowed() {
			if d.Reason != ReasonAllowed {
				t.Fatalf("allowed with reason %s", d.Reason)
			}
			if req.Kind == KindTunnel {
				// Whatever is allowed in a tunnel is a clean origin-form
				// path on the tunnel's own host; one with an encoded '/'
				// only where a rule allows it read either way.
				path, err := TargetPath(target)
				if errors.Is(err, errEncodedSlash) {
					path, err = targetPath(target, true)
					if err == nil {
						assertEitherWay(t, p.Host(d.Host), method, path, Body{Data: body, Complete: true, ContentType: []string{contentType}})
					}
				}
				if err != nil {
					t.Fatalf("allowed unclean target %q", target)
				}
				if c, _ := CanonicalHost(host, "443"); c != d.Host {
					t.Fatalf("allowed Host %q on tunnel %q", host, d.Host)
				}
				// Never a method that must not carry a credential, never
				// one no rule names on a host with rules, never _method.
				if m, known := methodRule(method); known && !m.Credential || !known && len(p.Host(d.Host).Rules) == 0 {
					t.Fatalf("allowed method %q", method)
				}
				if name, ok := overrideParam(target); ok {
					t.Fatalf("allowed %q, which names %s", target, name)
				}
				if name, err := overrideInBody(Body{Data: body, Complete: true, ContentType: []string{contentType}}); name != "" || err != nil {
					t.Fatalf("allowed a body with the override %q (%v)", name, err)
				}
				// A Git LFS batch request goes through only as a
				// download, however a JSON reader upstream reads it.
				if d.Host == "github.com" && method == "POST" && (MatchPattern("/*/*/info/lfs/objects/batch", path) || MatchPattern("/*/*/info/lfs/objects/batch", decodeSlashes(path))) {
					assertReadersFind(t, body, "operation", "download")
				}
			}
		} else if d.Reason.Status() == 0 || strings.ContainsAny(d.Message, "\r\n") {
			t.Fatalf("bad refusal %+v", d)
		}
	})
}

// TestDecideMethodPolicyOverRules: a rule cannot let a method that never
// carries a credential through, and an extension method goes through
// only where a rule names it.
func TestDecideMethodPolicyOverRules(t *testing.T) {
	cfg := &config.Config{APIVersion: config.APIVersion, Kind: config.Kind, Sandbox: config.SandboxRef{Name: "s"},
		Hosts: []config.Host{{Name: "dav.example.com", Connection: "dav",
			Inject: config.Inject{Secret: "sec", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}},
			Rules:  []config.Rule{{Methods: []string{"TRACE", "CONNECT", "TRACK", "PROPFIND", "GET"}, PathPrefixes: []string{"/"}}}}}}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req := func(method, target string) RequestInfo {
		return RequestInfo{Kind: KindTunnel, Method: method, Target: target, ConnectHost: "dav.example.com:443", SNI: "dav.example.com", Host: "dav.example.com", BodyComplete: true}
	}
	tests := map[string]struct {
		req    RequestInfo
		action Action
		msg    string
	}{
		"TRACE named by a rule":   {req: req("TRACE", "/"), action: ActionRefuse, msg: "never forwarded with a credential"},
		"CONNECT named by a rule": {req: req("CONNECT", "dav.example.com:443"), action: ActionRefuse, msg: "never forwarded with a credential"},
		"TRACK named by a rule":   {req: req("TRACK", "/"), action: ActionRefuse, msg: "echoes the request"},
		"PROPFIND named":          {req: req("PROPFIND", "/files"), action: ActionInject},
		"MKCOL not named":         {req: req("MKCOL", "/files"), action: ActionRefuse, msg: "no rule"},
		"GET named":               {req: req("GET", "/files"), action: ActionInject},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := p.Decide(tc.req)
			if d.Action != tc.action {
				t.Fatalf("Decide = %+v, want %s", d, tc.action)
			}
			if tc.action == ActionRefuse && (d.Reason != ReasonL7NotAllowed || !strings.Contains(d.Message, tc.msg)) {
				t.Fatalf("refusal %s %q, want l7-not-allowed saying %q", d.Reason, d.Message, tc.msg)
			}
		})
	}
}

// TestPolicyTablesDocumented keeps docs/proxy.md's method and header
// tables in step with the policy: every row is there with its reason.
func TestPolicyTablesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "proxy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range MethodPolicy() {
		if !strings.Contains(string(doc), "| `"+m.Method+"` |") {
			t.Errorf("docs/proxy.md has no row for the method %s", m.Method)
		}
	}
	for _, o := range Overrides() {
		if row := "| `" + o.Name + "` | " + o.In.String() + " |"; !strings.Contains(string(doc), row) {
			t.Errorf("docs/proxy.md has no row %q", row)
		}
	}
}

func BenchmarkDecideTunnel(b *testing.B) {
	p := testPolicy(b)
	req := tunnelReq("GET", "/repos/acme/widgets/issues?state=open")
	for b.Loop() {
		if d := p.Decide(req); !d.Allowed() {
			b.Fatal(d)
		}
	}
}

// TestNameAllowed: the names a sandbox may resolve are exactly the
// injected and passthrough hosts' names.
func TestNameAllowed(t *testing.T) {
	p := testPolicy(t)
	tests := map[string]bool{
		"api.github.com":           true,
		"github.com":               true,
		"uploads.github.com":       true,
		"pypi.org":                 true,
		"x.api.github.com":         false,
		"api.github.com.svc.local": false,
		"exfil.example":            false,
		"":                         false,
		"api.github.com:443":       false,
		"files.pythonhosted.org":   false,
		"c2VjcmV0.api.github.com":  false,
	}
	for name, want := range tests {
		if got := p.NameAllowed(name); got != want {
			t.Errorf("NameAllowed(%q) = %v, want %v", name, got, want)
		}
	}
}
