package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// forwardFront serves a forwarder in front of the upstream at addr, as
// the proxy's handlers do for a passthrough host: hop-by-hop stripped,
// the header prepared, Host set. With ca set the
// upstream speaks TLS with a leaf for upstreamName from ca, and the
// forwarder has the proxy's fast path for bodiless GET and HEAD.
func forwardFront(t *testing.T, addr string, ca *testCA) (front *httptest.Server, upstreamErrs func() []error, f *forwarder) {
	t.Helper()
	var mu sync.Mutex
	var errs []error
	onError := func(w http.ResponseWriter, _ *http.Request, err error, _ Injected) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		http.Error(w, "keyhole: the upstream request failed", http.StatusBadGateway)
	}
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	tr := &http.Transport{DisableCompression: true, ExpectContinueTimeout: time.Second, ResponseHeaderTimeout: 5 * time.Second, DialContext: dial}
	t.Cleanup(tr.CloseIdleConnections)
	scheme, host := "http", addr
	var pool *upPool
	if ca != nil {
		scheme, host = "https", upstreamName
		upTLS := &tls.Config{RootCAs: ca.pool, NextProtos: []string{"http/1.1"}}
		tr.TLSClientConfig = upTLS
		pool = &upPool{dial: dial, tls: upTLS, dialWait: 5 * time.Second, respWait: 5 * time.Second, idle: time.Minute, perHost: 4}
		t.Cleanup(pool.closeAll)
	}
	f = newForwarder(scheme, tr, onError)
	f.pool, f.observe = pool, func(time.Duration) {}
	front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stripHopByHop(r.Header)
		sc, _ := prepareHeader(r.Header, policy.Decision{Action: policy.ActionForward, Reason: policy.ReasonAllowed}, nil)
		r.Host = host
		f.forward(w, r, sc)
	}))
	t.Cleanup(front.Close)
	return front, func() []error { mu.Lock(); defer mu.Unlock(); return append([]error(nil), errs...) }, f
}

// upstreamName is the name on a TLS test upstream's certificate.
const upstreamName = "upstream.test"

