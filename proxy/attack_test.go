package proxy

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// The tests in this file are attacks a sandbox (or a hostile upstream)
// can try on the credential, each over real sockets: a TLS upstream on
// loopback, the proxy's server, a client speaking through CONNECT.

// withUpstream serves h over TLS, with a leaf for names from a CA of its
// own, and points the proxy's names:443 at it.
func withUpstream(t *testing.T, h http.Handler, names ...string) harnessOpt {
	t.Helper()
	ca := newTestCA(t, "test upstream CA")
	srv := ca.serve(t, h, names...)
	return resolveTo(ca, srv.Listener.Addr().String(), names...)
}

// resolveTo points names:443 at addr, trusting ca for them in a copy of
// the upstream roots, so that the pool it started from is left as it was.
func resolveTo(ca *testCA, addr string, names ...string) harnessOpt {
	return func(o *Options) {
		o.UpstreamRoots = o.UpstreamRoots.Clone()
		o.UpstreamRoots.AddCert(ca.cert)
		for _, n := range names {
			o.Resolve[n+":443"] = addr
		}
	}
}

// rawUpstreamConns serves TLS for names with serve called on each
// connection, and counts the connections.
func rawUpstreamConns(t *testing.T, serve func(c net.Conn), names ...string) (harnessOpt, *atomic.Int64) {
	t.Helper()
	ca := newTestCA(t, "raw upstream CA")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, names...)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				serve(c)
			}()
		}
	}()
	return resolveTo(ca, ln.Addr().String(), names...), &n
}

// eachRequest reads requests from an upstream's connection until it
// ends, each body read whole, and has answer write each response.
func eachRequest(c net.Conn, answer func(req *http.Request)) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		answer(req)
	}
}

// secretForms are the ways the canary could be handed back: as is, and
// as the base64 of the basic credentials the proxy sends.
func secretForms() []string {
	return []string{canary, base64.StdEncoding.EncodeToString([]byte("x-access-token:" + canary))}
}

func holdsSecret(s string) bool {
	for _, f := range secretForms() {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// echoUpstream answers with what an echoing upstream sends back: the
// request's Authorization, X-Request-Id and Origin in a 103, in the final
// header and in trailers (announced and not), each part also carrying a
// refusal header of its own. The body says whether the request carried
// the credential.
func echoUpstream(seen *sync.Map) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		seen.Store(r.URL.Path, r.Header.Clone())
		h := w.Header()
		h.Set("Link", "</style.css>; rel=preload")
		h.Set("X-Echo-Authorization", auth)
		h.Set(policy.RefusedHeader, "host-not-allowed")
		w.WriteHeader(http.StatusEarlyHints)
		clear(h)
		h.Set("Trailer", "X-Trailer-Authorization, "+policy.RefusedHeader)
		h.Set("X-Request-Id", r.Header.Get("X-Request-Id"))
		h.Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		h.Set("X-Echo-Authorization", auth)
		h.Add("Set-Cookie", "session="+auth)
		h.Set("Www-Authenticate", `Bearer realm="`+auth+`"`)
		h.Set(policy.RefusedHeader, "host-not-allowed")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "credential carried: %v\n", holdsSecret(auth))
		h.Set("X-Trailer-Authorization", auth)
		h.Set(policy.RefusedHeader, "l7-not-allowed")
		h.Set(http.TrailerPrefix+"X-Late-Authorization", auth)
		h.Set(http.TrailerPrefix+"x-omnia-egress-refused", "l7-not-allowed")
	}
}

// TestServerResponseScrub: whatever form the credential goes out in, an
// upstream that echoes request headers back in a 103, the final header or
// trailers hands the sandbox [REDACTED], never the credential; and with
// the substitute form, a placeholder in a header the injection does not
// name goes out as the placeholder, so an echo of it is harmless.
func TestServerResponseScrub(t *testing.T) {
	var seen sync.Map
	up := withUpstream(t, echoUpstream(&seen), "api.github.com", "github.com", "uploads.github.com")
	h := newHarness(t, up)
	const ph = "omnia-injected-github"
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := map[string]struct {
		url    string
		header http.Header
		// wantUp is what the upstream must see in each header.
		wantUp map[string]string
	}{
		"substitute: only Authorization carries the credential": {
			url: "https://uploads.github.com/sub",
			header: http.Header{"Authorization": {"Bearer " + ph}, "X-Request-Id": {ph},
				"Origin": {"https://" + ph + ".example"}},
			wantUp: map[string]string{"Authorization": "Bearer " + canary, "X-Request-Id": ph, "Origin": "https://" + ph + ".example"},
		},
		"substitute inside basic": {
			url:    "https://uploads.github.com/sub-basic",
			header: http.Header{"Authorization": {"Basic " + b64("x-access-token:"+ph)}, "X-Request-Id": {ph}},
			wantUp: map[string]string{"Authorization": "Basic " + b64("x-access-token:"+canary), "X-Request-Id": ph},
		},
		"header form": {
			url:    "https://api.github.com/repos/acme/widgets/header",
			header: http.Header{"X-Request-Id": {"r-1"}},
			wantUp: map[string]string{"Authorization": "Bearer " + canary, "X-Request-Id": "r-1"},
		},
		"basic form": {
			url:    "https://github.com/acme/widgets.git/info/refs",
			wantUp: map[string]string{"Authorization": "Basic " + b64("x-access-token:"+canary)},
		},
	}
	c := h.client()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var interim []http.Header
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, hdr textproto.MIMEHeader) error {
				interim = append(interim, http.Header(hdr).Clone())
				return nil
			}}
			req, err := http.NewRequest("GET", tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
			req.Header = tc.header.Clone()
			if req.Header == nil {
				req.Header = http.Header{}
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readBody(t, resp)
			if resp.StatusCode != 200 || body != "credential carried: true\n" {
				t.Fatalf("%s: %q, want 200 with the credential carried", resp.Status, body)
			}
			path := req.URL.Path
			v, ok := seen.Load(path)
			if !ok {
				t.Fatal("the upstream saw no request")
			}
			up := v.(http.Header)
			for k, want := range tc.wantUp {
				if got := up.Get(k); got != want {
					t.Errorf("the upstream's %s is not %q", k, strings.ReplaceAll(want, canary, "<credential>"))
				}
			}
			if len(interim) != 1 {
				t.Fatalf("got %d interim responses, want the 103", len(interim))
			}
			parts := map[string]http.Header{"interim": interim[0], "header": resp.Header, "trailer": resp.Trailer}
			for part, hdr := range parts {
				for k, vs := range hdr {
					if strings.EqualFold(k, policy.RefusedHeader) {
						t.Errorf("the %s holds the upstream's %s", part, k)
					}
					for _, v := range vs {
						if holdsSecret(v) {
							t.Errorf("the %s's %s holds the credential", part, k)
						}
					}
				}
			}
			for part, want := range map[string]string{
				"interim":                         interim[0].Get("X-Echo-Authorization"),
				"header":                          resp.Header.Get("X-Echo-Authorization"),
				"trailer X-Trailer-Authorization": resp.Trailer.Get("X-Trailer-Authorization"),
				"trailer X-Late-Authorization":    resp.Trailer.Get("X-Late-Authorization"),
			} {
				if !strings.Contains(want, redacted) {
					t.Errorf("the %s echo is not redacted", part)
				}
			}
			if got := resp.Header.Get("X-Request-Id"); tc.header.Get("X-Request-Id") != "" && got != tc.header.Get("X-Request-Id") {
				t.Errorf("X-Request-Id came back as %q, want what the sandbox sent", got)
			}
			count := func() (lines int) {
				for _, l := range h.logs.requests(t) {
					if l["path"] == path {
						lines++
						if l["decision"] != "inject" || l["status"] != float64(200) {
							t.Errorf("log line %v, want inject 200", l)
						}
					}
				}
				return lines
			}
			eventually(t, "the request's log line", func() bool { return count() > 0 })
			if lines := count(); lines != 1 {
				t.Errorf("%d request lines for %s, want 1", lines, path)
			}
		})
	}
	t.Run("logged and counted, never the value", func(t *testing.T) {
		logs := h.logs.String()
		if holdsSecret(logs) {
			t.Fatal("the logs hold the credential")
		}
		for _, where := range []string{"interim", "header", "trailer"} {
			if !strings.Contains(logs, `"msg":"upstream response held the credential; redacted","host":"uploads.github.com","where":"`+where+`"`) {
				t.Errorf("no redaction line for the %s", where)
			}
		}
		m := h.get("/metrics")
		if !strings.Contains(m, `keyhole_proxy_response_scrubs_total{host="github.com",where="header"} 1`) {
			t.Errorf("redactions not counted:\n%s", m)
		}
	})
}

