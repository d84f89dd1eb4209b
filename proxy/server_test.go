package proxy

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

func TestServerInjection(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := map[string]struct {
		method, url string
		header      http.Header
		body        string
		status      int
		refused     policy.Reason
		wantAuth    string // Authorization the upstream saw
	}{
		"bearer set": {method: "GET", url: "https://api.github.com/repos/acme/widgets",
			header: http.Header{"Authorization": {"Bearer omnia-injected-github-acme"}},
			status: 200, wantAuth: "Bearer " + canary},
		"bearer set without header": {method: "GET", url: "https://api.github.com/repos/acme/widgets/pulls?state=open",
			status: 200, wantAuth: "Bearer " + canary},
		"l7 refused": {method: "GET", url: "https://api.github.com/user", status: 403, refused: policy.ReasonL7NotAllowed},
		"l7 method":  {method: "DELETE", url: "https://api.github.com/repos/acme/widgets", status: 403, refused: policy.ReasonL7NotAllowed},
		"basic for git": {method: "GET", url: "https://github.com/acme/widgets.git/info/refs?service=git-upload-pack",
			status: 200, wantAuth: "Basic " + b64("x-access-token:"+canary)},
		"git push refused": {method: "POST", url: "https://github.com/acme/widgets.git/git-receive-pack", body: "0000",
			status: 403, refused: policy.ReasonL7NotAllowed},
		"lfs download": {method: "POST", url: "https://github.com/acme/widgets.git/info/lfs/objects/batch",
			header: http.Header{"Content-Type": {"application/vnd.git-lfs+json; charset=utf-8"}},
			body:   `{"operation":"download","objects":[]}`, status: 200, wantAuth: "Basic " + b64("x-access-token:"+canary)},
		"lfs upload refused": {method: "POST", url: "https://github.com/acme/widgets.git/info/lfs/objects/batch",
			body: `{"operation":"upload","objects":[]}`, status: 403, refused: policy.ReasonL7NotAllowed},
		"substitute in basic": {method: "GET", url: "https://uploads.github.com/x",
			header: http.Header{"Authorization": {"Basic " + b64("x-access-token:omnia-injected-github")}},
			status: 200, wantAuth: "Basic " + b64("x-access-token:"+canary)},
		"substitute bearer": {method: "GET", url: "https://uploads.github.com/x",
			header: http.Header{"Authorization": {"token omnia-injected-github"}},
			status: 200, wantAuth: "token " + canary},
		"substitute not in url": {method: "GET", url: "https://uploads.github.com/omnia-injected-github?t=omnia-injected-github",
			status: 200, wantAuth: ""},
		// Only the header the injection names gets the credential; the
		// placeholder elsewhere (a cookie, another header a client might
		// carry a token in, an encoded path, the body) goes out as sent.
		"substitute only where named": {method: "POST", url: "https://uploads.github.com/omnia%2Dinjected%2Dgithub/omnia-injected-github",
			header: http.Header{"Authorization": {"token omnia-injected-github"}, "Cookie": {"session=omnia-injected-github"},
				"X-Api-Key": {"omnia-injected-github"}, "Private-Token": {"omnia-injected-github"}, "X-Request-Id": {"omnia-injected-github"}},
			body: `{"token":"omnia-injected-github"}`, status: 200, wantAuth: "token " + canary},
		"redirect untouched":        {method: "GET", url: "https://api.github.com/redirect", status: 302, wantAuth: "Bearer " + canary},
		"upstream refusal stripped": {method: "GET", url: "https://api.github.com/refuses", status: 200, wantAuth: "Bearer " + canary},
		"host not allowed":          {method: "GET", url: "https://evil.example/", status: -1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(h.api.seen())
			req, err := http.NewRequest(tc.method, tc.url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header[k] = v
			}
			resp, err := c.Do(req)
			if tc.status == -1 {
				// Go's client reports a refused CONNECT as an error
				// naming the status.
				if err == nil || !strings.Contains(err.Error(), "Forbidden") {
					t.Fatalf("Do = %v, want a 403 CONNECT error", err)
				}
				if len(h.api.seen()) != before {
					t.Fatal("a refused host reached the upstream")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			body := readBody(t, resp)
			if resp.StatusCode != tc.status {
				t.Fatalf("status = %d (%s), want %d", resp.StatusCode, body, tc.status)
			}
			if got := resp.Header.Get(policy.RefusedHeader); got != string(tc.refused) {
				t.Fatalf("%s = %q, want %q", policy.RefusedHeader, got, tc.refused)
			}
			got := h.api.seen()[before:]
			if tc.refused != "" {
				if len(got) != 0 {
					t.Fatal("a refused request reached the upstream")
				}
				if strings.Count(body, "\n") != 1 || !strings.HasPrefix(body, "keyhole: "+string(tc.refused)) {
					t.Errorf("refusal body %q is not one line naming the reason", body)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("upstream saw %d requests, want 1", len(got))
			}
			if a := got[0].Header.Get("Authorization"); a != tc.wantAuth {
				t.Errorf("upstream Authorization = %q, want %q", a, tc.wantAuth)
			}
			for k, vv := range got[0].Header {
				if k != "Authorization" && strings.Contains(strings.Join(vv, "\n"), canary) {
					t.Errorf("upstream header %s holds the credential", k)
				}
			}
			if strings.Contains(got[0].URI, canary) {
				t.Errorf("upstream target %q holds the credential", got[0].URI)
			}
			if got[0].Body != tc.body {
				t.Errorf("upstream body = %q, want %q", got[0].Body, tc.body)
			}
			if strings.Contains(body, canary) {
				t.Error("response body holds the secret")
			}
		})
	}
	t.Run("redirect location", func(t *testing.T) {
		resp, err := c.Get("https://api.github.com/redirect")
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if loc := resp.Header.Get("Location"); loc != "https://evil.example/steal" {
			t.Fatalf("Location = %q, want the upstream's, untouched", loc)
		}
	})
	t.Run("log lines", func(t *testing.T) {
		var found bool
		for _, l := range h.logs.requests(t) {
			for _, k := range []string{"sandbox", "host", "method", "path", "decision", "reason", "status", "duration_ms"} {
				if _, ok := l[k]; !ok {
					t.Fatalf("log line %v lacks %s", l, k)
				}
			}
			if l["path"] == "/repos/acme/widgets/pulls" && l["decision"] == "inject" && l["reason"] == "allowed" &&
				l["status"] == float64(200) && l["sandbox"] == "agents/support" && l["host"] == "api.github.com" && l["method"] == "GET" {
				found = true
			}
			if p, _ := l["path"].(string); strings.Contains(p, "?") {
				t.Errorf("log path %q holds a query", p)
			}
		}
		if !found {
			t.Fatalf("no log line for GET /repos/acme/widgets/pulls:\n%s", h.logs.String())
		}
	})
	t.Run("metrics", func(t *testing.T) {
		m := h.get("/metrics")
		for _, want := range []string{
			`keyhole_proxy_requests_total{host="api.github.com",decision="inject",reason="allowed"}`,
			`keyhole_proxy_requests_total{host="api.github.com",decision="refuse",reason="l7-not-allowed"} 2`,
			`keyhole_proxy_requests_total{host="_other",decision="refuse",reason="host-not-allowed"} 1`,
			`keyhole_proxy_cert_mints_total 3`,
			`keyhole_proxy_upstream_latency_seconds_bucket{le="+Inf"}`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s:\n%s", want, m)
			}
		}
	})
	t.Run("canary", func(t *testing.T) {
		if strings.Contains(h.logs.String(), canary) {
			t.Fatal("the secret appears in the logs")
		}
		if strings.Contains(h.get("/metrics"), canary) {
			t.Fatal("the secret appears in the metrics")
		}
	})
}

func TestServerConnectRefusal(t *testing.T) {
	h := newHarness(t)
	tests := map[string]string{
		"unknown host":  "evil.example:443",
		"other port":    "api.github.com:22",
		"ip literal":    "127.0.0.1:443",
		"resolved name": h.api.srv.Listener.Addr().String(),
		// Spellings of loopback a resolver or inet_aton reads as an
		// address: refused by name, never resolved or dialled.
		"decimal IPv4":     "2130706433:443",
		"octal IPv4":       "0177.0.0.1:443",
		"hexadecimal IPv4": "0x7f.0.0.1:443",
		"short IPv4":       "127.1:443",
		"IPv6 loopback":    "[::1]:443",
		"IPv4-mapped IPv6": "[::ffff:127.0.0.1]:443",
		"IPv6 with a zone": "[fe80::1%25eth0]:443",
		"localhost":        "localhost:443",
		"an injected host as a prefix of another": "api.github.com.evil.example:443",
		"an injected host as a suffix of another": "evilapi.github.com:443",
		"the metadata address":                    "169.254.169.254:443",
	}
	for name, target := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(h.api.seen())
			c, br, resp := h.connect(target)
			defer c.Close()
			if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonHostNotAllowed) {
				t.Fatalf("CONNECT %s = %s %q", target, resp.Status, resp.Header.Get(policy.RefusedHeader))
			}
			io.Copy(io.Discard, resp.Body)
			// The connection is closed: nothing more can be sent on it.
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if n, err := br.ReadByte(); err == nil {
				t.Fatalf("connection still open after refusal (read %q)", n)
			}
			if len(h.api.seen()) != before {
				t.Fatal("refused CONNECT reached an upstream")
			}
		})
	}
	t.Run("an injected host with an encoded NUL", func(t *testing.T) {
		// Go's server refuses the target before the proxy sees it.
		c, _, resp := h.connect("api.github.com%00:443")
		defer c.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("CONNECT = %s", resp.Status)
		}
	})
}