// rawUpstream answers every connection with the bytes of reply after
// reading one request head, then closes it; over TLS when ca is set.
func rawUpstream(t *testing.T, reply string, ca *testCA) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if ca != nil {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, upstreamName)}})
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, reply)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestForwarderResponses(t *testing.T) {
	tests := []struct {
		name string
		// upstream is an http.Handler, or raw is what a raw upstream sends.
		upstream http.HandlerFunc
		raw      string
		do       func(t *testing.T, c *http.Client, url string)
	}{
		{
			name: "announced trailer reaches the client",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Trailer", "X-Checksum")
				io.WriteString(w, "body")
				w.Header().Set("X-Checksum", "abc")
			},
			do: func(t *testing.T, c *http.Client, url string) {
				resp := mustGet(t, c, url)
				if body := readBody(t, resp); body != "body" || resp.Trailer.Get("X-Checksum") != "abc" {
					t.Errorf("body %q trailer %v, want body and X-Checksum: abc", body, resp.Trailer)
				}
			},
		},
		{
			name: "unannounced trailer reaches the client",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, "body")
				w.(http.Flusher).Flush()
				w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
			},
			do: func(t *testing.T, c *http.Client, url string) {
				resp := mustGet(t, c, url)
				if body := readBody(t, resp); body != "body" || resp.Trailer.Get("X-Late") != "yes" {
					t.Errorf("body %q trailer %v, want X-Late: yes", body, resp.Trailer)
				}
			},
		},
		{
			name: "HEAD keeps the upstream's Content-Length and has no body",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", "42")
			},
			do: func(t *testing.T, c *http.Client, url string) {
				resp, err := c.Head(url)
				if err != nil {
					t.Fatal(err)
				}
				if body := readBody(t, resp); body != "" || resp.ContentLength != 42 {
					t.Errorf("HEAD: body %q length %d, want empty and 42", body, resp.ContentLength)
				}
			},
		},
		{
			name: "chunked both ways: a streamed request body arrives whole, a streamed response stays chunked",
			upstream: func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				for _, part := range []string{"got ", string(b)} {
					io.WriteString(w, part)
					w.(http.Flusher).Flush()
				}
			},
			do: func(t *testing.T, c *http.Client, url string) {
				pr, pw := io.Pipe()
				go func() {
					for _, s := range []string{"one,", "two,", "three"} {
						io.WriteString(pw, s)
					}
					pw.Close()
				}()
				req, _ := http.NewRequest(http.MethodPost, url, pr)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if body := readBody(t, resp); body != "got one,two,three" || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
					t.Errorf("body %q transfer-encoding %v, want the whole body, chunked", body, resp.TransferEncoding)
				}
			},
		},
		{
			name: "response without Content-Length, ended by close, arrives whole",
			raw:  "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nuntil the end",
			do: func(t *testing.T, c *http.Client, url string) {
				resp := mustGet(t, c, url)
				if body := readBody(t, resp); body != "until the end" {
					t.Errorf("body %q, want %q", body, "until the end")
				}
			},
		},
		{
			name: "upstream closing mid-body closes the client connection",
			raw:  "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..",
			do: func(t *testing.T, c *http.Client, url string) {
				// Either the response never arrives or its body fails:
				// both show the client the transfer broke.
				resp, err := c.Get(url)
				if err != nil {
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil {
					t.Errorf("read %q with no error: a truncated body looked complete", b)
				}
			},
		},
		{
			name: "101 the client did not ask for is an upstream error",
			raw:  "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
			do: func(t *testing.T, c *http.Client, url string) {
				resp := mustGet(t, c, url)
				readBody(t, resp)
				if resp.StatusCode != http.StatusBadGateway {
					t.Errorf("status %d, want 502", resp.StatusCode)
				}
			},
		},
		{
			name: "hop-by-hop and refusal headers of the response are stripped",
			raw: "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n" +
				policy.RefusedHeader + ": l7-not-allowed\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok",
			do: func(t *testing.T, c *http.Client, url string) {
				resp := mustGet(t, c, url)
				readBody(t, resp)
				for _, k := range []string{"X-Hop", "Keep-Alive", policy.RefusedHeader} {
					if v := resp.Header.Get(k); v != "" {
						t.Errorf("%s: %q reached the client", k, v)
					}
				}
				if resp.Header.Get("X-Kept") != "yes" {
					t.Errorf("X-Kept lost: %v", resp.Header)
				}
			},
		},
		{
			name: "refusal headers in a 103 and in trailers are stripped",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set(policy.RefusedHeader, "host-not-allowed")
				w.Header().Set("Link", "</a.css>; rel=preload")
				w.WriteHeader(http.StatusEarlyHints)
				clear(w.Header())
				w.Header().Set("Trailer", policy.RefusedHeader+", X-Checksum")
				io.WriteString(w, "body")
				w.Header().Set(policy.RefusedHeader, "l7-not-allowed")
				w.Header().Set("X-Checksum", "abc")
				w.Header().Set(http.TrailerPrefix+"X-Omnia-Egress-Refused", "credential-unavailable")
			},
			do: func(t *testing.T, c *http.Client, url string) {
				var interim []textproto.MIMEHeader
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					Got1xxResponse: func(_ int, h textproto.MIMEHeader) error { interim = append(interim, h); return nil },
				}))
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				readBody(t, resp)
				if len(interim) != 1 || interim[0].Get(policy.RefusedHeader) != "" || interim[0].Get("Link") == "" {
					t.Errorf("interim responses %v, want the 103 without %s", interim, policy.RefusedHeader)
				}
				if v, ok := resp.Trailer[policy.RefusedHeader]; ok || resp.Trailer.Get("X-Checksum") != "abc" {
					t.Errorf("trailer %s = %q, X-Checksum %q: want no refusal header, the checksum kept", policy.RefusedHeader, v, resp.Trailer.Get("X-Checksum"))
				}
				if resp.Header.Get("Trailer") != "" && strings.Contains(resp.Header.Get("Trailer"), policy.RefusedHeader) {
					t.Errorf("the refusal header is announced as a trailer")
				}
			},
		},
		{
			name: "request trailers are not forwarded",
			upstream: func(w http.ResponseWriter, r *http.Request) {
				io.ReadAll(r.Body)
				fmt.Fprintf(w, "%v", r.Trailer)
			},
			do: func(t *testing.T, c *http.Client, url string) {
				req, _ := http.NewRequest(http.MethodPost, url, io.MultiReader(strings.NewReader("x")))
				req.Trailer = http.Header{"X-Http-Method-Override": {"DELETE"}}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if body := readBody(t, resp); strings.Contains(body, "DELETE") {
					t.Errorf("the upstream saw request trailers %s", body)
				}
			},
		},
		{
			name: "an upstream connection is not reused after HEAD",
			upstream: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Conn", r.RemoteAddr)
			},
			do: func(t *testing.T, c *http.Client, url string) {
				var conns []string
				for _, m := range []string{http.MethodHead, http.MethodGet, http.MethodGet} {
					req, _ := http.NewRequest(m, url, nil)
					resp, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					readBody(t, resp)
					conns = append(conns, resp.Header.Get("X-Conn"))
				}
				if conns[0] == conns[1] || conns[1] != conns[2] {
					t.Errorf("upstream connections %q: want HEAD's closed, the GETs' shared", conns)
				}
			},
		},
		{
			name: "100-continue: the body is sent once the upstream asks for it",
			upstream: func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				fmt.Fprintf(w, "expect=%q body=%q", r.Header.Get("Expect"), b)
			},
			do: func(t *testing.T, c *http.Client, url string) {
				req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("payload"))
				req.Header.Set("Expect", "100-continue")
				var got100 bool
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{Got100Continue: func() { got100 = true }}))
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if body := readBody(t, resp); body != `expect="100-continue" body="payload"` || !got100 {
					t.Errorf("body %q, 100 Continue seen %v", body, got100)
				}
			},
		},
		{
			name: "103 Early Hints are passed on before the final response",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Link", "</style.css>; rel=preload")
				w.WriteHeader(http.StatusEarlyHints)
				w.Header().Del("Link")
				io.WriteString(w, "final")
			},
			do: func(t *testing.T, c *http.Client, url string) {
				var hints []string
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
						hints = append(hints, fmt.Sprintf("%d %s", code, h.Get("Link")))
						return nil
					},
				}))
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if body := readBody(t, resp); body != "final" || len(hints) != 1 || hints[0] != "103 </style.css>; rel=preload" || resp.Header.Get("Link") != "" {
					t.Errorf("body %q hints %q final Link %q", body, hints, resp.Header.Get("Link"))
				}
			},
		},
		{
			name: "forwarding headers from the sandbox are dropped and no Go User-Agent is added",
			upstream: func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "%q %q %q", r.Header.Get("X-Forwarded-For"), r.Header.Get("Forwarded"), r.Header.Values("User-Agent"))
			},
			do: func(t *testing.T, c *http.Client, url string) {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("X-Forwarded-For", "10.0.0.1")
				req.Header.Set("Forwarded", "for=10.0.0.1")
				req.Header["User-Agent"] = []string{""}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if body := readBody(t, resp); body != `"" "" []` {
					t.Errorf("upstream saw %s, want no forwarding headers and no User-Agent", body)
				}
			},
		},
	}
	for _, mode := range []string{"transport", "fast path"} {
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				var ca *testCA
				if mode == "fast path" {
					ca = newTestCA(t, "upstream CA")
				}
				var addr string
				if tt.upstream != nil {
					up := httptest.NewUnstartedServer(tt.upstream)
					if ca != nil {
						up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, upstreamName)}}
						up.StartTLS()
					} else {
						up.Start()
					}
					t.Cleanup(up.Close)
					addr = up.Listener.Addr().String()
				} else {
					addr = rawUpstream(t, tt.raw, ca)
				}
				front, _, _ := forwardFront(t, addr, ca)
				c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}
				t.Cleanup(c.CloseIdleConnections)
				tt.do(t, c, front.URL+"/path?q=1")
			})
		}
	}
}

func TestForwarderUnreachableUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	front, errs, _ := forwardFront(t, addr, nil)
	resp := mustGet(t, http.DefaultClient, front.URL+"/")
	readBody(t, resp)
	if resp.StatusCode != http.StatusBadGateway || len(errs()) != 1 {
		t.Errorf("status %d, errors %v: want 502 and one upstream error", resp.StatusCode, errs())
	}
	var oe *net.OpError
	if !errors.As(errs()[0], &oe) {
		t.Errorf("error %v is not the dial's", errs()[0])
	}
}

func TestIsEventStream(t *testing.T) {
	tests := []struct {
		name, ct string
		want     bool
	}{
		{"empty", "", false},
		{"plain", "text/event-stream", true},
		{"with parameters and odd case", " Text/Event-Stream ; charset=utf-8", true},
		{"another type", "application/json", false},
		{"a prefix is not the type", "text/event-streams", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isEventStream(tt.ct); got != tt.want {
				t.Errorf("isEventStream(%q) = %v, want %v", tt.ct, got, tt.want)
			}
		})
	}
}

func TestCleanQuery(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"clean query unchanged, order kept", "b=2&a=1&a=%2F", "b=2&a=1&a=%2F"},
		{"semicolon re-encoded", "a=1;b=2&c=3", "c=3"},
		{"bad escape re-encoded", "a=%zz&b=1", "b=1"},
		{"truncated escape re-encoded", "a=1&b=%4", "a=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cleanQuery(tt.in); got != tt.want {
				t.Errorf("cleanQuery(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzCleanQuery: never panics, and what it returns parses cleanly and
// is returned unchanged when cleaned again.
func FuzzCleanQuery(f *testing.F) {
	for _, s := range []string{"", "a=1", "a=1;b=2", "a=%zz", "%", "a=%41&b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := cleanQuery(s)
		if _, err := url.ParseQuery(out); err != nil {
			t.Fatalf("cleanQuery(%q) = %q, which does not parse: %v", s, out, err)
		}
		if again := cleanQuery(out); again != out {
			t.Fatalf("cleanQuery not stable: %q -> %q -> %q", s, out, again)
		}
	})
}

func mustGet(t *testing.T, c *http.Client, url string) *http.Response {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestUpPoolConnections(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		// between runs after each request but the last.
		between   func(up *httptest.Server)
		requests  int
		wantConns int
	}{
		{
			name:     "sequential GETs share one connection",
			handler:  func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") },
			requests: 5, wantConns: 1,
		},
		{
			name:      "a connection the upstream closed while idle is replaced without an error",
			handler:   func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") },
			between:   func(up *httptest.Server) { up.CloseClientConnections() },
			requests:  3,
			wantConns: 3,
		},
		{
			name: "a response asking to close is not pooled",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Connection", "close")
				io.WriteString(w, "ok")
			},
			requests: 3, wantConns: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca := newTestCA(t, "upstream CA")
			var mu sync.Mutex
			conns := 0
			up := httptest.NewUnstartedServer(tt.handler)
			up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					mu.Lock()
					conns++
					mu.Unlock()
				}
			}
			up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, upstreamName)}}
			up.StartTLS()
			t.Cleanup(up.Close)
			front, errs, _ := forwardFront(t, up.Listener.Addr().String(), ca)
			for i := range tt.requests {
				resp := mustGet(t, http.DefaultClient, front.URL+"/")
				if body := readBody(t, resp); body != "ok" || resp.StatusCode != 200 {
					t.Fatalf("request %d: %d %q, errors %v", i, resp.StatusCode, body, errs())
				}
				if tt.between != nil && i < tt.requests-1 {
					tt.between(up)
					time.Sleep(20 * time.Millisecond) // let the close land
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if conns != tt.wantConns {
				t.Errorf("upstream saw %d connections, want %d", conns, tt.wantConns)
			}
		})
	}
}