// TestServerRefusedRequests: requests that must never carry the
// credential, sent as a hostile client would on a raw tunnel, are refused
// with l7-not-allowed before any dial, logged once and counted.
func TestServerRefusedRequests(t *testing.T) {
	h := newHarness(t)
	tests := map[string]struct {
		host string
		raw  string // the request, without Host
		path string // as logged
	}{
		"TRACE on a host without rules":    {host: "uploads.github.com", raw: "TRACE /x HTTP/1.1\r\n", path: "/x"},
		"trace in lower case":              {host: "uploads.github.com", raw: "trace /x HTTP/1.1\r\n", path: "/x"},
		"TRACE on a host with rules":       {host: "api.github.com", raw: "TRACE /repos/acme/widgets HTTP/1.1\r\n", path: "/repos/acme/widgets"},
		"CONNECT inside the tunnel":        {host: "uploads.github.com", raw: "CONNECT uploads.github.com:443 HTTP/1.1\r\n", path: ""},
		"OPTIONS * inside the tunnel":      {host: "uploads.github.com", raw: "OPTIONS * HTTP/1.1\r\n", path: "*"},
		"an extension method, no rules":    {host: "uploads.github.com", raw: "PROPFIND /x HTTP/1.1\r\n", path: "/x"},
		"X-HTTP-Method-Override":           {host: "api.github.com", raw: "GET /repos/acme/widgets HTTP/1.1\r\nX-HTTP-Method-Override: DELETE\r\n", path: "/repos/acme/widgets"},
		"X-HTTP-Method":                    {host: "api.github.com", raw: "GET /repos/acme/widgets HTTP/1.1\r\nX-HTTP-Method: DELETE\r\n", path: "/repos/acme/widgets"},
		"X-Method-Override":                {host: "api.github.com", raw: "GET /repos/acme/widgets HTTP/1.1\r\nx-method-override: DELETE\r\n", path: "/repos/acme/widgets"},
		"X-Original-URL":                   {host: "api.github.com", raw: "GET /repos/acme/widgets HTTP/1.1\r\nX-Original-URL: /user\r\n", path: "/repos/acme/widgets"},
		"X-Rewrite-URL":                    {host: "api.github.com", raw: "GET /repos/acme/widgets HTTP/1.1\r\nX-Rewrite-URL: /user\r\n", path: "/repos/acme/widgets"},
		"X-Override-URL":                   {host: "api.github.com", raw: "GET /repos/acme/widgets HTTP/1.1\r\nX-Override-URL: /user\r\n", path: "/repos/acme/widgets"},
		"override with underscores":        {host: "api.github.com", raw: "GET /repos/acme/widgets HTTP/1.1\r\nX_Original_URL: /user\r\n", path: "/repos/acme/widgets"},
		"override on a host without rules": {host: "uploads.github.com", raw: "GET /x HTTP/1.1\r\nX-HTTP-Method-Override: TRACE\r\n", path: "/x"},
		"_method in the query":             {host: "api.github.com", raw: "GET /repos/acme/widgets?_method=DELETE HTTP/1.1\r\n", path: "/repos/acme/widgets"},
		"encoded _method in the query":     {host: "uploads.github.com", raw: "POST /x?a=1&%5fMethod=DELETE HTTP/1.1\r\nContent-Length: 0\r\n", path: "/x"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before, linesBefore := len(h.api.seen()), len(h.logs.requests(t))
			c, br := h.tlsTunnel(tc.host, tc.host, false)
			defer c.Close()
			resp := roundTrip(t, c, br, tc.raw+"Host: "+tc.host+"\r\n\r\n")
			if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) {
				t.Fatalf("%s with %s %q, want 403 l7-not-allowed", resp.Status, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
			}
			if n := len(h.api.seen()) - before; n != 0 {
				t.Fatalf("the upstream saw %d requests", n)
			}
			// One line for the CONNECT, one for the request: no more.
			eventually(t, "the request's log line", func() bool { return len(h.logs.requests(t)) >= linesBefore+2 })
			if n := len(h.logs.requests(t)) - linesBefore; n != 2 {
				t.Errorf("%d request lines for a CONNECT and one request, want 2", n)
			}
			method, _, _ := strings.Cut(tc.raw, " ")
			var found int
			for _, l := range h.logs.requests(t) {
				if l["host"] == tc.host && l["method"] == method && l["path"] == tc.path && l["decision"] == "refuse" &&
					l["reason"] == "l7-not-allowed" && l["status"] == float64(403) {
					found++
				}
			}
			if found == 0 {
				t.Errorf("no request line for %s %s refused:\n%s", method, tc.path, h.logs.String())
			}
		})
	}
	t.Run("OPTIONS * on the proxy port", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		resp := roundTrip(t, c, bufio.NewReader(c), "OPTIONS * HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
		if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonHostNotAllowed) {
			t.Fatalf("%s with %s %q, want 403 host-not-allowed", resp.Status, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
		}
		found := false
		for _, l := range h.logs.requests(t) {
			if l["method"] == "OPTIONS" && l["path"] == "*" && l["reason"] == "host-not-allowed" && l["status"] == float64(403) {
				found = true
			}
		}
		if !found {
			t.Errorf("no request line for OPTIONS * on the proxy port:\n%s", h.logs.String())
		}
	})
	t.Run("counted", func(t *testing.T) {
		m := h.get("/metrics")
		for _, want := range []string{
			`keyhole_proxy_requests_total{host="uploads.github.com",decision="refuse",reason="l7-not-allowed"} 7`,
			`keyhole_proxy_requests_total{host="_other",decision="refuse",reason="host-not-allowed"} 1`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s:\n%s", want, m)
			}
		}
	})
}

// planted is a whole response an upstream hides where a body should not
// be: read on a reused connection, it would answer the next request.
const planted = "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nX-Planted: yes\r\n\r\nplanted"