func TestServerHostMismatch(t *testing.T) {
	h := newHarness(t)
	get := func(host string) string {
		return fmt.Sprintf("GET /repos/acme/widgets HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	}
	t.Run("keep-alive", func(t *testing.T) {
		c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
		defer c.Close()
		if resp := roundTrip(t, c, br, get("api.github.com")); resp.StatusCode != 200 {
			t.Fatalf("first request = %s", resp.Status)
		}
		if resp := roundTrip(t, c, br, get("API.GitHub.com.:443")); resp.StatusCode != 200 {
			t.Fatalf("canonical spelling = %s", resp.Status)
		}
		before := len(h.api.seen())
		resp := roundTrip(t, c, br, get("github.com"))
		if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonHostMismatch) {
			t.Fatalf("second host on the connection = %s %q", resp.Status, resp.Header.Get(policy.RefusedHeader))
		}
		if len(h.api.seen()) != before {
			t.Fatal("a mismatched request reached the upstream")
		}
	})
	tests := map[string]struct {
		sni, raw string
	}{
		"sni differs":           {sni: "github.com", raw: get("api.github.com")},
		"host differs":          {sni: "api.github.com", raw: get("uploads.github.com")},
		"host other port":       {sni: "api.github.com", raw: get("api.github.com:8443")},
		"absolute form other":   {sni: "api.github.com", raw: "GET https://github.com/repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n"},
		"absolute form same l7": {sni: "api.github.com", raw: "GET https://api.github.com/repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, br := h.tlsTunnel("api.github.com", tc.sni, true)
			defer c.Close()
			before := len(h.api.seen())
			resp := roundTrip(t, c, br, tc.raw)
			want := policy.ReasonHostMismatch
			if strings.HasSuffix(name, "l7") {
				want = policy.ReasonL7NotAllowed
			}
			if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(want) {
				t.Fatalf("= %s %q, want 403 %s", resp.Status, resp.Header.Get(policy.RefusedHeader), want)
			}
			if len(h.api.seen()) != before {
				t.Fatal("reached the upstream")
			}
		})
	}
}