func TestUpPoolResponseHeaderTimeout(t *testing.T) {
	ca := newTestCA(t, "upstream CA")
	release := make(chan struct{})
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, upstreamName)}}
	up.StartTLS()
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) })
	front, errs, f := forwardFront(t, up.Listener.Addr().String(), ca)
	f.pool.respWait = 100 * time.Millisecond
	start := time.Now()
	resp := mustGet(t, http.DefaultClient, front.URL+"/")
	readBody(t, resp)
	if resp.StatusCode != http.StatusBadGateway || len(errs()) != 1 || !isTimeout(errs()[0]) {
		t.Fatalf("status %d errors %v: want one timeout", resp.StatusCode, errs())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v: the timeout did not bound the wait (or it was retried)", d)
	}
}

func TestUpPoolSweepAndClose(t *testing.T) {
	ca := newTestCA(t, "upstream CA")
	up := ca.serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), upstreamName)
	front, _, f := forwardFront(t, up.Listener.Addr().String(), ca)
	idle := func() int {
		f.pool.mu.Lock()
		defer f.pool.mu.Unlock()
		return len(f.pool.conns[upstreamName])
	}
	readBody(t, mustGet(t, http.DefaultClient, front.URL+"/"))
	if n := idle(); n != 1 {
		t.Fatalf("%d idle connections after one request, want 1", n)
	}
	f.pool.sweep(time.Now())
	if n := idle(); n != 1 {
		t.Fatalf("a fresh connection was swept")
	}
	f.pool.sweep(time.Now().Add(2 * time.Minute))
	if n := idle(); n != 0 {
		t.Fatalf("%d idle connections after the idle timeout, want 0", n)
	}
	readBody(t, mustGet(t, http.DefaultClient, front.URL+"/"))
	f.pool.closeAll()
	readBody(t, mustGet(t, http.DefaultClient, front.URL+"/"))
	if n := idle(); n != 0 {
		t.Fatalf("%d idle connections after closeAll, want 0", n)
	}
}