// TestServerPoolPoisoning: an upstream that sends more than its response
// frames (a body after HEAD, a 304 or a 204, more bytes than its
// Content-Length, at once or a little later) must not have those bytes
// read as the response to the next request, which may come from another
// tunnel and be served on the same pooled connection, on either
// forwarding path.
func TestServerPoolPoisoning(t *testing.T) {
	// The paths whose answer plants a body the status or method forbids:
	// its status, and whether the body follows the head a little later.
	planting := map[string]struct {
		status string
		late   bool
	}{
		"/head-body":         {status: "200 OK"},
		"/head-late-body":    {status: "200 OK", late: true},
		"/not-modified":      {status: "304 Not Modified"},
		"/no-content":        {status: "204 No Content"},
		"/no-content-late":   {status: "204 No Content", late: true},
		"/not-modified-late": {status: "304 Not Modified", late: true},
	}
	serve := func(c net.Conn) {
		eachRequest(c, func(req *http.Request) {
			if p, ok := planting[req.URL.Path]; ok {
				head := "HTTP/1.1 " + p.status + "\r\nContent-Length: " + fmt.Sprint(len(planted)) + "\r\n\r\n"
				if !p.late {
					io.WriteString(c, head+planted)
					return
				}
				io.WriteString(c, head)
				time.Sleep(150 * time.Millisecond)
				io.WriteString(c, planted)
				return
			}
			switch req.URL.Path {
			case "/overrun":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"+planted)
			case "/overrun-late":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				time.Sleep(50 * time.Millisecond)
				io.WriteString(c, planted)
			default:
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Real: yes\r\n\r\nreal")
			}
		})
	}
	up, conns := rawUpstreamConns(t, serve, "uploads.github.com")
	h := newHarness(t, up)
	get := func(method, path string) *http.Response {
		c, br := h.tlsTunnel("uploads.github.com", "uploads.github.com", false)
		defer c.Close()
		if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: uploads.github.com\r\n\r\n", method, path); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		return resp
	}
	tests := map[string]struct {
		method, path string
		wait         time.Duration // before the next request
		next         string        // the next requests' method; GET unless set
	}{
		"HEAD answered with a body":      {method: "HEAD", path: "/head-body"},
		"HEAD answered with a late body": {method: "HEAD", path: "/head-late-body", wait: 300 * time.Millisecond},
		// The next request goes out before the late body arrives: no
		// check of the idle connection could have seen it.
		"HEAD answered with a late body, next request at once": {method: "HEAD", path: "/head-late-body"},
		"304 with a body":                      {method: "GET", path: "/not-modified"},
		"204 with a body":                      {method: "GET", path: "/no-content"},
		"more bytes than Content-Length":       {method: "GET", path: "/overrun"},
		"more bytes than Content-Length, late": {method: "GET", path: "/overrun-late", wait: 200 * time.Millisecond},
		// The same through Go's Transport, which carries every request
		// but a bodiless GET or HEAD.
		"POST answered 204 with a body":                      {method: "POST", path: "/no-content", next: "POST"},
		"POST answered 204 with a late body, next at once":   {method: "POST", path: "/no-content-late", next: "POST"},
		"DELETE answered 304 with a late body, next at once": {method: "DELETE", path: "/not-modified-late", next: "DELETE"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			first := get(tc.method, tc.path)
			if first.Header.Get("X-Planted") != "" {
				t.Fatalf("the first response is the planted one")
			}
			time.Sleep(tc.wait)
			// A second tunnel: another client of the same sandbox.
			for i := range 2 {
				resp := get(cmp.Or(tc.next, "GET"), "/real")
				body := readBody(t, resp)
				if resp.StatusCode != 200 || resp.Header.Get("X-Real") != "yes" || body != "real" {
					t.Fatalf("request %d after %s %s got %s %v %q, not the upstream's answer to it", i+1, tc.method, tc.path, resp.Status, resp.Header, body)
				}
			}
		})
	}
	t.Run("a clean connection is still reused", func(t *testing.T) {
		get("GET", "/real")
		before := conns.Load()
		for range 3 {
			if resp := get("GET", "/real"); resp.Header.Get("X-Real") != "yes" {
				t.Fatalf("got %v", resp.Header)
			}
		}
		if n := conns.Load() - before; n != 0 {
			t.Errorf("%d new upstream connections for 3 sequential GETs, want 0", n)
		}
	})
}

// TestServerUpstreamConnPerHost: the proxy's upstream connections are
// pooled, on both forwarding paths, across every tunnel of the sandbox.
// A connection opened for one injected host must carry only that host's
// requests, whatever the sandbox sends next: another injected host (whose
// upstream may be the same server), a passthrough host, a refused path.
// The upstream here serves every name on one address and records, per
// TLS connection, its server name and the Host of each request.
func TestServerUpstreamConnPerHost(t *testing.T) {
	var mu sync.Mutex
	hosts := map[net.Conn][]string{} // connection → SNI, then each request's Host
	serve := func(c net.Conn) {
		tc := c.(*tls.Conn)
		if tc.Handshake() != nil {
			return
		}
		mu.Lock()
		hosts[c] = []string{tc.ConnectionState().ServerName}
		mu.Unlock()
		eachRequest(c, func(req *http.Request) {
			mu.Lock()
			hosts[c] = append(hosts[c], req.Host)
			mu.Unlock()
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		})
	}
	names := []string{"api.github.com", "github.com", "uploads.github.com", "pypi.org"}
	up, _ := rawUpstreamConns(t, serve, names...)
	h := newHarness(t, up)
	c := h.client()
	// The sandbox trusts its own CA and, through passthrough, the upstream's.
	roots := h.srv.opts.UpstreamRoots.Clone()
	roots.AddCert(h.sandbox.cert)
	c.Transport.(*http.Transport).TLSClientConfig.RootCAs = roots
	send := func(method, url, body string) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		readBody(t, resp)
	}
	for range 3 { // interleaved, so that each could find another's idle connection
		send("GET", "https://api.github.com/repos/acme/widgets", "")                                       // the fast path
		send("GET", "https://uploads.github.com/x", "")                                                    // the fast path, same upstream
		send("POST", "https://uploads.github.com/x", "{}")                                                 // the transport
		send("POST", "https://github.com/acme/widgets/info/lfs/objects/batch", `{"operation":"download"}`) // a body rule
		send("GET", "https://github.com/user", "")                                                         // refused
		send("GET", "https://api.github.com/user", "")                                                     // refused
		send("GET", "https://pypi.org/simple/", "")                                                        // passthrough
	}
	c.CloseIdleConnections() // the passthrough tunnel, which shutdown would wait for
	mu.Lock()
	defer mu.Unlock()
	if len(hosts) == 0 {
		t.Fatal("the upstream saw no connection")
	}
	for conn, hs := range hosts {
		for _, got := range hs[1:] {
			if got != hs[0] {
				t.Errorf("connection %s for %s carried a request for %s (all: %q)", conn.RemoteAddr(), hs[0], got, hs)
			}
		}
	}
}

// TestServerUpstreamErrorLogged: an upstream's malformed header, which
// Go's parser quotes in its error, reaches the log bounded, escaped and
// without the credential even when the upstream echoed it there.
func TestServerUpstreamErrorLogged(t *testing.T) {
	serve := func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nBroken header "+req.Header.Get("Authorization")+" \x1b[31mred\x1b[0m \u2028"+
			strings.Repeat("A", 4096)+"\r\n\r\n")
	}
	up, _ := rawUpstreamConns(t, serve, "uploads.github.com")
	h := newHarness(t, up)
	c, br := h.tlsTunnel("uploads.github.com", "uploads.github.com", false)
	defer c.Close()
	resp := roundTrip(t, c, br, "GET /x HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Bearer omnia-injected-github\r\n\r\n")
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(policy.RefusedHeader) != "" {
		t.Fatalf("%s %v, want a 502 that is not a refusal", resp.Status, resp.Header)
	}
	var msg string
	for _, line := range strings.Split(h.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "upstream request failed" {
			msg, _ = m["error"].(string)
		}
	}
	if msg == "" {
		t.Fatalf("no upstream failure line:\n%s", h.logs.String())
	}
	if holdsSecret(msg) || !strings.Contains(msg, redacted) {
		t.Errorf("the logged error is not scrubbed of the credential")
	}
	if len(msg) > maxLogText+len("…") || !strings.HasSuffix(msg, "…") {
		t.Errorf("the logged error is %d bytes, want at most %d and marked cut", len(msg), maxLogText)
	}
	for _, r := range msg {
		if r < 0x20 || r == 0x7f || r == '\u2028' {
			t.Errorf("the logged error holds %U unescaped", r)
		}
	}
	if !strings.Contains(msg, `\x1b[31mred`) {
		t.Errorf("the escape sequence is not shown escaped: %q", msg)
	}
}