func TestServerHeaderStripping(t *testing.T) {
	h := newHarness(t)
	c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
	defer c.Close()
	raw := "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n" +
		"Connection: keep-alive, Authorization, X-Secret-Hop, authorization\r\n" +
		"Authorization: Bearer omnia-injected-github-acme\r\n" +
		"X-Secret-Hop: 1\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\n" +
		"Proxy-Connection: keep-alive\r\nTE: gzip\r\nUpgrade: websocket\r\nX-Kept: yes\r\n\r\n"
	resp := roundTrip(t, c, br, raw)
	if resp.StatusCode != 200 {
		t.Fatalf("status %s", resp.Status)
	}
	got := h.api.seen()
	hdr := got[len(got)-1].Header
	if a := hdr.Get("Authorization"); a != "Bearer "+canary {
		t.Fatalf("Connection: Authorization removed or kept the credential: Authorization = %q", a)
	}
	for _, k := range []string{"X-Secret-Hop", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Te", "Upgrade"} {
		if v, ok := hdr[k]; ok {
			t.Errorf("upstream got hop-by-hop %s: %q", k, v)
		}
	}
	if hdr.Get("X-Kept") != "yes" {
		t.Error("an end-to-end header was dropped")
	}
	if resp.Header.Get(policy.RefusedHeader) != "" {
		t.Error("refusal header on an allowed response")
	}
}

func TestServerSecretRotation(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	do := func() (int, string) {
		resp, err := c.Get("https://api.github.com/repos/acme/widgets")
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		got := h.api.seen()
		auth := ""
		if resp.StatusCode == 200 {
			auth = got[len(got)-1].Header.Get("Authorization")
		}
		return resp.StatusCode, resp.Header.Get(policy.RefusedHeader) + auth
	}
	steps := []struct {
		name   string
		data   map[string]string
		status int
		want   string
	}{
		{name: "initial", status: 200, want: "Bearer " + canary},
		{name: "rotated", data: map[string]string{"token": "rotated-" + canary, "user": "u"}, status: 200, want: "Bearer rotated-" + canary},
		{name: "removed", data: map[string]string{"user": "u"}, status: 502, want: string(policy.ReasonCredentialUnavailable)},
		{name: "multi-line", data: map[string]string{"token": "a\nb", "user": "u"}, status: 502, want: string(policy.ReasonCredentialUnavailable)},
		{name: "restored", data: map[string]string{"token": "restored-" + canary, "user": "u"}, status: 200, want: "Bearer restored-" + canary},
	}
	for _, st := range steps {
		if st.data != nil {
			h.secrets.write(st.data)
		}
		status, got := do()
		if status != st.status || got != st.want {
			t.Fatalf("%s: got %d %q, want %d %q", st.name, status, got, st.status, st.want)
		}
	}
	if !strings.Contains(h.get("/metrics"), `keyhole_proxy_injection_failures_total{host="api.github.com"} 2`) {
		t.Error("injection failures not counted")
	}
	if strings.Contains(h.logs.String(), canary) {
		t.Fatal("the secret appears in the logs")
	}
}

// TestServerSecretChangedAfterCheck: a mounted Secret changed after
// keyhole check passed it (the kubelet projects whatever the API server
// holds) to a value no header may carry. The proxy refuses it as check
// would, with credential-unavailable, on both of its forwarding paths (a
// bodiless GET and a POST): nothing goes upstream, and the value is in
// no log.
func TestServerSecretChangedAfterCheck(t *testing.T) {
	var arrived atomic.Int64
	up := withUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { arrived.Add(1) }), "uploads.github.com")
	h := newHarness(t, up)
	c := h.client()
	tests := map[string]string{
		"line break inside":        canary + "\nX-Injected: yes",
		"obs-fold":                 canary + "\r\n X-Folded",
		"NUL":                      canary + "\x00tail",
		"terminal escape sequence": canary + "\x1b]0;owned\x07",
		"vertical tab":             canary + "\vX-Injected: yes",
		"DEL":                      canary + "\x7f",
	}
	for name, value := range tests {
		t.Run(name, func(t *testing.T) {
			h.secrets.write(map[string]string{"token": value, "user": "u"})
			for _, method := range []string{"GET", "POST"} {
				before := arrived.Load()
				var body io.Reader
				if method == "POST" {
					body = strings.NewReader("{}")
				}
				req, _ := http.NewRequest(method, "https://uploads.github.com/x", body)
				req.Header.Set("Authorization", "Bearer omnia-injected-github")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				readBody(t, resp)
				if r := resp.Header.Get(policy.RefusedHeader); resp.StatusCode != http.StatusBadGateway || r != string(policy.ReasonCredentialUnavailable) {
					t.Errorf("%s: %s %q, want 502 credential-unavailable", method, resp.Status, r)
				}
				if n := arrived.Load() - before; n != 0 {
					t.Errorf("%s: the upstream got the request", method)
				}
			}
		})
	}
	h.secrets.write(map[string]string{"token": canary, "user": "u"})
	req, _ := http.NewRequest("GET", "https://uploads.github.com/x", nil)
	req.Header.Set("Authorization", "Bearer omnia-injected-github")
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("restored value: %v %v", resp, err)
	}
	resp.Body.Close()
	if strings.Contains(h.logs.String(), canary) {
		t.Fatal("the secret appears in the logs")
	}
}

