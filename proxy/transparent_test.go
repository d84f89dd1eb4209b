package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// captureHello returns the ClientHello crypto/tls's client sends for sni,
// without any server.
func captureHello(t testing.TB, sni string) []byte {
	t.Helper()
	a, b := net.Pipe()
	go func() {
		c := tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Handshake()
		a.Close()
	}()
	b.SetDeadline(time.Now().Add(2 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(b, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(b, body); err != nil {
		t.Fatal(err)
	}
	b.Close()
	return append(hdr, body...)
}

// splitConn writes one byte per TCP segment.
type splitConn struct{ net.Conn }

func (c splitConn) Write(b []byte) (int, error) {
	for i := range b {
		if _, err := c.Conn.Write(b[i : i+1]); err != nil {
			return i, err
		}
		time.Sleep(100 * time.Microsecond)
	}
	return len(b), nil
}

// lastRequest is the newest request log line, waiting for it to appear.
func (h *harness) lastRequest(t *testing.T, n int) map[string]any {
	t.Helper()
	var reqs []map[string]any
	eventually(t, "the request line", func() bool {
		reqs = h.logs.requests(t)
		return len(reqs) > n
	})
	return reqs[len(reqs)-1]
}

func TestTransparentListener(t *testing.T) {
	h := newHarness(t)
	roots := h.sandbox.pool.Clone()
	roots.AddCert(h.upCA.cert)
	type result struct {
		status  int           // HTTP status of the request sent after the handshake; 0: none
		refused policy.Reason // X-Omnia-Egress-Refused
	}
	tests := map[string]struct {
		sni     string
		port    int
		raw     func(t *testing.T) []byte // bytes sent instead of a crypto/tls client
		split   bool                      // the client's writes go one byte per segment
		host    string                    // Host header; default the SNI
		path    string
		want    result
		handErr bool          // the handshake (or raw write) must fail
		reason  policy.Reason // the log line's reason
		auth    string        // Authorization the upstream saw
		seen    bool          // the upstream saw a request
	}{
		"injected host, allowed path": {sni: "api.github.com", path: "/repos/acme/widgets",
			want: result{status: 200}, reason: policy.ReasonAllowed, auth: "Bearer " + canary, seen: true},
		"uppercase SNI is the same host": {sni: "API.GITHUB.COM", host: "api.github.com", path: "/repos/acme/widgets",
			want: result{status: 200}, reason: policy.ReasonAllowed, auth: "Bearer " + canary, seen: true},
		"ClientHello split across segments": {sni: "api.github.com", split: true, path: "/repos/acme/widgets",
			want: result{status: 200}, reason: policy.ReasonAllowed, auth: "Bearer " + canary, seen: true},
		"passthrough host tunnelled untouched": {sni: "pypi.org", path: "/simple/",
			want: result{status: 200}, reason: policy.ReasonAllowed, seen: true},
		"allowed SNI, forbidden Host": {sni: "api.github.com", host: "evil.example", path: "/repos/acme/widgets",
			want: result{status: 403, refused: policy.ReasonHostMismatch}, reason: policy.ReasonHostMismatch},
		"Host names another injected host": {sni: "api.github.com", host: "github.com", path: "/repos/acme/widgets",
			want: result{status: 403, refused: policy.ReasonHostMismatch}, reason: policy.ReasonHostMismatch},
		"allowed SNI, path not allowed": {sni: "api.github.com", path: "/user",
			want: result{status: 403, refused: policy.ReasonL7NotAllowed}, reason: policy.ReasonL7NotAllowed},
		"SNI not allowed":                 {sni: "evil.example", handErr: true, reason: policy.ReasonHostNotAllowed},
		"allowed SNI on another port":     {sni: "api.github.com", port: 8443, handErr: true, reason: policy.ReasonHostNotAllowed},
		"TLS on 80 to a passthrough host": {sni: "pypi.org", port: 80, handErr: true, reason: policy.ReasonHostNotAllowed},
		"no SNI (IP literal dialled)":     {sni: "127.0.0.1", handErr: true, reason: policy.ReasonHostNotAllowed},
		"SNI is an IP literal": {raw: func(t *testing.T) []byte {
			return bytes.Replace(captureHello(t, "api.github.com"), []byte("api.github.com"), []byte("192.168.100.10"), 1)
		}, handErr: true, reason: policy.ReasonHostNotAllowed},
		"SNI with a trailing dot": {raw: func(t *testing.T) []byte {
			return bytes.Replace(captureHello(t, "api.github.com"), []byte("api.github.com"), []byte("pi.github.com."), 1)
		}, handErr: true, reason: policy.ReasonHostNotAllowed},
		"SNI an allowed name, a NUL, another name": {raw: func(t *testing.T) []byte {
			hello := captureHello(t, "api.github.com\x00.evil.example")
			if !bytes.Contains(hello, []byte("api.github.com\x00.evil.example")) {
				t.Fatal("the ClientHello does not carry the NUL")
			}
			return hello
		}, handErr: true, reason: policy.ReasonHostNotAllowed},
		"SNI a homograph of an allowed name (Cyrillic а), as UTF-8": {raw: func(t *testing.T) []byte {
			return captureHello(t, "\u0430pi.github.com")
		}, handErr: true, reason: policy.ReasonHostNotAllowed},
		"SNI a homograph of an allowed name, as punycode": {sni: "xn--pi-6kc.github.com", handErr: true, reason: policy.ReasonHostNotAllowed},
		"plain HTTP on 443": {raw: func(*testing.T) []byte {
			return []byte("GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
		}, handErr: true, reason: policy.ReasonHostNotAllowed},
		"plain HTTP on 80 to an injected host": {port: 80, raw: func(*testing.T) []byte {
			return []byte("GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
		}, handErr: true, reason: policy.ReasonHostNotAllowed},
		"oversized ClientHello": {raw: func(*testing.T) []byte {
			// Records of a 65535-byte handshake message, more than the
			// proxy reads before it knows the name.
			var b []byte
			msg := append([]byte{1, 0, 0xff, 0xff}, make([]byte, 0xffff)...)
			for len(msg) > 0 {
				n := min(len(msg), 1<<14)
				b = append(b, 0x16, 3, 1, byte(n>>8), byte(n))
				b = append(b, msg[:n]...)
				msg = msg[n:]
			}
			return b
		}, handErr: true, reason: policy.ReasonHostNotAllowed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			port := tc.port
			if port == 0 {
				port = 443
			}
			h.dstPort.Store(int32(port))
			before, lines := len(h.api.seen()), len(h.logs.requests(t))
			raw, err := net.DialTimeout("tcp", h.trans, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			raw.SetDeadline(time.Now().Add(10 * time.Second))
			if tc.raw != nil {
				// The proxy answers with a reset or an alert, and never
				// with data the client could take for a server.
				raw.Write(tc.raw(t))
				got, _ := io.ReadAll(raw)
				if len(got) > 0 && !bytes.Equal(got, []byte{0x15, 3, 3, 0, 2, 2, 49}) {
					t.Fatalf("proxy answered %q, want nothing or an access_denied alert", got)
				}
			} else {
				var c net.Conn = raw
				if tc.split {
					c = splitConn{raw}
				}
				tc2 := tls.Client(c, &tls.Config{ServerName: tc.sni, RootCAs: roots, NextProtos: []string{"http/1.1"}, InsecureSkipVerify: tc.sni == "127.0.0.1"})
				herr := tc2.Handshake()
				if tc.handErr {
					if herr == nil {
						t.Fatal("handshake succeeded, want a refusal")
					}
					// The refusal a TLS client can show: the alert.
					if !strings.Contains(herr.Error(), "access denied") {
						t.Fatalf("handshake error %v, want the access_denied alert", herr)
					}
				} else {
					if herr != nil {
						t.Fatalf("handshake: %v", herr)
					}
					host := tc.host
					if host == "" {
						host = tc.sni
					}
					resp := roundTrip(t, tc2, bufio.NewReader(tc2), "GET "+tc.path+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
					if resp.StatusCode != tc.want.status || policy.Reason(resp.Header.Get(policy.RefusedHeader)) != tc.want.refused {
						t.Fatalf("got %d %q, want %d %q", resp.StatusCode, resp.Header.Get(policy.RefusedHeader), tc.want.status, tc.want.refused)
					}
				}
			}
			line := h.lastRequest(t, lines)
			if line["reason"] != string(tc.reason) {
				t.Errorf("log reason %v, want %s (line %v)", line["reason"], tc.reason, line)
			}
			seen := h.api.seen()[before:]
			if tc.seen != (len(seen) > 0) {
				t.Fatalf("upstream saw %d requests, want seen=%v", len(seen), tc.seen)
			}
			if tc.seen && seen[0].Header.Get("Authorization") != tc.auth {
				t.Errorf("upstream Authorization %q, want %q", seen[0].Header.Get("Authorization"), tc.auth)
			}
		})
	}
	if m := h.get("/metrics"); !strings.Contains(m, `keyhole_proxy_transparent_connections_total{decision="refuse",reason="host-not-allowed"}`) ||
		!strings.Contains(m, `keyhole_proxy_transparent_connections_total{decision="intercept",reason="allowed"}`) {
		t.Errorf("metrics lack the transparent counter:\n%s", m)
	}
	if strings.Contains(h.logs.String(), canary) {
		t.Fatal("the credential appears in the logs")
	}
}

// A client that opens a connection and sends part of a ClientHello, then
// nothing, is cut off after Timeouts.Handshake.
func TestTransparentSlowloris(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Timeouts.Handshake = 200 * time.Millisecond })
	c, err := net.DialTimeout("tcp", h.trans, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hello := captureHello(t, "api.github.com")
	c.Write(hello[:20])
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := io.ReadAll(c); err != nil && !isReset(err) {
		t.Fatalf("read: %v, want the proxy to close", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("proxy held the connection %v", d)
	}
	if line := h.lastRequest(t, 0); line["reason"] != string(policy.ReasonHostNotAllowed) || line["method"] != "TLS" {
		t.Errorf("log line %v", line)
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "reset") || errors.Is(err, io.EOF))
}

// A connection addressed to the listener itself (not redirected) is
// refused, so a name resolving back to it cannot loop.
func TestTransparentNotRedirected(t *testing.T) {
	h := newHarness(t)
	h.dstSelf.Store(true) // set through the harness: the listener is already serving
	c, err := tls.Dial("tcp", h.trans, &tls.Config{ServerName: "pypi.org", RootCAs: h.upCA.pool})
	if err == nil {
		c.Close()
		t.Fatal("handshake succeeded through an unredirected connection")
	}
	if line := h.lastRequest(t, 0); line["reason"] != string(policy.ReasonHostNotAllowed) {
		t.Errorf("log line %v", line)
	}
}

func TestReadClientHello(t *testing.T) {
	hello := captureHello(t, "api.github.com")
	tests := map[string]struct {
		in      []byte
		max     int
		sni     string
		wantErr bool
	}{
		"whole":          {in: hello, max: maxClientHello, sni: "api.github.com"},
		"trailing bytes": {in: append(append([]byte{}, hello...), "more"...), max: maxClientHello, sni: "api.github.com"},
		"truncated":      {in: hello[:len(hello)-3], max: maxClientHello, wantErr: true},
		"over the bound": {in: hello, max: 100, wantErr: true},
		"not TLS":        {in: []byte("GET / HTTP/1.1\r\n\r\n"), max: maxClientHello, wantErr: true},
		"empty":          {in: nil, max: maxClientHello, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			read, sni, err := readClientHello(bytes.NewReader(tc.in), tc.max)
			if (err != nil) != tc.wantErr || sni != tc.sni {
				t.Fatalf("got %q, %v; want %q, error %v", sni, err, tc.sni, tc.wantErr)
			}
			if len(read) > tc.max || !bytes.HasPrefix(tc.in, read) {
				t.Fatalf("read %d bytes that are not a prefix of the input within %d", len(read), tc.max)
			}
		})
	}
}

func FuzzReadClientHello(f *testing.F) {
	f.Add(captureHello(f, "api.github.com"))
	f.Add(captureHello(f, "a"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		read, sni, err := readClientHello(bytes.NewReader(in), 4096)
		if !bytes.HasPrefix(in, read) || len(read) > 4096 {
			t.Fatalf("read %d bytes, not a bounded prefix of the input", len(read))
		}
		if err != nil && sni != "" {
			t.Fatalf("error %v with server name %q", err, sni)
		}
		if strings.ContainsAny(sni, "\x00/") && err == nil {
			// crypto/tls accepts any bytes in a name; the policy's
			// CanonicalHost refuses these, so only check it says so.
			if _, cerr := policy.CanonicalHost(sni, "443"); cerr == nil {
				t.Fatalf("CanonicalHost accepted server name %q", sni)
			}
		}
	})
}