func TestLogText(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"plain":                {in: "malformed header", want: "malformed header"},
		"controls":             {in: "a\r\nb\x00\x1b[0m\x7f", want: `a\x0d\x0ab\x00\x1b[0m\x7f`},
		"backslash":            {in: `a\x1b`, want: `a\\x1b`},
		"unicode":              {in: "é\u2028😀", want: `\u00e9\u2028\U0001f600`},
		"invalid utf8":         {in: "a\xffb", want: `a\xffb`},
		"cut":                  {in: strings.Repeat("a", maxLogText+1), want: strings.Repeat("a", maxLogText) + "…"},
		"cut before an escape": {in: strings.Repeat("a", maxLogText-2) + "\x01", want: strings.Repeat("a", maxLogText-2) + "…"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := logText(tc.in); got != tc.want {
				t.Fatalf("logText(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestServerScrubResponseBodies: with scrubResponseBodies on, the
// credential an upstream echoes in a body is masked byte for byte (the
// Content-Length holds), even split across writes; the upstream is asked
// for an uncompressed body, and a compressed one is not passed on.
func TestServerScrubResponseBodies(t *testing.T) {
	var gotAE, gotRange sync.Map
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		gotAE.Store(r.URL.Path, r.Header.Get("Accept-Encoding"))
		gotRange.Store(r.URL.Path, r.Header.Get("Range")+r.Header.Get("If-Range"))
		switch r.URL.Path {
		case "/range":
			// An echo served as content is, with Range support: each
			// part the sandbox asks for holds a piece of the
			// credential too short to be recognised.
			http.ServeContent(w, r, "", time.Time{}, strings.NewReader(`{"auth":"`+auth+`"}`))
		case "/split":
			// Streamed in pieces that cut the credential in two.
			w.Header().Set("Content-Type", "text/event-stream")
			for _, part := range []string{"data: " + auth[:12], auth[12:20], auth[20:] + "\n\n", "data: done\n\n"} {
				io.WriteString(w, part)
				w.(http.Flusher).Flush()
				time.Sleep(5 * time.Millisecond)
			}
		case "/length":
			body := `{"token":"` + strings.TrimPrefix(auth, "Bearer ") + `"}`
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			io.WriteString(w, body)
		case "/gzip", "/gzip-second-line", "/gzip-after-empty":
			// Compressed, declared as such in one of the ways a
			// client reads: the first Content-Encoding line need not be
			// the only one.
			switch r.URL.Path {
			case "/gzip":
				w.Header().Set("Content-Encoding", "gzip")
			case "/gzip-second-line":
				w.Header()["Content-Encoding"] = []string{"identity", "gzip"}
			case "/gzip-after-empty":
				w.Header()["Content-Encoding"] = []string{"", "gzip"}
			}
			zw := gzip.NewWriter(w)
			io.WriteString(zw, auth)
			zw.Close()
		}
	})
	h := newHarness(t, withUpstream(t, handler, "uploads.github.com"))
	cfg := strings.Replace(testConfig, `"passthrough"`, `"scrubResponseBodies": true, "passthrough"`, 1)
	writeAtomic(t, h.cfgPath, []byte(cfg))
	eventually(t, "the config with scrubResponseBodies", func() bool { return h.srv.state.Load().cfg.ScrubResponseBodies })
	c := h.client()
	get := func(path string, hdr map[string]string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", "https://uploads.github.com"+path, nil)
		req.Header.Set("Authorization", "Bearer omnia-injected-github")
		req.Header.Set("Accept-Encoding", "gzip")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, readBody(t, resp)
	}
	masked := "Bearer " + strings.Repeat("*", len(canary))
	echoed := `{"auth":"` + masked + `"}`
	tests := map[string]struct {
		path   string
		header map[string]string
		status int
		body   string
	}{
		"a range of an echo":                                     {path: "/range", header: map[string]string{"Range": "bytes=16-23"}, status: 200, body: echoed},
		"ranges of an echo":                                      {path: "/range", header: map[string]string{"Range": "bytes=0-15,16-23,24-"}, status: 200, body: echoed},
		"a range of an echo, with If-Range":                      {path: "/range", header: map[string]string{"Range": "bytes=16-23", "If-Range": `"x"`}, status: 200, body: echoed},
		"split across writes":                                    {path: "/split", status: 200, body: "data: " + masked + "\n\ndata: done\n\n"},
		"Content-Length kept true":                               {path: "/length", status: 200, body: `{"token":"` + strings.Repeat("*", len(canary)) + `"}`},
		"compressed body refused":                                {path: "/gzip", status: http.StatusBadGateway},
		"compressed, declared on a second Content-Encoding line": {path: "/gzip-second-line", status: http.StatusBadGateway},
		"compressed, declared after an empty Content-Encoding":   {path: "/gzip-after-empty", status: http.StatusBadGateway},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp, body := get(tc.path, tc.header)
			if resp.StatusCode != tc.status {
				t.Fatalf("%s, want %d (body %q)", resp.Status, tc.status, body)
			}
			if holdsSecret(body) {
				t.Fatal("the body holds the credential")
			}
			if tc.body != "" && body != tc.body {
				t.Errorf("body %q, want %q", body, tc.body)
			}
			if ae, _ := gotAE.Load(tc.path); ae != "identity" {
				t.Errorf("the upstream was asked for Accept-Encoding %q, want identity", ae)
			}
			if rg, _ := gotRange.Load(tc.path); rg != "" {
				t.Errorf("the upstream was asked for the range %q, want the whole body", rg)
			}
		})
	}
	if holdsSecret(h.logs.String()) {
		t.Error("the logs hold the credential")
	}
}

// TestServerPathAsChecked: the path the upstream reads is the path the
// rules checked. The proxy's HTTP client re-encodes a target whose raw
// form it would not send as is (raw bytes above 0x7f, '|', '"'), so a
// target is allowed only when the upstream, decoding what it gets, reads
// the same path as the proxy decoding what the sandbox sent. Raw bytes
// that are not UTF-8 would go out as the overlong escapes (%C0%AE for
// '.') the proxy refuses when they are sent escaped: they are refused too.
func TestServerPathAsChecked(t *testing.T) {
	h := newHarness(t)
	tests := map[string]struct {
		target  string
		allowed bool
	}{
		"raw overlong dot-dot":        {target: "/repos/acme/widgets/\xc0\xae\xc0\xae/\xc0\xae\xc0\xae/\xc0\xae\xc0\xae/user"},
		"raw overlong slash":          {target: "/repos/acme/widgets/x\xc0\xaf\xc0\xae\xc0\xae\xc0\xafuser"},
		"raw 3-byte overlong dot":     {target: "/repos/acme/widgets/\xe0\x80\xae\xe0\x80\xae/user"},
		"raw lone high byte":          {target: "/repos/acme/widgets/\xff"},
		"raw overlong beside escape":  {target: "/repos/acme/widgets/%41\xc0\xae"},
		"raw UTF-8":                   {target: "/repos/acme/widgets/caf\xc3\xa9", allowed: true},
		"characters sent re-encoded":  {target: "/repos/acme/widgets/a|b\"c%3A%40", allowed: true},
		"encoded UTF-8":               {target: "/repos/acme/widgets/caf%C3%A9", allowed: true},
		"raw high byte in the query":  {target: "/repos/acme/widgets?q=\xc0\xae", allowed: true},
		"overlong escape (reference)": {target: "/repos/acme/widgets/%c0%ae%c0%ae/user"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(h.api.seen())
			c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
			defer c.Close()
			resp := roundTrip(t, c, br, "GET "+tc.target+" HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
			seen := h.api.seen()[before:]
			if !tc.allowed {
				if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) {
					t.Fatalf("%s with %s %q, want 403 l7-not-allowed", resp.Status, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
				}
				if len(seen) != 0 {
					t.Fatalf("the upstream saw %q", seen[0].URI)
				}
				return
			}
			if resp.StatusCode != 200 || len(seen) != 1 {
				t.Fatalf("%s, the upstream saw %d requests; want 200 and one", resp.Status, len(seen))
			}
			sentPath, _, _ := strings.Cut(tc.target, "?")
			gotPath, _, _ := strings.Cut(seen[0].URI, "?")
			want, err1 := url.PathUnescape(sentPath)
			got, err2 := url.PathUnescape(gotPath)
			if err1 != nil || err2 != nil || got != want {
				t.Fatalf("the upstream read the path %q (sent %q), the rules checked %q", got, gotPath, want)
			}
		})
	}
}