func TestServerConfigReload(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	status := func() int {
		resp, err := c.Get("https://api.github.com/repos/acme/widgets")
		if err != nil {
			if strings.Contains(err.Error(), "Forbidden") {
				return 403
			}
			t.Fatal(err)
		}
		readBody(t, resp)
		return resp.StatusCode
	}
	if s := status(); s != 200 {
		t.Fatalf("before reload: %d", s)
	}
	// A broken config keeps the old one and says so in the log.
	writeAtomic(t, h.cfgPath, []byte(`{"apiVersion": "nope"`))
	eventually(t, "a logged reload failure", func() bool { return strings.Contains(h.logs.String(), "config reload failed") })
	if s := status(); s != 200 {
		t.Fatalf("after a bad config: %d, want the old config kept", s)
	}
	// Turning the connection off takes effect for new requests, even on
	// a tunnel opened before.
	tc, br := h.tlsTunnel("api.github.com", "api.github.com", false)
	defer tc.Close()
	off := strings.Replace(testConfig, `"name": "api.github.com"`, `"name": "api2.github.com"`, 1)
	writeAtomic(t, h.cfgPath, []byte(off))
	eventually(t, "api.github.com turned off", func() bool {
		c.Transport.(*http.Transport).CloseIdleConnections()
		return status() == 403
	})
	resp := roundTrip(t, tc, br, "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
	if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonHostNotAllowed) {
		t.Fatalf("old tunnel after the connection was turned off: %s %q", resp.Status, resp.Header.Get(policy.RefusedHeader))
	}
	if h.get("/readyz") != "200 ok\n" {
		t.Error("not ready after a reload")
	}
}

// TestServerReloadMidRequest: a config change that lands while a request
// or a tunnel is already open. A body held back (or sent after a 100
// Continue) until a rule or its host is revoked is decided by the config
// in force when it is decided, not the one its header arrived under; a
// passthrough tunnel, whose bytes are never decided, is closed once its
// host is no longer passed through (removed, or made an injected host),
// on the proxy port and on the transparent listener alike.
func TestServerReloadMidRequest(t *testing.T) {
	const passthrough = `],
  "passthrough": ["pypi.org", "files.example"]`
	cfg := strings.Replace(bodyRuleConfig, "]}\n  ]", "]}\n  "+passthrough, 1)
	const body = `{"state":"open"}`
	tests := map[string]struct {
		from, to string        // the reload replaces from with to in cfg
		expect   bool          // the client waits for 100 Continue before the body
		tunnel   string        // "connect" or "transparent": a passthrough tunnel to pypi.org instead of a request
		want     policy.Reason // a request's refusal after the reload
		open     bool          // a tunnel still carries requests after the reload
	}{
		"a body held back until its rule is revoked": {from: `["open"]`, to: `["reopened"]`, want: policy.ReasonL7NotAllowed},
		"a body sent after 100 Continue, its rule revoked meanwhile": {from: `["open"]`, to: `["reopened"]`, expect: true,
			want: policy.ReasonL7NotAllowed},
		"a body held back until its host is removed": {from: `"name": "api.github.com"`, to: `"name": "api2.github.com"`,
			want: policy.ReasonHostNotAllowed},
		"a passthrough tunnel, its host removed": {from: `"pypi.org", `, tunnel: "connect"},
		"a passthrough tunnel, its host made injected": {tunnel: "connect", from: passthrough, to: `,
    {"name": "pypi.org", "connection": "pypi", "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "{{ .token }}"}}}
  ], "passthrough": ["files.example"]`},
		"a transparent passthrough tunnel, its host removed": {from: `"pypi.org", `, tunnel: "transparent"},
		"a passthrough tunnel, another host removed":         {from: `, "files.example"`, tunnel: "connect", open: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(cfg, tc.from) {
				t.Fatalf("the config holds no %q", tc.from)
			}
			h := newHarnessConfig(t, cfg)
			reload := func() {
				writeAtomic(t, h.cfgPath, []byte(strings.Replace(cfg, tc.from, tc.to, 1)))
				eventually(t, "the reload", func() bool { return strings.Contains(h.logs.String(), "config reloaded") })
			}
			if tc.tunnel == "" {
				c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
				defer c.Close()
				expect := ""
				if tc.expect {
					expect = "Expect: 100-continue\r\n"
				}
				fmt.Fprintf(c, "PATCH /repos/acme/widgets/pulls/7 HTTP/1.1\r\nHost: api.github.com\r\nContent-Type: application/json\r\n"+
					"Content-Length: %d\r\n%s\r\n", len(body), expect)
				if tc.expect {
					if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusContinue {
						t.Fatalf("got %v, %v; want 100 Continue", resp, err)
					}
				} else {
					time.Sleep(100 * time.Millisecond) // the proxy is reading the body
				}
				reload()
				resp := roundTrip(t, c, br, body)
				for resp.StatusCode == http.StatusContinue { // the upstream's own, passed on
					resp = roundTrip(t, c, br, "")
				}
				if resp.StatusCode != tc.want.Status() || resp.Header.Get(policy.RefusedHeader) != string(tc.want) {
					t.Fatalf("after the reload: %s %q, want %q", resp.Status, resp.Header.Get(policy.RefusedHeader), tc.want)
				}
				if n := len(h.api.seen()); n != 0 {
					t.Fatalf("the upstream got %d requests", n)
				}
				return
			}
			var raw net.Conn
			if tc.tunnel == "transparent" {
				var err error
				if raw, err = net.DialTimeout("tcp", h.trans, 5*time.Second); err != nil {
					t.Fatal(err)
				}
			} else {
				var resp *http.Response
				if raw, _, resp = h.connect("pypi.org:443"); resp.StatusCode != http.StatusOK {
					t.Fatalf("CONNECT = %s", resp.Status)
				}
			}
			defer raw.Close()
			raw.SetDeadline(time.Now().Add(5 * time.Second))
			c := tls.Client(raw, &tls.Config{ServerName: "pypi.org", RootCAs: h.upCA.pool})
			br := bufio.NewReader(c)
			const get = "GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n"
			if resp := roundTrip(t, c, br, get); resp.StatusCode != http.StatusOK {
				t.Fatalf("before the reload: %s", resp.Status)
			}
			reload()
			io.WriteString(c, get)
			resp, err := http.ReadResponse(br, nil)
			switch {
			case tc.open && err != nil:
				t.Fatalf("the tunnel was closed: %v", err)
			case !tc.open && err == nil:
				t.Fatalf("the tunnel still carries requests after the reload: %s", resp.Status)
			}
		})
	}
}

