//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestVerifyWithCurl walks the checks docs/spec.md §6 and §7 promise with real curl:
// the sandbox holds only the placeholder, an allowed path gets 200 with
// the real token injected, and everything else is refused with the
// contract's reasons and statuses.
func TestVerifyWithCurl(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	placeholder := "Authorization: Bearer omnia-injected-github-acme"

	tests := map[string]struct {
		url    string
		args   []string
		code   int
		reason string // "" for a forwarded request
		// upstreamURI is the request a forwarded call must reach the
		// upstream as; a refused one must not reach it at all.
		upstreamURI string
	}{
		"allowed path gets 200 with the token injected": {
			url: "https://api.github.com/repos/acme/widgets", args: []string{"-H", placeholder},
			code: 200, upstreamURI: "/repos/acme/widgets",
		},
		"allowed path with no credential from the sandbox": {
			url: "https://api.github.com/repos/acme/widgets/issues?state=open", code: 200,
			upstreamURI: "/repos/acme/widgets/issues?state=open",
		},
		"HEAD is allowed": {
			url: "https://api.github.com/repos/acme/widgets/branches", args: []string{"-I"},
			code: 200, upstreamURI: "/repos/acme/widgets/branches",
		},
		"POST on pulls is allowed": {
			url:  "https://api.github.com/repos/acme/widgets/pulls",
			args: []string{"-X", "POST", "-H", "Content-Type: application/json", "--data", `{"title":"t","head":"a","base":"main"}`},
			code: 201, upstreamURI: "/repos/acme/widgets/pulls",
		},
		"/user is not allowed": {
			url: "https://api.github.com/user", args: []string{"-H", placeholder},
			code: 403, reason: "l7-not-allowed",
		},
		"a prefix matches whole segments only": {
			url: "https://api.github.com/repos/acme/widgets-old", code: 403, reason: "l7-not-allowed",
		},
		"POST outside pulls is not allowed": {
			url: "https://api.github.com/repos/acme/widgets/issues", args: []string{"-X", "POST", "--data", "{}"},
			code: 403, reason: "l7-not-allowed",
		},
		"DELETE is not allowed": {
			url: "https://api.github.com/repos/acme/widgets", args: []string{"-X", "DELETE"},
			code: 403, reason: "l7-not-allowed",
		},
		"dot segments are refused, not normalized": {
			url: "https://api.github.com/repos/acme/widgets/../../../user", args: []string{"--path-as-is"},
			code: 403, reason: "l7-not-allowed",
		},
		"an encoded slash is refused": {
			url: "https://api.github.com/repos/acme/widgets%2F..%2F..%2Fuser", code: 403, reason: "l7-not-allowed",
		},
		"a semicolon parameter is refused": {
			url: "https://api.github.com/repos/acme/widgets;x=1", code: 403, reason: "l7-not-allowed",
		},
		"the Host header must name the CONNECT host": {
			url: "https://api.github.com/repos/acme/widgets", args: []string{"-H", "Host: other.example"},
			code: 403, reason: "host-mismatch",
		},
		"a redirect passes back untouched": {
			url: "https://api.github.com/repos/acme/widgets/redirect", code: 302,
			upstreamURI: "/repos/acme/widgets/redirect",
		},
		"an upstream cannot fake a refusal": {
			url: "https://api.github.com/repos/acme/widgets/spoof", code: 200,
			upstreamURI: "/repos/acme/widgets/spoof",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(w.api.requests())
			res := w.curl(t, tc.url, tc.args...)
			if res.code != tc.code {
				t.Fatalf("status %d, want %d (curl: %v %s)\nbody: %s", res.code, tc.code, res.exit, res.stderr, res.body)
			}
			seen := w.api.requests()[before:]
			if tc.reason != "" {
				wantRefused(t, "response", res.code, res.header, tc.code, tc.reason)
				if strings.Count(strings.TrimSpace(res.body), "\n") != 0 || strings.TrimSpace(res.body) == "" {
					t.Errorf("refusal body is %q, want one line of explanation", res.body)
				}
				for _, r := range seen {
					t.Errorf("the upstream saw a refused request: %s %s", r.Method, r.URI)
				}
				return
			}
			if got := res.header.Values(refusal); len(got) != 0 {
				t.Errorf("a forwarded response carries %s: %q", refusal, got)
			}
			if len(seen) != 1 {
				t.Fatalf("the upstream saw %d requests, want 1: %+v", len(seen), seen)
			}
			if seen[0].URI != tc.upstreamURI {
				t.Errorf("the upstream saw %s, want %s", seen[0].URI, tc.upstreamURI)
			}
			if got := seen[0].Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+w.token {
				t.Errorf("the upstream saw %d Authorization values, want exactly the injected Bearer token", len(got))
			}
			if seen[0].Host != "api.github.com" {
				t.Errorf("the upstream saw Host %q, want api.github.com", seen[0].Host)
			}
			if tc.code == 302 && res.header.Get("Location") != "https://evil.example/steal" {
				t.Errorf("Location = %q, want the upstream's", res.header.Get("Location"))
			}
		})
	}
}