// TestServerBodyCheckBounded: on a host whose rules read bodies, the
// proxy buffers up to policy.MaxBodyCheck of each request body before it
// decides. A sandbox that sends most of that and then stalls must neither
// hold the buffer (and its tunnel) forever nor, over many tunnels at once,
// make the proxy hold more than a bounded number of such buffers: 200
// tunnels stalled just short of 1 MiB were some 240 MiB of heap, the
// rendered sidecar's whole memory limit.
func TestServerBodyCheckBounded(t *testing.T) {
	const lfs = "POST /acme/widgets/info/lfs/objects/batch HTTP/1.1\r\nHost: github.com\r\nContent-Type: application/json\r\n"
	// stall sends a request whose body stops short of its length.
	stall := func(t *testing.T, h *harness, sent int) (net.Conn, *bufio.Reader) {
		c, br := h.tlsTunnel("github.com", "github.com", false)
		fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n%s", lfs, sent+1, strings.Repeat(" ", sent))
		return c, br
	}
	tests := map[string]struct {
		maxChecks int
		stalled   int    // requests stalled before the one observed
		sent      int    // bytes of the observed request's body sent
		whole     bool   // the observed request's body is sent whole
		status    int    // what the observed request gets
		within    string // and how soon
	}{
		"a stalled body is given up on": {sent: policy.MaxBodyCheck / 2, status: http.StatusBadRequest, within: "2s"},
		"checks beyond the bound wait, then are turned away": {
			maxChecks: 2, stalled: 2, whole: true, status: http.StatusServiceUnavailable, within: "3s",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) {
				o.Timeouts.ReadHeader = 5 * time.Second
				if tc.stalled == 0 {
					o.Timeouts.ReadHeader = 500 * time.Millisecond
				}
				o.MaxBodyChecks = tc.maxChecks
			})
			for range tc.stalled {
				c, _ := stall(t, h, policy.MaxBodyCheck-1)
				defer c.Close()
			}
			time.Sleep(100 * time.Millisecond) // the stalled ones hold their slots
			var c net.Conn
			var br *bufio.Reader
			if tc.whole {
				c, br = h.tlsTunnel("github.com", "github.com", false)
				body := `{"operation":"download"}`
				fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n%s", lfs, len(body), body)
			} else {
				c, br = stall(t, h, tc.sent)
			}
			defer c.Close()
			within, _ := time.ParseDuration(tc.within)
			c.SetReadDeadline(time.Now().Add(within))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within %s: %v", within, err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get(policy.RefusedHeader) != "" {
				t.Fatalf("%s (%s %q), want %d, no refusal header", resp.Status, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader), tc.status)
			}
		})
	}
}

// TestServerProxyConnCap: each connection still sending its request
// header may hold up to 64 KiB of it in the proxy, for up to the header
// timeout. A sandbox opening connections faster than they time out (2,000
// such were 141 MiB of heap; the rendered sidecar's limit is 256 MiB)
// must not run the proxy out of memory: past Options.MaxProxyConns, new
// connections wait to be accepted. Connections that became tunnels do not
// count: the tunnel cap counts them.
func TestServerProxyConnCap(t *testing.T) {
	const stalledHeader = "GET http://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\nX-Pad: "
	connect := func(t *testing.T, h *harness, within time.Duration) (net.Conn, *bufio.Reader, error) {
		c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(within))
		fmt.Fprintf(c, "CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("CONNECT: %s", resp.Status)
		}
		return c, br, err
	}
	t.Run("stalled headers hold the slots, then free them", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.MaxProxyConns = 3 })
		var stalled []net.Conn
		for range 3 {
			c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, stalledHeader+strings.Repeat("a", 60<<10))
			stalled = append(stalled, c)
		}
		time.Sleep(100 * time.Millisecond)
		c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		br := bufio.NewReader(c)
		if _, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err == nil || !isTimeout(err) {
			t.Fatalf("a connection past the cap was served (%v)", err)
		}
		stalled[0].Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("once a slot was free: %v %v", resp, err)
		}
	})
	t.Run("tunnels do not hold slots", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.MaxProxyConns = 2 })
		for i := range 5 {
			c, _, err := connect(t, h, 2*time.Second)
			if err != nil {
				t.Fatalf("tunnel %d: %v", i+1, err)
			}
			c.SetDeadline(time.Time{})
		}
	})
}

// TestServerScrubEscapedEcho: an upstream that echoes the credential
// percent-encoded (a cookie set from the Authorization header, as
// Express's res.cookie encodes it; a Location carrying it in a query)
// hands back [REDACTED] too. With the substitute form the sandbox
// chooses the user of a basic credential, so it can make the base64 end
// in '=' or hold '+' and '/', which an encoded echo spells differently
// from what went out.
func TestServerScrubEscapedEcho(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Add("Set-Cookie", "auth="+url.QueryEscape(auth))
		w.Header().Add("Set-Cookie", "auth_path="+url.PathEscape(auth))
		w.Header().Set("Location", "/login?auth="+lowerEscapes(url.QueryEscape(auth)))
		fmt.Fprintf(w, "credential carried: %v\n", echoHolds(auth))
	})
	h := newHarness(t, withUpstream(t, echo, "api.github.com", "github.com", "uploads.github.com"))
	const ph = "omnia-injected-github"
	tests := map[string]struct {
		url, auth string
	}{
		"basic form":                             {url: "https://github.com/acme/widgets/info/refs"},
		"substituted basic, padded":              {url: "https://uploads.github.com/x", auth: "Basic " + b64("x:"+ph)},
		"substituted basic, unpadded":            {url: "https://uploads.github.com/x", auth: "Basic " + b64("xy:"+ph)},
		"substituted basic, '+' and '/'":         {url: "https://uploads.github.com/x", auth: "Basic " + b64("\xfb\xff:"+ph)},
		"substituted basic, placeholder as user": {url: "https://uploads.github.com/x", auth: "Basic " + b64(ph+":?")},
		"substituted bearer":                     {url: "https://uploads.github.com/x", auth: "Bearer " + ph},
	}
	c := h.client()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp, body := doAuthorized(t, c, "GET", tc.url, tc.auth)
			if resp.StatusCode != 200 || body != "credential carried: true\n" {
				t.Fatalf("%s: %q, want 200 with the credential carried", resp.Status, body)
			}
			for k, vv := range resp.Header {
				for _, v := range vv {
					for _, part := range strings.FieldsFunc(v, func(r rune) bool { return r == '?' || r == '&' || r == ';' }) {
						_, val, _ := strings.Cut(part, "=")
						if dec, err := url.QueryUnescape(val); err == nil && echoHolds(dec) {
							t.Errorf("%s: %q hands back the credential", k, v)
						}
					}
				}
			}
		})
	}
}

// doAuthorized sends method target through c with the Authorization
// auth, none when empty, and returns the response and its body.
func doAuthorized(t *testing.T, c *http.Client, method, target, auth string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readBody(t, resp)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// echoHolds reports whether an Authorization value holds the canary, as
// is or in the base64 of basic credentials.
func echoHolds(auth string) bool {
	if strings.Contains(auth, canary) {
		return true
	}
	_, cred, _ := strings.Cut(auth, " ")
	raw, err := base64.StdEncoding.DecodeString(cred)
	return err == nil && strings.Contains(string(raw), canary)
}

// lowerEscapes writes the hex digits of s's percent-escapes in lower
// case, as some encoders do.
func lowerEscapes(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLower(b[i+1]), toLower(b[i+2])
		}
	}
	return string(b)
}