func TestServerCARenewal(t *testing.T) {
	h := newHarness(t)
	tc, _ := h.tlsTunnel("api.github.com", "api.github.com", false)
	tc.Close()
	renewed := newTestCA(t, "renewed sandbox CA")
	renewed.writeFiles(t, filepath.Join(h.dir, "ca"))
	eventually(t, "a leaf from the renewed CA", func() bool {
		c, _, resp := h.connect("api.github.com:443")
		defer c.Close()
		if resp.StatusCode != 200 {
			return false
		}
		cl := tls.Client(c, &tls.Config{ServerName: "api.github.com", RootCAs: renewed.pool})
		return cl.Handshake() == nil
	})
	// A broken CA file keeps the renewed one.
	if err := os.WriteFile(filepath.Join(h.dir, "ca", "tls.crt"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a logged CA reload failure", func() bool { return strings.Contains(h.logs.String(), "CA reload failed") })
	c, _, _ := h.connect("api.github.com:443")
	defer c.Close()
	if err := tls.Client(c, &tls.Config{ServerName: "api.github.com", RootCAs: renewed.pool}).Handshake(); err != nil {
		t.Fatalf("after a broken CA file: %v", err)
	}
}

// TestServerCASwitchDelay renews the CA under a proxy that waits before
// using it: new tunnels keep leaves of the previous CA through the delay
// (a sandbox whose bundle does not yet hold the renewed CA still
// verifies them), then get the renewed CA's; a renewal back to the CA in
// use cancels the wait.
func TestServerCASwitchDelay(t *testing.T) {
	const delay = 600 * time.Millisecond
	h := newHarness(t, func(o *Options) { o.CASwitchDelay = delay })
	verifies := func(ca *testCA) bool {
		c, _, resp := h.connect("api.github.com:443")
		defer c.Close()
		return resp.StatusCode == 200 && tls.Client(c, &tls.Config{ServerName: "api.github.com", RootCAs: ca.pool}).Handshake() == nil
	}
	if !verifies(h.sandbox) {
		t.Fatal("the first CA does not verify")
	}
	renewed := newTestCA(t, "renewed sandbox CA")
	renewedAt := time.Now()
	renewed.writeFiles(t, filepath.Join(h.dir, "ca"))
	eventually(t, "the renewal logged", func() bool { return strings.Contains(h.logs.String(), "the previous CA signs new leaves") })
	for time.Since(renewedAt) < delay/2 {
		if !verifies(h.sandbox) {
			t.Fatalf("%v after the renewal, within the delay, a leaf does not verify against the previous CA", time.Since(renewedAt))
		}
		time.Sleep(20 * time.Millisecond)
	}
	eventually(t, "a leaf from the renewed CA", func() bool { return verifies(renewed) })
	if since := time.Since(renewedAt); since < delay {
		t.Errorf("the renewed CA signed after %v, before the %v delay", since, delay)
	}
	if !strings.Contains(h.logs.String(), `"msg":"CA reloaded"`) {
		t.Errorf("no CA reloaded line:\n%s", h.logs.String())
	}

	// Renewed, then put back before the delay ends: nothing changes.
	third := newTestCA(t, "third sandbox CA")
	third.writeFiles(t, filepath.Join(h.dir, "ca"))
	eventually(t, "the second renewal logged", func() bool { return strings.Count(h.logs.String(), "the previous CA signs new leaves") == 2 })
	renewed.writeFiles(t, filepath.Join(h.dir, "ca"))
	time.Sleep(2 * delay)
	if !verifies(renewed) || verifies(third) {
		t.Error("a renewal undone within the delay still switched the CA")
	}
}

func TestServerConcurrentMintOnce(t *testing.T) {
	h := newHarness(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", h.addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "CONNECT github.com:443 HTTP/1.1\r\nHost: github.com:443\r\n\r\n")
			// The ClientHello follows at once, before the 200 is read.
			buf := make([]byte, len("HTTP/1.1 200 Connection established\r\n\r\n"))
			if _, err := io.ReadFull(c, buf); err != nil {
				errs <- err
				return
			}
			if err := tls.Client(c, &tls.Config{ServerName: "github.com", RootCAs: h.sandbox.pool}).Handshake(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if m := h.get("/metrics"); !strings.Contains(m, "keyhole_proxy_cert_mints_total 1\n") {
		t.Fatalf("want exactly one mint:\n%s", m)
	}
}

// TestServerLeavesBoundedByConfig: tunnels to every injected host, each
// with many different TLS server names (another host, random names, the
// host in other letter cases, names with a NUL), mint one leaf per
// injected host and no more: the leaf is for the CONNECT host, never the
// SNI, so a sandbox cannot grow the cache with names of its choosing.
func TestServerLeavesBoundedByConfig(t *testing.T) {
	h := newHarness(t)
	hosts := []string{"api.github.com", "github.com", "uploads.github.com"}
	for _, host := range hosts {
		for i := range 20 {
			sni := []string{fmt.Sprintf("n%d.evil.example", i), strings.ToUpper(host), "pypi.org", host + "\x00x", "xn--pi-6kc.github.com"}[i%5]
			c, _, resp := h.connect(host + ":443")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("CONNECT %s: %s", host, resp.Status)
			}
			tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
			if err := tc.Handshake(); err != nil {
				t.Fatalf("handshake with SNI %q: %v", sni, err)
			}
			if cn := tc.ConnectionState().PeerCertificates[0].DNSNames; len(cn) != 1 || cn[0] != host {
				t.Errorf("SNI %q in a tunnel to %s got a leaf for %q", sni, host, cn)
			}
			c.Close()
		}
	}
	if m := h.get("/metrics"); !strings.Contains(m, fmt.Sprintf("keyhole_proxy_cert_mints_total %d\n", len(hosts))) {
		t.Fatalf("want %d mints:\n%s", len(hosts), m)
	}
}

func TestLeafCache(t *testing.T) {
	ca1, ca2 := newTestCA(t, "one"), newTestCA(t, "two")
	p1, err := ParseCA(ca1.certPEM, ca1.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := ParseCA(ca2.certPEM, ca2.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var mints int
	var mu sync.Mutex
	c := newLeafCache(func() { mu.Lock(); mints++; mu.Unlock() })
	now := time.Now()
	var wg sync.WaitGroup
	certs := make([]*tls.Certificate, 32)
	for i := range certs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			certs[i], _ = c.get(p1, "api.github.com", now)
		}()
	}
	wg.Wait()
	for _, cert := range certs {
		if cert != certs[0] || cert == nil {
			t.Fatal("concurrent gets returned different leaves")
		}
	}
	leaf := certs[0].Leaf
	if _, err := leaf.Verify(x509VerifyOpts(ca1, "api.github.com")); err != nil {
		t.Fatalf("leaf does not verify: %v", err)
	}
	if leaf.PublicKeyAlgorithm.String() != "ECDSA" || leaf.NotAfter.Sub(now) > LeafValidity || leaf.SerialNumber.BitLen() < 64 {
		t.Errorf("leaf: %s key, valid until %s, serial %d bits", leaf.PublicKeyAlgorithm, leaf.NotAfter, leaf.SerialNumber.BitLen())
	}
	other, _ := c.get(p2, "api.github.com", now)
	if other == certs[0] {
		t.Fatal("a renewed CA got the old leaf")
	}
	late, _ := c.get(p2, "api.github.com", now.Add(LeafValidity))
	if late == other {
		t.Fatal("an expiring leaf was not re-minted")
	}
	if mints != 3 {
		t.Fatalf("mints = %d, want 3", mints)
	}
}

func TestParseCA(t *testing.T) {
	ca := newTestCA(t, "ca")
	other := newTestCA(t, "other")
	leaf := ca.leaf(t, "x.example")
	leafPEM := pemCert(leaf.Certificate[0])
	tests := map[string]struct {
		cert, key []byte
		ok        bool
	}{
		"ok":             {cert: ca.certPEM, key: ca.keyPEM, ok: true},
		"mismatched key": {cert: ca.certPEM, key: other.keyPEM},
		"not a ca":       {cert: leafPEM, key: ca.keyPEM},
		"no cert":        {cert: []byte("nope"), key: ca.keyPEM},
		"no key":         {cert: ca.certPEM, key: []byte("nope")},
		"cert as key":    {cert: ca.certPEM, key: ca.certPEM},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseCA(tc.cert, tc.key)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseCA = %v", err)
			}
			if err != nil && strings.Contains(err.Error(), "PRIVATE") && strings.Contains(err.Error(), "MII") {
				t.Fatal("error quotes key material")
			}
		})
	}
}