// TestHostNotAllowed checks that a host no entry lists is refused at
// CONNECT, before any TLS or dial, and the connection is closed.
func TestHostNotAllowed(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	tests := map[string]struct {
		url string
	}{
		"unlisted host":               {url: "https://example.com/"},
		"unlisted subdomain":          {url: "https://gist.github.com/"},
		"listed host on another port": {url: "https://api.github.com:8443/repos/acme/widgets"},
		"IPv4 literal":                {url: "https://127.0.0.1/"},
		"IPv6 literal":                {url: "https://[::1]/"},
		"suffix of a listed host":     {url: "https://evilapi.github.com/"},
		"listed host as a prefix":     {url: "https://api.github.com.evil.example/"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(w.api.requests())
			res := w.curl(t, tc.url)
			code := res.connect
			if res.exit == nil && code == 200 {
				t.Fatalf("curl succeeded, want a refusal")
			}
			wantRefused(t, tc.url, code, res.header, 403, "host-not-allowed")
			if n := len(w.api.requests()) - before; n != 0 {
				t.Errorf("the upstream saw %d requests", n)
			}
		})
	}

	t.Run("plain http to an injected host is refused: credentials go only over HTTPS", func(t *testing.T) {
		before := len(w.api.requests())
		res := w.curl(t, "http://api.github.com/repos/acme/widgets")
		wantRefused(t, "plain http", res.code, res.header, 403, "l7-not-allowed")
		if n := len(w.api.requests()) - before; n != 0 {
			t.Errorf("the upstream saw %d requests", n)
		}
	})

	t.Run("connection is closed after the refusal", func(t *testing.T) {
		conn := w.sendConnect(t, "example.com:443", 10*time.Second)
		defer conn.Close()
		// Read to EOF: a proxy that keeps the connection open makes
		// this time out instead.
		raw, err := io.ReadAll(conn)
		if err != nil {
			t.Fatalf("the proxy kept the connection open after refusing the CONNECT: %v", err)
		}
		head, body, ok := strings.Cut(string(raw), "\r\n\r\n")
		if !ok {
			t.Fatalf("no complete response: %q", raw)
		}
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(head+"\r\n\r\n")), nil)
		if err != nil {
			t.Fatal(err)
		}
		wantRefused(t, "CONNECT example.com", resp.StatusCode, resp.Header, 403, "host-not-allowed")
		if strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
			t.Errorf("refusal body is %q, want one line", body)
		}
	})
}

// sendConnect dials the proxy and sends CONNECT target on the
// connection, which has timeout to run; the caller closes it.
func (w *world) sendConnect(t *testing.T, target string, timeout time.Duration) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", w.proxy.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(timeout))
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	return conn
}

// tunnel opens a CONNECT tunnel to target through the proxy and completes
// a TLS handshake with the given SNI against the sandbox CA.
func (w *world) tunnel(t *testing.T, target, sni string) (*tls.Conn, *bufio.Reader, error) {
	t.Helper()
	return w.tunnelTLS(t, target, &tls.Config{ServerName: sni, RootCAs: w.sandboxCA.Pool(), NextProtos: []string{"http/1.1"}})
}