// TestServerTunnelFramingEdges: framing a hostile client may try inside
// a tunnel, beyond proxy/e2e's TestTunnelFraming. Each request is decided
// on its own, the proxy re-frames what it forwards, and what it cannot
// frame unambiguously it refuses: nothing unchecked reaches the upstream.
func TestServerTunnelFramingEdges(t *testing.T) {
	h := newHarness(t)
	const allowed = "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n"
	const refused = "GET /user HTTP/1.1\r\nHost: api.github.com\r\n\r\n"
	tests := map[string]struct {
		host, raw string
		codes     []int    // the responses, in order, until the connection ends
		upstream  []string // the request lines the upstream sees, in order
	}{
		"two different Content-Lengths": {
			raw: "POST /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\n" + refused, codes: []int{400},
		},
		"Transfer-Encoding other than chunked": {
			raw: allowed + "Transfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n" + refused, codes: []int{501},
		},
		"Transfer-Encoding with a space before the colon": {
			raw: allowed + "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n" + refused, codes: []int{400},
		},
		"an override header with a space before the colon": {
			raw: allowed + "X-HTTP-Method-Override : DELETE\r\n\r\n", codes: []int{400},
		},
		"an override header folded into another header's value": {
			raw: allowed + "X-Note: x\r\n X-HTTP-Method-Override: DELETE\r\n\r\n" + refused, codes: []int{200, 403},
			upstream: []string{"GET /repos/acme/widgets"},
		},
		"Transfer-Encoding folded onto a second line": {
			raw: allowed + "Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n" + refused, codes: []int{200, 403},
			upstream: []string{"GET /repos/acme/widgets"},
		},
		"bare LF line ends": {
			raw: "GET /repos/acme/widgets HTTP/1.1\nHost: api.github.com\n\n" + refused, codes: []int{200, 403},
			upstream: []string{"GET /repos/acme/widgets"},
		},
		"HTTP/1.0 keep-alive, then a refused request": {
			raw: "GET /repos/acme/widgets HTTP/1.0\r\nHost: api.github.com\r\nConnection: keep-alive\r\n\r\n" + refused, codes: []int{200, 403},
			upstream: []string{"GET /repos/acme/widgets"},
		},
		"HTTP/1.0 without Host": {raw: "GET /repos/acme/widgets HTTP/1.0\r\n\r\n", codes: []int{403}},
		"HTTP/0.9":              {raw: "GET /repos/acme/widgets\r\n\r\n", codes: []int{400}},
		"h2c upgrade, then a refused request": {
			raw: allowed + "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n" + refused, codes: []int{200, 403},
			upstream: []string{"GET /repos/acme/widgets"},
		},
		"HTTP/2 preface": {raw: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", codes: []int{403}},
		// The chunk extension's quoted string is not a line end: the
		// "request" in it is body bytes, which end malformed. A body
		// without a Content-Type is read whole before the decision (a
		// server may read an override from it as a form), so the
		// upstream sees nothing.
		"a request inside a chunk extension": {
			raw: allowed + "Transfer-Encoding: chunked\r\n\r\n2c;x=\"\r\n0\r\n\r\n\"\r\n" + refused + "\r\n0\r\n\r\n", codes: []int{400},
		},
		"a request inside a chunk extension, octet-stream": {
			raw: allowed + "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n2c;x=\"\r\n0\r\n\r\n\"\r\n" + refused + "\r\n0\r\n\r\n", codes: []int{502},
			upstream: []string{"GET /repos/acme/widgets"},
		},
		"an override header in a request trailer": {
			host:  "uploads.github.com",
			raw:   "POST /x HTTP/1.1\r\nHost: uploads.github.com\r\nTransfer-Encoding: chunked\r\nTrailer: X-HTTP-Method-Override\r\n\r\n0\r\nX-HTTP-Method-Override: DELETE\r\n\r\n",
			codes: []int{200}, upstream: []string{"POST /x"},
		},
		// Trailers arrive after a body rule has passed the body, and
		// after the credential was set: neither may be changed by them.
		"Authorization and Content-Type in a trailer after a body rule passed": {
			host: "github.com",
			raw: "POST /acme/widgets/info/lfs/objects/batch HTTP/1.1\r\nHost: github.com\r\nContent-Type: application/json\r\n" +
				"Transfer-Encoding: chunked\r\nTE: trailers\r\nTrailer: Authorization, Content-Type\r\n\r\n" +
				"18\r\n{\"operation\":\"download\"}\r\n0\r\nAuthorization: Bearer sandbox-chosen\r\nContent-Type: text/plain\r\n\r\n",
			codes: []int{200}, upstream: []string{"POST /acme/widgets/info/lfs/objects/batch"},
		},
		"absolute form naming another injected host": {
			raw: "GET https://github.com/acme/widgets/info/refs HTTP/1.1\r\nHost: api.github.com\r\n\r\n", codes: []int{403},
		},
		"a lower-case method": {raw: "get /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n", codes: []int{403}},
		"a Host with another port": {
			raw: "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com:8443\r\n\r\n", codes: []int{403},
		},
		"a Host with userinfo": {raw: "GET /repos/acme/widgets HTTP/1.1\r\nHost: x@api.github.com\r\n\r\n", codes: []int{400}},
		// The same host however spelt: decided and sent as its
		// canonical name.
		"a Host in upper case, with a trailing dot and :443": {
			raw: "GET /repos/acme/widgets HTTP/1.1\r\nHost: API.GITHUB.COM.:443\r\n\r\n", codes: []int{200},
			upstream: []string{"GET /repos/acme/widgets"},
		},
		"a Host with an empty port": {
			raw: "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com:\r\n\r\n", codes: []int{200},
			upstream: []string{"GET /repos/acme/widgets"},
		},
		"a Host that is an IPv6 literal": {raw: "GET /repos/acme/widgets HTTP/1.1\r\nHost: [::1]\r\n\r\n", codes: []int{403}},
		"two hosts in one Host": {
			raw: "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com, github.com\r\n\r\n", codes: []int{400},
		},
		"absolute form of the tunnel's own host": {
			raw: "GET https://api.github.com/repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n", codes: []int{403},
		},
		"absolute form with userinfo": {
			raw: "GET https://x@api.github.com/repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n", codes: []int{403},
		},
		"an origin form naming another authority (//host/path)": {
			raw: "GET //github.com/repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n", codes: []int{403},
		},
		// After a response that closes the connection, nothing more
		// is read from it: the second request never goes out.
		"Connection: close, then another request": {
			raw: allowed + "Connection: close\r\n\r\n" + allowed + "\r\n", codes: []int{200},
			upstream: []string{"GET /repos/acme/widgets"},
		},
		"HTTP/1.0 without keep-alive, then another request": {
			raw: "GET /repos/acme/widgets HTTP/1.0\r\nHost: api.github.com\r\n\r\n" + allowed + "\r\n", codes: []int{200},
			upstream: []string{"GET /repos/acme/widgets"},
		},
		// The body is the start of the next request's bytes; what
		// follows it is not a request.
		"a Content-Length shorter than the request behind it": {
			raw: allowed + "Content-Length: 5\r\n\r\n" + refused, codes: []int{200, 400},
			upstream: []string{"GET /repos/acme/widgets"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			host := cmp.Or(tc.host, "api.github.com")
			before := len(h.api.seen())
			c, br := h.tlsTunnel(host, host, false)
			defer c.Close()
			io.WriteString(c, tc.raw)
			var codes []int
			for {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					break
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				codes = append(codes, resp.StatusCode)
				if len(codes) == len(tc.codes) {
					break
				}
			}
			// The upstream may record a request after its response is
			// in (a body that ended malformed): let it settle.
			eventually(t, "the upstream's requests", func() bool { return len(h.api.seen())-before >= len(tc.upstream) })
			time.Sleep(50 * time.Millisecond)
			var got []string
			for _, s := range h.api.seen()[before:] {
				got = append(got, s.Method+" "+s.URI)
				if len(s.Header.Values("X-Http-Method-Override")) > 0 {
					t.Errorf("the upstream saw an override header")
				}
				if len(s.Trailer) > 0 {
					t.Errorf("the upstream saw request trailers %q", slices.Sorted(maps.Keys(s.Trailer)))
				}
			}
			if fmt.Sprint(codes) != fmt.Sprint(tc.codes) || fmt.Sprint(got) != fmt.Sprint(tc.upstream) {
				t.Fatalf("responses %v, upstream saw %q; want %v and %q", codes, got, tc.codes, tc.upstream)
			}
		})
	}
}

// TestServerStalledReader: a sandbox that asks for a long response and
// then reads none of it, on many tunnels, must not hold the proxy's
// buffers, its tunnel slots and the upstream connections forever. With
// the idle timeout at a second, each tunnel is closed once a write to it
// has waited that long, and the upstream sees its connection end.
func TestServerStalledReader(t *testing.T) {
	chunk := []byte(strings.Repeat("x", 32<<10))
	var ended atomic.Int64
	up := withUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer ended.Add(1)
		for range 256 { // 8 MiB, far more than the sockets' buffers hold
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}), "api.github.com", "pypi.org")
	h := newHarness(t, up, func(o *Options) { o.Timeouts.Idle = time.Second })
	tests := map[string]struct {
		host, path string
		roots      *x509.CertPool
	}{
		"intercepted, the credential injected": {host: "api.github.com", path: "/repos/acme/widgets", roots: h.sandbox.pool},
		"passthrough":                          {host: "pypi.org", path: "/simple/", roots: h.srv.opts.UpstreamRoots},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := ended.Load()
			const n = 8
			for range n {
				c, _, resp := h.connect(tc.host + ":443")
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("CONNECT: %s", resp.Status)
				}
				c.SetDeadline(time.Time{})
				t.Cleanup(func() { c.Close() })
				tlc := tls.Client(c, &tls.Config{ServerName: tc.host, RootCAs: tc.roots})
				if err := tlc.Handshake(); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(tlc, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", tc.path, tc.host)
			}
			eventually(t, "the stalled tunnels to close", func() bool { return h.srv.metrics.tunnels.Load() == 0 })
			eventually(t, "the upstream's writes to end", func() bool { return ended.Load()-before == n })
		})
	}
}