func TestServerPlainAndPassthrough(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	t.Run("plain passthrough", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "http://pypi.org/simple/?q=1", nil)
		req.Header.Set("Proxy-Authorization", "Basic Zm9vOmJhcg==")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != 200 || !strings.Contains(body, "hello from pypi.org /simple/") {
			t.Fatalf("= %d %q", resp.StatusCode, body)
		}
		got := h.plain.seen()
		if got[len(got)-1].Header.Get("Proxy-Authorization") != "" {
			t.Fatal("Proxy-Authorization forwarded")
		}
	})
	t.Run("plain to injected host", func(t *testing.T) {
		resp, err := c.Get("http://api.github.com/repos/acme/widgets")
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) || !strings.Contains(body, "HTTPS") {
			t.Fatalf("= %d %q %q", resp.StatusCode, resp.Header.Get(policy.RefusedHeader), body)
		}
	})
	t.Run("plain unknown", func(t *testing.T) {
		resp, err := c.Get("http://evil.example/")
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonHostNotAllowed) {
			t.Fatalf("= %d %q", resp.StatusCode, resp.Header.Get(policy.RefusedHeader))
		}
	})
	t.Run("passthrough tunnel", func(t *testing.T) {
		// TLS runs end to end: the client verifies the upstream's own
		// certificate, and nothing is injected.
		before := len(h.api.seen())
		resp, err := c.Get("https://pypi.org/simple/")
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		got := h.api.seen()
		if resp.StatusCode != 200 || len(got) != before+1 || got[len(got)-1].Header.Get("Authorization") != "" {
			t.Fatalf("= %d, upstream saw %v", resp.StatusCode, got[before:])
		}
		if resp.TLS == nil || resp.TLS.PeerCertificates[0].Issuer.CommonName != "upstream CA" {
			t.Fatal("passthrough was intercepted")
		}
	})
}

