package proxy

import (
	"bufio"
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
)

// forwardFront serves a forwarder in front of upstream addr, as the
// proxy's handlers do: hop-by-hop stripped, Host set to the upstream.
func forwardFront(t *testing.T, addr string) (front *httptest.Server, upstreamErrs func() []error) {
	t.Helper()
	var mu sync.Mutex
	var errs []error
	f := newForwarder("http", &http.Transport{DisableCompression: true, ExpectContinueTimeout: time.Second, ResponseHeaderTimeout: 5 * time.Second},
		func(w http.ResponseWriter, _ *http.Request, err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			http.Error(w, "keyhole: the upstream request failed", http.StatusBadGateway)
		})
	front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stripHopByHop(r.Header)
		r.Host = addr
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front, func() []error { mu.Lock(); defer mu.Unlock(); return append([]error(nil), errs...) }
}

// rawUpstream answers every connection with the bytes of reply after
// reading one request head, then closes it.
func rawUpstream(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
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
				RefusedHeader + ": l7-not-allowed\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok",
			do: func(t *testing.T, c *http.Client, url string) {
				resp := mustGet(t, c, url)
				readBody(t, resp)
				for _, k := range []string{"X-Hop", "Keep-Alive", RefusedHeader} {
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var addr string
			if tt.upstream != nil {
				up := httptest.NewServer(tt.upstream)
				t.Cleanup(up.Close)
				addr = up.Listener.Addr().String()
			} else {
				addr = rawUpstream(t, tt.raw)
			}
			front, _ := forwardFront(t, addr)
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}
			t.Cleanup(c.CloseIdleConnections)
			tt.do(t, c, front.URL+"/path?q=1")
		})
	}
}

func TestForwarderUnreachableUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	front, errs := forwardFront(t, addr)
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