// TestServerStalledReaderPipelined: TestServerStalledReader with short
// responses. A sandbox that pipelines requests and reads none of the
// answers fills the socket's buffers with responses the proxy wrote
// itself (refusals) or whole small ones it forwarded, whose last bytes
// net/http flushes after the handler has returned: no deadline ran on
// those writes, so each such connection held its tunnel slot, or its
// slot on the proxy port, forever. At the caps, every new tunnel got
// 503 and the proxy port accepted nothing until a restart.
func TestServerStalledReaderPipelined(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Timeouts.Idle = time.Second; o.MaxProxyConns = 1 })
	// flood writes req over and over until the connection fails.
	flood := func(c io.Writer, req string) {
		batch := strings.Repeat(req, 256)
		go func() {
			for {
				if _, err := io.WriteString(c, batch); err != nil {
					return
				}
			}
		}()
	}
	for name, path := range map[string]string{
		"refusals in a tunnel":                  "/user",
		"short forwarded responses in a tunnel": "/repos/acme/widgets",
	} {
		t.Run(name, func(t *testing.T) {
			c, _, resp := h.connect("api.github.com:443")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("CONNECT: %s", resp.Status)
			}
			c.SetDeadline(time.Time{})
			defer c.Close()
			tlc := tls.Client(c, &tls.Config{ServerName: "api.github.com", RootCAs: h.sandbox.pool})
			if err := tlc.Handshake(); err != nil {
				t.Fatal(err)
			}
			flood(tlc, "GET "+path+" HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
			// The idle timeout, then the 5 s crypto/tls gives its
			// close_notify alert before it closes a connection.
			for deadline := time.Now().Add(10 * time.Second); h.srv.metrics.tunnels.Load() != 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the stalled tunnel is still open after 10 s")
				}
			}
		})
	}
	t.Run("refusals on the proxy port", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		flood(c, "GET http://evil.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n")
		time.Sleep(100 * time.Millisecond) // it holds the only slot
		c2, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		c2.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c2, "CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c2), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatalf("no answer to a CONNECT while the stalled connection held the proxy port's only slot: %v", err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("CONNECT once the stalled connection was let go: %s", resp.Status)
		}
	})
}

// TestServerUpgrade: a WebSocket (or any) upgrade to an injected host.
// After a 101 the proxy could check nothing more, so the upgrade is never
// asked for: Upgrade and Connection are hop-by-hop and stripped, and the
// request goes out as a plain one. An upstream that switches protocols
// anyway, then sends what it echoes in the new protocol, gets the
// sandbox a 502 and none of it.
func TestServerUpgrade(t *testing.T) {
	type sawT struct{ upgrade, connection, auth string }
	saw := make(chan sawT, 4)
	opt, _ := rawUpstreamConns(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		saw <- sawT{req.Header.Get("Upgrade"), req.Header.Get("Connection"), req.Header.Get("Authorization")}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n\x81\x7e"+req.Header.Get("Authorization"))
		time.Sleep(200 * time.Millisecond)
	}, "api.github.com", "uploads.github.com")
	h := newHarness(t, opt)
	upgrade := "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	tests := map[string]struct {
		host, raw string
	}{
		"GET, header form": {host: "api.github.com",
			raw: "GET /repos/acme/widgets/socket HTTP/1.1\r\nHost: api.github.com\r\n" + upgrade + "\r\n"},
		"POST with a body, substitute form": {host: "uploads.github.com",
			raw: "POST /socket HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Bearer omnia-injected-github\r\nContent-Length: 2\r\n" + upgrade + "\r\nhi"},
		"h2c": {host: "api.github.com",
			raw: "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, br := h.tlsTunnel(tc.host, tc.host, false)
			defer c.Close()
			resp := roundTrip(t, c, br, tc.raw)
			body := readBody(t, resp)
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("%s, want 502", resp.Status)
			}
			// Nothing follows the 502: the switched connection's bytes
			// are not passed on.
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			rest, _ := io.ReadAll(br)
			if got := fmt.Sprint(resp.Header) + body + string(rest); holdsSecret(got) {
				t.Error("the sandbox got the credential")
			}
			if len(rest) > 0 {
				t.Errorf("after the 502 the sandbox got %q", strings.ReplaceAll(string(rest), canary, "<credential>"))
			}
			s := <-saw
			// "close" is the proxy's own: a connection that carried a
			// request body is not reused.
			if s.upgrade != "" || s.connection != "" && s.connection != "close" {
				t.Errorf("the upstream was asked to upgrade: Upgrade %q, Connection %q", s.upgrade, s.connection)
			}
			if s.auth != "Bearer "+canary {
				t.Errorf("the upstream got no credential; the request should go out as a plain one")
			}
		})
	}
}

// TestServerLogAndMetricsForging: what the sandbox controls and the
// proxy records (the CONNECT target, Host, the method and the path) made
// to look like another metric series or another log line, or to be very
// long. The metrics name only configured hosts (others are "_other"),
// and each request is one JSON line of bounded length whose fields hold
// what was sent, escaped.
func TestServerLogAndMetricsForging(t *testing.T) {
	h := newHarness(t)
	forged := `x"} 1` + "\u2028" + `keyhole_proxy_requests_total{host="api.github.com",decision="inject",reason="allowed`
	long := strings.Repeat("a", 60<<10)
	tests := map[string]struct {
		connect string // a CONNECT target; "" for a request in a tunnel to api.github.com
		raw     string // the request in the tunnel
	}{
		"CONNECT target forging a series":       {connect: "evil.example" + url.PathEscape(forged) + ":443"},
		"CONNECT target with quotes and braces": {connect: `"evil"{}:443`},
		"CONNECT target of 60 KiB":              {connect: long + ".example:443"},
		"Host forging a series":                 {raw: "GET /repos/acme/widgets HTTP/1.1\r\nHost: " + forged + "\r\n\r\n"},
		"path forging a log line":               {raw: "GET /user/\",\"decision\":\"inject\",\"reason\":\"allowed\"}\u2028{\"x\":\" HTTP/1.1\r\nHost: api.github.com\r\n\r\n"},
		"path of 60 KiB":                        {raw: "GET /" + long + " HTTP/1.1\r\nHost: api.github.com\r\n\r\n"},
		"method of 60 KiB":                      {raw: "G" + long + " /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n"},
		"escape sequence in the path":           {raw: "GET /user/\x1b[2J\x1b]0;owned\x07 HTTP/1.1\r\nHost: api.github.com\r\n\r\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			lines := len(h.logs.requests(t))
			if tc.connect != "" {
				c, err := net.Dial("tcp", h.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: evil.example:443\r\n\r\n", tc.connect)
				resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode == http.StatusBadRequest {
					return // Go's server refused to parse it: nothing to log
				}
				if resp.StatusCode != http.StatusForbidden {
					t.Fatalf("CONNECT: %s", resp.Status)
				}
			} else {
				c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
				defer c.Close()
				io.WriteString(c, tc.raw)
				if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode < 400 {
					t.Fatalf("got %v, %v; want a refusal", resp, err)
				}
			}
			eventually(t, "the request's log line", func() bool { return len(h.logs.requests(t)) > lines })
		})
	}
	// Every request line is one JSON object on one line, none long.
	for _, line := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("a log line is not one JSON object: %q", policy.Clip(line))
		}
		if len(line) > 1024 {
			t.Errorf("a log line of %d bytes: %q", len(line), policy.Clip(line))
		}
		if strings.ContainsAny(line, "\x1b\x07\u2028") {
			t.Errorf("a log line holds a raw control or separator character: %q", line)
		}
	}
	m := h.get("/metrics")
	for _, l := range strings.Split(m, "\n") {
		if strings.HasPrefix(l, "keyhole_proxy_requests_total{") && !strings.HasPrefix(l, `keyhole_proxy_requests_total{host="api.github.com",`) &&
			!strings.HasPrefix(l, `keyhole_proxy_requests_total{host="_other",`) {
			t.Errorf("a series names a host the config does not: %q", l)
		}
		if strings.Contains(l, "evil") || strings.Contains(l, "aaaa") {
			t.Errorf("a metric line holds what the sandbox sent: %q", policy.Clip(l))
		}
	}
}