// TestServerTunnelHandshakeRefusals: what a client may offer in the TLS
// handshake of a tunnel that the proxy does not speak: HTTP/1.0 only, TLS
// before 1.2 (HTTP/2 it speaks: h2_server_test.go). Each handshake fails, and the upstream
// gets nothing.
func TestServerTunnelHandshakeRefusals(t *testing.T) {
	h := newHarness(t)
	tests := map[string]*tls.Config{
		"HTTP/1.0 only": {NextProtos: []string{"http/1.0"}},
		"TLS 1.0":       {MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10},
		"TLS 1.1":       {MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(h.api.seen())
			c, _, resp := h.connect("api.github.com:443")
			defer c.Close()
			if resp.StatusCode != 200 {
				t.Fatal(resp.Status)
			}
			cfg.ServerName, cfg.RootCAs = "api.github.com", h.sandbox.pool
			tc := tls.Client(c, cfg)
			err := tc.Handshake()
			if err != nil && !strings.Contains(err.Error(), "remote error") {
				t.Fatalf("the client gave up by itself (%v): the proxy was never asked", err)
			}
			if err == nil {
				// Try a request anyway: it must not reach the upstream.
				io.WriteString(tc, "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
				t.Fatalf("the handshake succeeded (%s, ALPN %q)", tls.VersionName(tc.ConnectionState().Version), tc.ConnectionState().NegotiatedProtocol)
			}
			if n := len(h.api.seen()) - before; n != 0 {
				t.Fatalf("the upstream got %d requests", n)
			}
		})
	}
}

func TestServerTunnelCap(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxTunnels = 1 })
	c1, _ := h.tlsTunnel("api.github.com", "api.github.com", false)
	c2, _, resp := h.connect("api.github.com:443")
	c2.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second tunnel = %s, want 503", resp.Status)
	}
	c1.Close()
	eventually(t, "the slot freed", func() bool {
		c, _, resp := h.connect("api.github.com:443")
		c.Close()
		return resp.StatusCode == 200
	})
}