// mustTunnel is tunnel to host's port 443 with host as the SNI, failing t
// if the tunnel fails.
func (w *world) mustTunnel(t *testing.T, host string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, br, err := w.tunnel(t, host+":443", host)
	if err != nil {
		t.Fatal(err)
	}
	return c, br
}

// tunnelTLS is tunnel with the client's whole TLS config.
func (w *world) tunnelTLS(t *testing.T, target string, cfg *tls.Config) (*tls.Conn, *bufio.Reader, error) {
	t.Helper()
	conn := w.sendConnect(t, target, 20*time.Second)
	t.Cleanup(func() { conn.Close() })
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %s", target, resp.Status)
	}
	if br.Buffered() != 0 {
		t.Fatalf("the proxy sent bytes after the CONNECT response")
	}
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		return nil, nil, err
	}
	return tc, bufio.NewReader(tc), nil
}

// roundTrip writes raw request bytes on a tunnel and reads the response.
func roundTrip(t *testing.T, c *tls.Conn, br *bufio.Reader, method, raw string) *http.Response {
	t.Helper()
	if _, err := c.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	resp, err := readResponse(br, method)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", strings.SplitN(raw, "\r\n", 2)[0], err)
	}
	return resp
}

// readResponse reads one response and its whole body, so the next one
// on the connection can be read.
func readResponse(br *bufio.Reader, method string) (*http.Response, error) {
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// TestHostMismatch drives a raw TLS client through the tunnel: the CONNECT
// target, the SNI and every keep-alive request's Host must name one host.
func TestHostMismatch(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	get := func(host, target string) string {
		return fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: e2e\r\n\r\n", target, host)
	}
	tests := map[string]struct {
		first, second   string
		wantFirstCode   int
		wantSecondCode  int
		wantSecondRefus string
	}{
		"keep-alive request to another host": {
			first: get("api.github.com", "/repos/acme/widgets"), wantFirstCode: 200,
			second: get("github.com", "/repos/acme/widgets"), wantSecondCode: 403, wantSecondRefus: "host-mismatch",
		},
		"canonical spellings of the same host are one host": {
			first: get("API.GitHub.com.", "/repos/acme/widgets"), wantFirstCode: 200,
			second: get("api.github.com:443", "/repos/acme/widgets"), wantSecondCode: 200,
		},
		"absolute-form inside the tunnel counts": {
			first: get("api.github.com", "/repos/acme/widgets"), wantFirstCode: 200,
			second: get("api.github.com", "https://github.com/repos/acme/widgets"), wantSecondCode: 403, wantSecondRefus: "host-mismatch",
		},
		"a non-default port in Host": {
			first: get("api.github.com:8443", "/repos/acme/widgets"), wantFirstCode: 403,
			second: "",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(w.api.requests())
			c, br, err := w.tunnel(t, "api.github.com:443", "api.github.com")
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			resp := roundTrip(t, c, br, "GET", tc.first)
			if resp.StatusCode != tc.wantFirstCode {
				t.Fatalf("first request: %s, want %d (%s %q)", resp.Status, tc.wantFirstCode, refusal, resp.Header.Get(refusal))
			}
			if tc.wantFirstCode == 403 {
				wantRefused(t, "first request", resp.StatusCode, resp.Header, 403, "host-mismatch")
				if n := len(w.api.requests()) - before; n != 0 {
					t.Errorf("the upstream saw %d requests", n)
				}
				return
			}
			forwarded := len(w.api.requests())
			resp = roundTrip(t, c, br, "GET", tc.second)
			if resp.StatusCode != tc.wantSecondCode {
				t.Fatalf("second request: %s, want %d (%s %q)", resp.Status, tc.wantSecondCode, refusal, resp.Header.Get(refusal))
			}
			if tc.wantSecondRefus != "" {
				wantRefused(t, "second request", resp.StatusCode, resp.Header, tc.wantSecondCode, tc.wantSecondRefus)
				if n := len(w.api.requests()) - forwarded; n != 0 {
					t.Errorf("the upstream saw %d requests after the mismatch", n)
				}
			}
		})
	}

	t.Run("SNI naming another host", func(t *testing.T) {
		// A well-behaved client rejects the leaf, which names only the
		// CONNECT host; a hostile one skips verification, completes the
		// handshake and must still be refused whichever host its
		// requests name. Each step must happen as described: a proxy
		// that is down, or does not intercept, fails this test.
		before := len(w.api.requests()) + len(w.git.requests())
		c, br, err := w.tunnel(t, "api.github.com:443", "api.github.com")
		if err != nil {
			t.Fatalf("the control tunnel, SNI naming the CONNECT host: %v", err)
		}
		if resp := roundTrip(t, c, br, "GET", get("api.github.com", "/repos/acme/widgets")); resp.StatusCode != 200 {
			t.Fatalf("the control request: %s, want 200", resp.Status)
		}
		_, _, err = w.tunnel(t, "api.github.com:443", "github.com")
		var hostErr x509.HostnameError
		if !errors.As(err, &hostErr) {
			t.Errorf("a client verifying the leaf for SNI github.com got %v, want a host name mismatch", err)
		}
		for _, host := range []string{"github.com", "api.github.com"} {
			c, br, err := w.tunnelTLS(t, "api.github.com:443", &tls.Config{
				ServerName: "github.com", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"},
			})
			if err != nil {
				t.Fatalf("handshake with SNI github.com: %v; the proxy completes it with the CONNECT host's leaf", err)
			}
			leaf := c.ConnectionState().PeerCertificates[0]
			if leaf.VerifyHostname("api.github.com") != nil || leaf.VerifyHostname("github.com") == nil {
				t.Errorf("the leaf names %v, want the CONNECT host api.github.com only", leaf.DNSNames)
			}
			resp := roundTrip(t, c, br, "GET", get(host, "/repos/acme/widgets"))
			wantRefused(t, "Host "+host, resp.StatusCode, resp.Header, 403, "host-mismatch")
		}
		if n := len(w.api.requests()) + len(w.git.requests()) - before; n != 1 {
			t.Errorf("the upstreams saw %d requests, want the control request only", n)
		}
		if got := len(w.findLogs(t, logQuery{host: "api.github.com", path: "/repos/acme/widgets", decision: "refuse", reason: "host-mismatch"}, 2)); got < 2 {
			t.Errorf("%d host-mismatch log lines, want one per refused request", got)
		}
	})

	t.Run("HTTP/2-only client is held to the CONNECT host", func(t *testing.T) {
		conn := w.sendConnect(t, "api.github.com:443", 10*time.Second)
		defer conn.Close()
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tc := tls.Client(conn, &tls.Config{ServerName: "api.github.com", RootCAs: w.sandboxCA.Pool(), NextProtos: []string{"h2"}})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("an h2-only client's handshake: %v; the proxy serves HTTP/2 in the tunnel", err)
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			t.Fatalf("ALPN %q, want h2", p)
		}
		var h2 http.Protocols
		h2.SetHTTP2(true)
		dialed := false
		tr := &http.Transport{Protocols: &h2, DialTLSContext: func(context.Context, string, string) (net.Conn, error) {
			if dialed {
				return nil, errors.New("a second tunnel: the requests must share the first")
			}
			dialed = true
			return tc, nil
		}}
		defer tr.CloseIdleConnections()
		// The refusal ends the tunnel, as it does over HTTP/1.1: the
		// allowed request goes first. Both go to the connection for
		// api.github.com; the second names github.com as :authority.
		for _, host := range []string{"api.github.com", "github.com"} {
			req, _ := http.NewRequest(http.MethodGet, "https://api.github.com/repos/acme/widgets", nil)
			req.Host = host
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf(":authority %s: %v", host, err)
			}
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Fatalf(":authority %s: answered over %s, want HTTP/2", host, resp.Proto)
			}
			if host == "github.com" {
				wantRefused(t, ":authority "+host, resp.StatusCode, resp.Header, 403, "host-mismatch")
			} else if resp.StatusCode != http.StatusOK {
				t.Errorf(":authority %s: %d, want 200 with the credential injected", host, resp.StatusCode)
			}
		}
	})
}