// encodedForms are the encodings an upstream may hand a credential back
// in, beyond the percent-escapes: hex in either case, and base64
// (standard or URL-safe, padded or not) of the bare credential, of the
// header it went out in, of basic credentials, and of a document that
// holds it at any offset (a session cookie built from it).
func encodedForms(tok string) map[string]string {
	forms := map[string]string{
		"hex":         hex.EncodeToString([]byte(tok)),
		"HEX":         strings.ToUpper(hex.EncodeToString([]byte(tok))),
		"hex, bearer": hex.EncodeToString([]byte("Bearer " + tok)),
	}
	for name, enc := range map[string]*base64.Encoding{"base64": base64.StdEncoding, "base64url": base64.URLEncoding, "raw base64url": base64.RawURLEncoding} {
		forms[name] = enc.EncodeToString([]byte(tok))
		forms[name+", bearer"] = enc.EncodeToString([]byte("Bearer " + tok))
		forms[name+", basic"] = enc.EncodeToString([]byte("x-access-token:" + tok))
		for off := range 3 {
			forms[fmt.Sprintf("%s, in a document at %d", name, off)] = enc.EncodeToString([]byte(`{"s":"` + strings.Repeat("x", off) + tok + `","t":1}`))
		}
	}
	return forms
}

// TestServerScrubEncodedEcho: an upstream that hands the credential back
// encoded (hex, base64 of it or of what holds it), in a header or, with
// scrubResponseBodies, in the body, hands back none of those forms: the
// scrub knows the hex and every base64 alignment of each credential
// value, so what reaches the sandbox decodes to no credential.
func TestServerScrubEncodedEcho(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		tok := strings.TrimPrefix(auth, "Bearer ")
		if raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(auth, "Basic ")); err == nil {
			_, tok, _ = strings.Cut(string(raw), ":")
		}
		forms := encodedForms(tok)
		names := make([]string, 0, len(forms))
		for n := range forms {
			names = append(names, n)
		}
		slices.Sort(names)
		for i, n := range names {
			w.Header().Add("Set-Cookie", fmt.Sprintf("s%d=%s", i, forms[n]))
		}
		for _, n := range names {
			fmt.Fprintf(w, "%s: %s\n", n, forms[n])
		}
	})
	h := newHarness(t, withUpstream(t, echo, "github.com", "uploads.github.com"))
	cfg := strings.Replace(testConfig, `"passthrough"`, `"scrubResponseBodies": true, "passthrough"`, 1)
	writeAtomic(t, h.cfgPath, []byte(cfg))
	eventually(t, "the config with scrubResponseBodies", func() bool { return h.srv.state.Load().cfg.ScrubResponseBodies })
	tests := map[string]struct{ method, url, auth string }{
		"HEAD, headers only":             {method: "HEAD", url: "https://uploads.github.com/x", auth: "Bearer omnia-injected-github"},
		"basic form":                     {url: "https://github.com/acme/widgets/info/refs"},
		"substituted bearer":             {url: "https://uploads.github.com/x", auth: "Bearer omnia-injected-github"},
		"substituted basic, user chosen": {url: "https://uploads.github.com/x", auth: "Basic " + b64("\xfb\xff:omnia-injected-github")},
	}
	c := h.client()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp, body := doAuthorized(t, c, cmp.Or(tc.method, "GET"), tc.url, tc.auth)
			if resp.StatusCode != 200 {
				t.Fatalf("%s", resp.Status)
			}
			got := body + fmt.Sprint(resp.Header)
			for form, v := range encodedForms(canary) {
				if strings.Contains(got, v) {
					t.Errorf("the response holds the credential as %s", form)
				}
			}
			if len(resp.Header.Values("Set-Cookie")) < 20 {
				t.Errorf("the echo's cookies did not come back: %d", len(resp.Header.Values("Set-Cookie")))
			}
			if tc.method != "HEAD" && !strings.Contains(body, "hex: *") {
				t.Errorf("the echo was not masked: %q", policy.Clip(body))
			}
		})
	}
}

// TestServerScrubHeaderNames: an upstream that echoes the credential as
// a header name, in a 100 no Expect asked for, a 103, the final header, an announced trailer and
// one it did not announce. Go reads names in canonical case
// (X-Canary-7f3e9b1c-Do-Not-Leak), so the echo comes back with its
// letters' case changed but otherwise whole. Every such header is
// dropped, on both forwarding paths; the log names it redacted. A value
// folded onto a line that looks like a header of its own comes back as
// one line, scrubbed.
func TestServerScrubHeaderNames(t *testing.T) {
	up, _ := rawUpstreamConns(t, func(c net.Conn) {
		eachRequest(c, func(req *http.Request) {
			_, cred, _ := strings.Cut(req.Header.Get("Authorization"), " ")
			// A 100 no Expect asked for, then a 103, each echoing it
			// as a name and as a value.
			fmt.Fprintf(c, "HTTP/1.1 100 Continue\r\nX-%s: 1\r\nX-Echo: %s\r\n\r\n", cred, cred)
			fmt.Fprintf(c, "HTTP/1.1 103 Early Hints\r\nX-%s: 1\r\nLink: </a.css>; rel=preload\r\n\r\n", cred)
			// A value folded onto a second line, whose continuation
			// looks like a header of its own: Go joins the two with a
			// space, and the sandbox gets one line, scrubbed.
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nX-%s: 1\r\nX-Folded: a\r\n X-Injected: %s\r\nX-Kept: yes\r\nTrailer: X-T-%s\r\nTransfer-Encoding: chunked\r\n\r\n"+
				"2\r\nok\r\n0\r\nX-T-%s: 1\r\nX-U-%s: 1\r\nX-Kept-Trailer: yes\r\n\r\n", cred, cred, cred, cred, cred)
		})
	}, "api.github.com", "uploads.github.com")
	h := newHarness(t, up)
	// Each path's request, on the host it is sent to.
	tests := map[string]struct{ host, raw string }{
		"a bodiless GET (the pooled fast path)": {"api.github.com", "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n"},
		"a POST with the placeholder substituted (the transport)": {"uploads.github.com",
			"POST /up HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Bearer omnia-injected-github\r\nContent-Length: 2\r\n\r\nhi"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, br := h.tlsTunnel(tc.host, tc.host, false)
			defer c.Close()
			io.WriteString(c, tc.raw+"GET /x HTTP/1.1\r\nHost: "+tc.host+"\r\nConnection: close\r\n\r\n")
			raw, _ := io.ReadAll(br)
			low := strings.ToLower(string(raw))
			if strings.Contains(low, strings.ToLower(canary)) {
				t.Fatalf("the sandbox got the credential as a header name:\n%s", strings.ReplaceAll(low, strings.ToLower(canary), "<credential>"))
			}
			for _, want := range []string{"100 continue", "x-echo: [redacted]", "103 early hints", "link: </a.css>", "x-folded: a x-injected: [redacted]\r\n", "x-kept: yes", "\r\nok\r\n", "x-kept-trailer: yes"} {
				if !strings.Contains(low, want) {
					t.Errorf("the response lacks %q:\n%s", want, low)
				}
			}
			if strings.Contains(low, "\r\nx-injected:") {
				t.Errorf("a folded line came back as a header of its own:\n%s", low)
			}
		})
	}
	logs := strings.ToLower(h.logs.String())
	if strings.Contains(logs, strings.ToLower(canary)) {
		t.Fatal("the logs hold the credential")
	}
	for _, where := range []string{"interim", "header", "trailer"} {
		if !strings.Contains(logs, `"where":"`+where+`","headers":"x-`) || !strings.Contains(logs, "[redacted]") {
			t.Errorf("no redaction line for the %s:\n%s", where, logs)
		}
	}
}