func TestServerGracefulShutdown(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	type result struct {
		status int
		err    error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := c.Get("https://api.github.com/slow")
		if err != nil {
			res <- result{err: err}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		res <- result{status: resp.StatusCode}
	}()
	eventually(t, "the slow request upstream", func() bool {
		for _, s := range h.api.seen() {
			if s.URI == "/slow" {
				return true
			}
		}
		return false
	})
	if err := h.shutdown(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := <-res
	if r.err != nil || r.status != 200 {
		t.Fatalf("in-flight request during shutdown: %d %v", r.status, r.err)
	}
	if _, err := net.DialTimeout("tcp", h.addr, time.Second); err == nil {
		t.Fatal("still accepting after shutdown")
	}
}

func TestServerAdmin(t *testing.T) {
	h := newHarness(t)
	if got := h.get("/healthz"); got != "200 ok\n" {
		t.Errorf("/healthz = %q", got)
	}
	if got := h.get("/readyz"); got != "200 ok\n" {
		t.Errorf("/readyz = %q", got)
	}
	m := h.get("/metrics")
	for _, want := range []string{"# TYPE keyhole_proxy_requests_total counter", "# TYPE keyhole_proxy_upstream_latency_seconds histogram", "keyhole_proxy_tunnels_active 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	writeAtomic(t, good, []byte(testConfig))
	bad := filepath.Join(dir, "bad.json")
	writeAtomic(t, bad, []byte(`{"apiVersion":"x"}`))
	tests := map[string]Options{
		"no config":  {},
		"missing":    {ConfigPath: filepath.Join(dir, "nope.json")},
		"invalid":    {ConfigPath: bad},
		"ca missing": {ConfigPath: good, CACert: filepath.Join(dir, "nope.crt"), CAKey: filepath.Join(dir, "nope.key")},
	}
	for name, o := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := New(o); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
}

// TestServerSessionResumption: a second tunnel resumes the first one's
// TLS session (cheaper new tunnels), and the resumed tunnel is still held
// to its own CONNECT host.
func TestServerSessionResumption(t *testing.T) {
	h := newHarness(t)
	cache := tls.NewLRUClientSessionCache(8)
	open := func(host, sni string) (*tls.Conn, *bufio.Reader) {
		c, _, resp := h.connect(host + ":443")
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: h.sandbox.pool, ClientSessionCache: cache})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(tc)
		// TLS 1.3 tickets arrive after the handshake: read one response.
		roundTrip(t, tc, br, "GET /repos/acme/widgets HTTP/1.1\r\nHost: "+sni+"\r\n\r\n")
		return tc, br
	}
	first, _ := open("api.github.com", "api.github.com")
	first.Close()
	second, _ := open("api.github.com", "api.github.com")
	defer second.Close()
	if !second.ConnectionState().DidResume {
		t.Fatal("the second tunnel did not resume the session")
	}
	// A session resumed under another CONNECT host is still refused.
	c, _, _ := h.connect("github.com:443")
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: "api.github.com", RootCAs: h.sandbox.pool, ClientSessionCache: cache})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	resp := roundTrip(t, tc, bufio.NewReader(tc), "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
	if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonHostMismatch) {
		t.Fatalf("resumed session on another tunnel = %s %q", resp.Status, resp.Header.Get(policy.RefusedHeader))
	}
}

// TestServerIgnoresProxyEnv: the proxy's own HTTPS_PROXY must not divert
// upstream requests (they would carry the credential to another proxy).
func TestServerIgnoresProxyEnv(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("https_proxy", "http://127.0.0.1:1")
	h := newHarness(t)
	resp, _ := h.fetch(t, "https://api.github.com/repos/acme/widgets")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: the proxy honoured HTTPS_PROXY", resp.StatusCode)
	}
}

func TestServerTimeouts(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.Timeouts.Handshake = 300 * time.Millisecond
		o.Timeouts.ReadHeader = 300 * time.Millisecond
		o.Timeouts.ResponseHeader = 100 * time.Millisecond
	})
	t.Run("handshake", func(t *testing.T) {
		c, br, resp := h.connect("api.github.com:443")
		defer c.Close()
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		// Say nothing: the proxy gives up on the handshake and closes.
		start := time.Now()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("the proxy sent data to a silent client")
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("closed after %s, want about the handshake timeout", d)
		}
	})
	t.Run("request header", func(t *testing.T) {
		c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
		defer c.Close()
		io.WriteString(c, "GET /repos/acme/widgets HTTP/1.1\r\n") // and never finish
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := http.ReadResponse(br, nil); err == nil {
			// Go's server may answer 408 before closing; either way the
			// connection must end well before our deadline.
			if _, err := br.ReadByte(); err == nil {
				t.Fatal("connection still open")
			}
		}
	})
	t.Run("upstream response header", func(t *testing.T) {
		resp, _ := h.fetch(t, "https://api.github.com/slow")
		if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get(policy.RefusedHeader) != "" {
			t.Fatalf("slow upstream = %d %q, want 504 without a refusal header", resp.StatusCode, resp.Header.Get(policy.RefusedHeader))
		}
	})
}

// pipelinedConn sends the CONNECT in the same write as the ClientHello
// and strips the proxy's 200 before TLS reads, like clients that do not
// wait for the CONNECT answer.
type pipelinedConn struct {
	net.Conn
	prefix   string
	sent     bool
	answered bool
}

func (c *pipelinedConn) Write(b []byte) (int, error) {
	if !c.sent {
		c.sent = true
		if _, err := c.Conn.Write(append([]byte(c.prefix), b...)); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *pipelinedConn) Read(b []byte) (int, error) {
	if !c.answered {
		c.answered = true
		want := "HTTP/1.1 200 Connection established\r\n\r\n"
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c.Conn, got); err != nil {
			return 0, err
		}
		if string(got) != want {
			return 0, fmt.Errorf("CONNECT answer %q", got)
		}
	}
	return c.Conn.Read(b)
}

func TestServerPipelinedClientHello(t *testing.T) {
	h := newHarness(t)
	raw, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	pc := &pipelinedConn{Conn: raw, prefix: "CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n"}
	tc := tls.Client(pc, &tls.Config{ServerName: "api.github.com", RootCAs: h.sandbox.pool})
	resp := roundTrip(t, tc, bufio.NewReader(tc), "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("status %s", resp.Status)
	}
}

// TestServerShutdownClosesTunnels: an idle passthrough tunnel cannot hold
// shutdown past its timeout.
func TestServerShutdownClosesTunnels(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Timeouts.Shutdown = 300 * time.Millisecond })
	c, br, resp := h.connect("pypi.org:443")
	defer c.Close()
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	start := time.Now()
	if err := h.shutdown(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %s", d)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("tunnel still open after shutdown")
	}
}
