package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsConfig is testConfig with a rule that lets api.github.com upgrade
// to a WebSocket on /socket, and only there.
var wsConfig = strings.Replace(testConfig,
	`"rules": [{"methods": ["GET", "HEAD"], "pathPrefixes": ["/repos/acme/widgets", "/redirect", "/refuses", "/slow"]}]},`,
	`"rules": [{"methods": ["GET", "HEAD"], "pathPrefixes": ["/repos/acme/widgets", "/redirect", "/refuses", "/slow"]},
	           {"methods": ["GET"], "pathPrefixes": ["/socket"], "websocket": true}]},`, 1)

// wsHandshake is a well-formed handshake's header lines, after the
// request line and Host.
const wsHandshake = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"

// wsUpstream is a WebSocket server for api.github.com built on
// github.com/coder/websocket: it sends the Authorization it got, then
// the same split across the frames of one message, then echoes what it
// reads. It reports each handshake's header, and returns its CA and
// address for a client that reaches it without the proxy.
func wsUpstream(t testing.TB) (harnessOpt, chan http.Header, *testCA, string) {
	t.Helper()
	ca := newTestCA(t, "websocket upstream CA")
	saw := make(chan http.Header, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		saw <- r.Header.Clone()
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionContextTakeover})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(4 << 20)
		ctx := r.Context()
		auth := r.Header.Get("Authorization")
		if err := c.Write(ctx, websocket.MessageText, []byte("you sent "+auth)); err != nil {
			return
		}
		wr, err := c.Writer(ctx, websocket.MessageText)
		if err != nil {
			return
		}
		for i := 0; i < len(auth); i += 5 { // a frame each five bytes
			wr.Write([]byte(auth[i:min(i+5, len(auth))]))
		}
		wr.Close()
		if err := c.Write(ctx, websocket.MessageBinary, []byte("bin:"+auth)); err != nil {
			return
		}
		for {
			typ, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			if err := c.Write(ctx, typ, msg); err != nil {
				return
			}
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "api.github.com")}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	return resolveTo(ca, addr, "api.github.com"), saw, ca, addr
}

// wsDial opens a WebSocket through the proxy with coder/websocket, as a
// sandbox would.
func (h *harness) wsDial(ctx context.Context, path string, opts *websocket.DialOptions) (*websocket.Conn, *http.Response, error) {
	if opts == nil {
		opts = &websocket.DialOptions{}
	}
	opts.HTTPClient = &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: h.addr}),
		TLSClientConfig: &tls.Config{RootCAs: h.sandbox.pool},
	}}
	return websocket.Dial(ctx, "wss://api.github.com"+path, opts)
}

// TestServerWebSocket: a real WebSocket client and server through the
// proxy, on a path a rule with websocket: true allows. The handshake
// carries the credential; the frames go both ways; what the upstream
// sends back holding the credential (whole, split across a message's
// frames, in a binary message) reaches the sandbox masked; the
// sandbox's offer of permessage-deflate never reaches the upstream.
func TestServerWebSocket(t *testing.T) {
	opt, saw, _, _ := wsUpstream(t)
	h := newHarnessConfig(t, wsConfig, opt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := h.wsDial(ctx, "/socket/realtime?model=x", &websocket.DialOptions{CompressionMode: websocket.CompressionContextTakeover})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %s", resp.Status)
	}
	if holdsSecret(fmt.Sprint(resp.Header)) {
		t.Error("the 101's header holds the credential")
	}
	up := <-saw
	if got := up.Get("Authorization"); got != "Bearer "+canary {
		t.Errorf("the upstream's handshake had no credential")
	}
	if ext := up.Values("Sec-WebSocket-Extensions"); len(ext) > 0 {
		t.Errorf("the upstream was offered %q", ext)
	}
	for _, want := range []string{"you sent Bearer ", "Bearer ", "bin:Bearer "} {
		_, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if holdsSecret(string(msg)) {
			t.Errorf("a message held the credential")
		}
		if got := string(msg); got != want+strings.Repeat("*", len(canary)) {
			t.Errorf("got %q, want %q then the credential masked", got, want)
		}
	}
	for _, msg := range []string{"hello", strings.Repeat("x", 200<<10)} {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != msg {
			t.Fatalf("echo of %d bytes: %d bytes, %v", len(msg), len(got), err)
		}
	}
	c.Close(websocket.StatusNormalClosure, "done")
	// The request line is written once the relay has ended.
	eventually(t, "the request line with status 101", func() bool { return strings.Contains(h.logs.String(), `"status":101`) })
	if holdsSecret(h.logs.String()) {
		t.Error("the logs hold the credential")
	}
}

// openWebSocket opens a tunnel to api.github.com through h and upgrades
// GET /socket on it, failing t unless the answer is 101; the caller
// closes the connection.
func openWebSocket(t *testing.T, h *harness) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
	if resp := roundTrip(t, c, br, "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n"+wsHandshake+"\r\n"); resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		t.Fatalf("handshake: %s", resp.Status)
	}
	return c, br
}

// wsRawUpstream serves api.github.com with answer on each handshake's
// connection, after reading the request; it reports each request's
// header.
func wsRawUpstream(t *testing.T, answer func(c net.Conn, br *bufio.Reader, req *http.Request)) (harnessOpt, chan http.Header) {
	saw := make(chan http.Header, 8)
	opt, _ := rawUpstreamConns(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		saw <- req.Header.Clone()
		answer(c, br, req)
	}, "api.github.com")
	return opt, saw
}

// switchTo answers a handshake with a 101 that accepts it.
func switchTo(c net.Conn, req *http.Request) {
	fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		webSocketAccept(req.Header.Get("Sec-WebSocket-Key")))
}

// readFrames reads the frames the sandbox gets until the proxy's close
// or the connection's end, returning their payloads joined and the
// close code (0: none).
func readFrames(c net.Conn, br *bufio.Reader, wait time.Duration) (string, uint16) {
	c.SetReadDeadline(time.Now().Add(wait))
	var fr wsFrameReader
	var all strings.Builder
	for {
		h, err := fr.next(br)
		if err != nil {
			return all.String(), 0
		}
		p := make([]byte, h.length)
		if _, err := io.ReadFull(br, p); err != nil {
			return all.String(), 0
		}
		all.Write(p)
		if h.op == wsClose && len(p) >= 2 {
			return all.String(), binary.BigEndian.Uint16(p)
		}
	}
}

// TestServerWebSocketAttacks: what a sandbox or an upstream could try
// around an allowed WebSocket. Each case opens a tunnel, sends a raw
// request and, for an upgrade, raw frames, and looks at what each side
// got.
func TestServerWebSocketAttacks(t *testing.T) {
	var key = [4]byte{1, 2, 3, 4}
	tests := map[string]struct {
		raw string // the request
		// upstream answers the request (after it was read).
		upstream func(c net.Conn, br *bufio.Reader, req *http.Request)
		// frames are what the sandbox sends after a 101.
		frames []byte
		// wantStatus is the sandbox's response status; wantUpgrade
		// whether the upstream was asked to upgrade.
		wantStatus  int
		wantUpgrade bool
		wantClose   uint16 // the close code the sandbox gets
		wantText    string // in what the sandbox reads after the 101
	}{
		"upgrade on a path no websocket rule allows": {
			raw:      "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream: func(c net.Conn, _ *bufio.Reader, req *http.Request) { switchTo(c, req) },
			// As TestServerUpgrade: stripped, and the unasked 101 a 502.
			wantStatus: http.StatusBadGateway,
		},
		"h2c upgrade on the websocket path": {
			raw: "GET /socket HTTP/1.1\r\nHost: api.github.com\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
			upstream: func(c net.Conn, _ *bufio.Reader, req *http.Request) {
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n")
			},
			wantStatus: http.StatusBadGateway,
		},
		"Upgrade: websocket that Connection does not name": {
			raw:        "GET /socket HTTP/1.1\r\nHost: api.github.com\r\nConnection: keep-alive\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
			upstream:   func(c net.Conn, _ *bufio.Reader, req *http.Request) { switchTo(c, req) },
			wantStatus: http.StatusBadGateway,
		},
		"Upgrade listing websocket and h2c": {
			raw:        "GET /socket HTTP/1.1\r\nHost: api.github.com\r\nConnection: Upgrade\r\nUpgrade: websocket, h2c\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
			upstream:   func(c net.Conn, _ *bufio.Reader, req *http.Request) { switchTo(c, req) },
			wantStatus: http.StatusBadGateway,
		},
		"a key that is not 16 bytes": {
			raw:        "GET /socket HTTP/1.1\r\nHost: api.github.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: c2hvcnQ=\r\n\r\n",
			upstream:   func(c net.Conn, _ *bufio.Reader, req *http.Request) { switchTo(c, req) },
			wantStatus: http.StatusBadGateway,
		},
		"a 101 to a plain request on the websocket path": {
			raw:        "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n\r\n",
			upstream:   func(c net.Conn, _ *bufio.Reader, req *http.Request) { switchTo(c, req) },
			wantStatus: http.StatusBadGateway,
		},
		"a 101 that does not accept the key": {
			raw: "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream: func(c net.Conn, _ *bufio.Reader, req *http.Request) {
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=x\r\n\r\n")
				c.Write(appendFrame(nil, wsText, []byte(req.Header.Get("Authorization")), nil))
			},
			wantStatus: http.StatusBadGateway, wantUpgrade: true,
		},
		"a 101 with an extension that was not offered": {
			raw: "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
			upstream: func(c net.Conn, _ *bufio.Reader, req *http.Request) {
				fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Extensions: permessage-deflate\r\nSec-WebSocket-Accept: %s\r\n\r\n",
					webSocketAccept(req.Header.Get("Sec-WebSocket-Key")))
			},
			wantStatus: http.StatusBadGateway, wantUpgrade: true,
		},
		"the credential in a frame split across reads and across frames": {
			raw: "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream: func(c net.Conn, _ *bufio.Reader, req *http.Request) {
				switchTo(c, req)
				auth := req.Header.Get("Authorization")
				whole := appendFrame(nil, wsText, []byte("a:"+auth), nil)
				for i := range whole { // a byte a write
					c.Write(whole[i : i+1])
					time.Sleep(time.Millisecond)
				}
				// One message in three frames, the value cut in
				// two, a ping between them.
				half := len(auth) / 2
				c.Write([]byte{wsText, byte(2 + half)})
				c.Write([]byte("b:" + auth[:half]))
				c.Write(appendFrame(nil, wsPing, []byte(auth), nil))
				c.Write([]byte{wsContinuation, byte(len(auth) - half)})
				c.Write([]byte(auth[half:]))
				c.Write(appendFrame(nil, wsContinuation, []byte("."), nil))
				c.Write(appendFrame(nil, wsClose, closePayload(1000, auth), nil))
			},
			wantStatus: http.StatusSwitchingProtocols, wantUpgrade: true,
			wantText: "a:Bearer ***", wantClose: 1000,
		},
		// Not switched: the connection stays HTTP, and what the upstream
		// sends beyond its response never reaches the sandbox.
		"a 200 to the handshake, then a frame holding the credential": {
			raw: "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream: func(c net.Conn, _ *bufio.Reader, req *http.Request) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				c.Write(appendFrame(nil, wsText, []byte(req.Header.Get("Authorization")), nil))
				time.Sleep(200 * time.Millisecond)
			},
			frames:     appendFrame(nil, wsText, []byte("GET /user HTTP/1.1\r\nHost: api.github.com\r\n\r\n"), &key),
			wantStatus: http.StatusOK, wantUpgrade: true,
		},
		"a 101 without Upgrade": {
			raw: "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream: func(c net.Conn, _ *bufio.Reader, req *http.Request) {
				fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", webSocketAccept(req.Header.Get("Sec-WebSocket-Key")))
				c.Write(appendFrame(nil, wsText, []byte(req.Header.Get("Authorization")), nil))
			},
			wantStatus: http.StatusBadGateway, wantUpgrade: true,
		},
		"the websocket path in upper case": {
			raw:        "GET /SOCKET HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream:   func(c net.Conn, _ *bufio.Reader, req *http.Request) { switchTo(c, req) },
			wantStatus: http.StatusForbidden,
		},
		"the websocket path percent-encoded": {
			raw:        "GET /%73ocket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream:   func(c net.Conn, _ *bufio.Reader, req *http.Request) { switchTo(c, req) },
			wantStatus: http.StatusForbidden,
		},
		"the credential in a binary message and a pong": {
			raw: "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream: func(c net.Conn, _ *bufio.Reader, req *http.Request) {
				switchTo(c, req)
				auth := req.Header.Get("Authorization")
				c.Write(appendFrame(nil, wsBinary, []byte("bin:"+auth), nil))
				c.Write(appendFrame(nil, wsPong, []byte(auth), nil))
				c.Write(appendFrame(nil, wsClose, closePayload(1000, "bye"), nil))
			},
			wantStatus: http.StatusSwitchingProtocols, wantUpgrade: true,
			wantText: "bin:Bearer ***", wantClose: 1000,
		},
		"a compressed frame (RSV1) from the sandbox": {
			raw:      "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
			upstream: func(c net.Conn, br *bufio.Reader, req *http.Request) { switchTo(c, req); io.Copy(io.Discard, br) },
			frames: func() []byte {
				f := appendFrame(nil, wsText, []byte("abc"), &key)
				f[0] |= 0x40
				return f
			}(),
			wantStatus: http.StatusSwitchingProtocols, wantUpgrade: true, wantClose: wsClosePolicyViolation,
		},
		"a masked frame from the upstream": {
			raw: "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream: func(c net.Conn, _ *bufio.Reader, req *http.Request) {
				switchTo(c, req)
				c.Write(appendFrame(nil, wsText, []byte(req.Header.Get("Authorization")), &key))
				time.Sleep(200 * time.Millisecond)
			},
			wantStatus: http.StatusSwitchingProtocols, wantUpgrade: true, wantClose: wsClosePolicyViolation,
		},
		"an oversized frame from the sandbox": {
			raw:      "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream: func(c net.Conn, br *bufio.Reader, req *http.Request) { switchTo(c, req); io.Copy(io.Discard, br) },
			frames: func() []byte {
				b := []byte{0x80 | wsBinary, 0x80 | 127}
				b = binary.BigEndian.AppendUint64(b, maxWSMessage+1)
				return append(b, key[:]...)
			}(),
			wantStatus: http.StatusSwitchingProtocols, wantUpgrade: true, wantClose: wsClosePolicyViolation,
		},
		"a message over the cap in small frames from the sandbox": {
			raw:      "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream: func(c net.Conn, br *bufio.Reader, req *http.Request) { switchTo(c, req); io.Copy(io.Discard, br) },
			frames: func() []byte {
				chunk := make([]byte, 64<<10)
				var b []byte
				for i := 0; i <= maxWSMessage/len(chunk); i++ {
					op := byte(wsContinuation)
					if i == 0 {
						op = wsBinary
					}
					f := appendFrame(nil, op, chunk, &key)
					f[0] &^= 0x80 // not final
					b = append(b, f...)
				}
				return b
			}(),
			wantStatus: http.StatusSwitchingProtocols, wantUpgrade: true, wantClose: wsClosePolicyViolation,
		},
		"an oversized frame from the upstream": {
			raw: "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream: func(c net.Conn, _ *bufio.Reader, req *http.Request) {
				switchTo(c, req)
				c.Write(binary.BigEndian.AppendUint64([]byte{0x80 | wsText, 127}, 1<<40))
				time.Sleep(200 * time.Millisecond)
			},
			wantStatus: http.StatusSwitchingProtocols, wantUpgrade: true, wantClose: wsClosePolicyViolation,
		},
		"an unmasked frame from the sandbox": {
			raw:        "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream:   func(c net.Conn, br *bufio.Reader, req *http.Request) { switchTo(c, req); io.Copy(io.Discard, br) },
			frames:     appendFrame(nil, wsText, []byte("hi"), nil),
			wantStatus: http.StatusSwitchingProtocols, wantUpgrade: true, wantClose: wsClosePolicyViolation,
		},
		"a compressed frame (RSV1) from the upstream": {
			raw: "GET /socket HTTP/1.1\r\nHost: api.github.com\r\n" + wsHandshake + "\r\n",
			upstream: func(c net.Conn, _ *bufio.Reader, req *http.Request) {
				switchTo(c, req)
				c.Write([]byte{0x80 | 0x40 | wsText, 3, 'a', 'b', 'c'})
				time.Sleep(200 * time.Millisecond)
			},
			wantStatus: http.StatusSwitchingProtocols, wantUpgrade: true, wantClose: wsClosePolicyViolation,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opt, saw := wsRawUpstream(t, tc.upstream)
			h := newHarnessConfig(t, wsConfig, opt)
			c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
			defer c.Close()
			resp := roundTrip(t, c, br, tc.raw)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("%s, want %d", resp.Status, tc.wantStatus)
			}
			if len(tc.frames) > 0 {
				go c.Write(tc.frames)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols {
				// Nothing is to follow but the proxy's own answers to
				// what the sandbox sent after (as HTTP requests).
				io.Copy(io.Discard, resp.Body)
				c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
				rest, _ := io.ReadAll(br)
				if holdsSecret(string(rest)) || len(rest) > 0 && !strings.HasPrefix(string(rest), "HTTP/1.1 ") {
					t.Errorf("after the %s the sandbox got %q", resp.Status, strings.ReplaceAll(string(rest), canary, "<credential>"))
				}
			}
			var got string
			var code uint16
			if resp.StatusCode == http.StatusSwitchingProtocols {
				got, code = readFrames(c, br, 5*time.Second)
			}
			if holdsSecret(fmt.Sprint(resp.Header) + got) {
				t.Errorf("the sandbox got the credential: %q", strings.ReplaceAll(got, canary, "<credential>"))
			}
			if resp.StatusCode != http.StatusSwitchingProtocols && got != "" {
				t.Errorf("after the %s the sandbox got %q", resp.Status, got)
			}
			if code != tc.wantClose {
				t.Errorf("close code %d, want %d (read %q)", code, tc.wantClose, got)
			}
			if !strings.Contains(got, tc.wantText) {
				t.Errorf("the sandbox read %q, want it to hold %q", got, tc.wantText)
			}
			if resp.StatusCode == http.StatusForbidden {
				// Refused: the upstream gets nothing.
				select {
				case <-saw:
					t.Error("the upstream got the refused handshake")
				case <-time.After(100 * time.Millisecond):
				}
				return
			}
			up := <-saw
			if asked := up.Get("Upgrade") != ""; asked != tc.wantUpgrade {
				t.Errorf("the upstream was asked to upgrade: %v (Upgrade %q, Connection %q)", asked, up.Get("Upgrade"), up.Get("Connection"))
			}
			if up.Get("Authorization") != "Bearer "+canary {
				t.Error("the upstream got no credential")
			}
		})
	}
}

// TestServerWebSocketEnds: the proxy's own ends of an allowed
// WebSocket. One that carries no frame either way for the idle timeout
// is closed (1001); one whose rule a reloaded config drops is closed
// (1008) at its next frame. Each close is logged with its reason.
func TestServerWebSocketEnds(t *testing.T) {
	tests := map[string]struct {
		idle      time.Duration
		revoke    bool
		wantClose uint16
		wantLog   string
	}{
		"idle":    {idle: 300 * time.Millisecond, wantClose: wsCloseGoingAway, wantLog: "no frame either way for 300ms"},
		"revoked": {revoke: true, wantClose: wsClosePolicyViolation, wantLog: "the config no longer allows this WebSocket"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opt, _ := wsRawUpstream(t, func(c net.Conn, br *bufio.Reader, req *http.Request) {
				switchTo(c, req)
				io.Copy(io.Discard, br)
			})
			h := newHarnessConfig(t, wsConfig, opt, func(o *Options) { o.Timeouts.Idle = tc.idle })
			c, br := openWebSocket(t, h)
			defer c.Close()
			if tc.revoke {
				writeAtomic(t, h.cfgPath, []byte(testConfig))
				eventually(t, "the reload", func() bool { return strings.Contains(h.logs.String(), "config reloaded") })
				c.Write(appendFrame(nil, wsText, []byte("hi"), &[4]byte{9, 9, 9, 9}))
			}
			got, code := readFrames(c, br, 5*time.Second)
			if code != tc.wantClose {
				t.Errorf("close code %d, want %d (read %q)", code, tc.wantClose, got)
			}
			if !strings.Contains(got, tc.wantLog) {
				t.Errorf("close reason %q, want it to say %q", got, tc.wantLog)
			}
			eventually(t, "the log line", func() bool { return strings.Contains(h.logs.String(), tc.wantLog) })
		})
	}
}

// bufConn is a net.Conn that keeps what is written to it.
type bufConn struct {
	net.Conn
	out bytes.Buffer
}

func (c *bufConn) Write(b []byte) (int, error)      { return c.out.Write(b) }
func (c *bufConn) SetWriteDeadline(time.Time) error { return nil }

// cutReader returns its data in reads of the sizes cuts gives, in turn.
type cutReader struct {
	data []byte
	cuts []byte
	i    int
}

func (r *cutReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.cuts) > 0 {
		n = max(1, int(r.cuts[r.i%len(r.cuts)]))
		r.i++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// FuzzWebSocketFrames: the frame reader on any bytes, in reads of any
// size, from either side: each header it accepts is the bytes it
// consumed and within the caps. And the upstream's bytes relayed to the
// sandbox: what the sandbox gets is frames the reader accepts from a
// server, none of whose payloads holds the credential, nor the data
// frames' payloads joined, however the upstream cut it into messages
// and frames and its frames into reads.
func FuzzWebSocketFrames(f *testing.F) {
	text := appendFrame(nil, wsText, []byte("x Bearer "+canary+" y"), nil)
	f.Add(text, []byte{1}, false)
	f.Add(append(append([]byte{wsText, 9}, "Bearer CA"...), appendFrame(nil, wsContinuation, []byte(canary[2:]), nil)...), []byte{3, 1, 7}, false)
	f.Add(append(appendFrame(nil, wsPing, []byte(canary), nil), appendFrame(nil, wsClose, closePayload(1000, canary), nil)...), []byte(nil), false)
	f.Add(appendFrame(nil, wsBinary, []byte(canary), &[4]byte{1, 2, 3, 4}), []byte{2}, true)
	f.Add(binary.BigEndian.AppendUint64([]byte{0x81, 127}, 1<<63), []byte(nil), false)
	f.Add([]byte{0x81, 126, 0, 200}, []byte{1}, false)
	f.Add(append(appendFrame(nil, wsText, []byte("x CANARY-7f3e"), nil), appendFrame(nil, wsBinary, []byte(canary[11:]), nil)...), []byte{5}, false)
	f.Fuzz(func(t *testing.T, data, cuts []byte, fromClient bool) {
		fr := wsFrameReader{fromClient: fromClient}
		src := &cutReader{data: data, cuts: cuts}
		consumed := 0
		for {
			h, err := fr.next(src)
			if err != nil {
				break
			}
			if !bytes.Equal(h.raw, data[consumed:consumed+len(h.raw)]) {
				t.Fatalf("header %x is not the bytes read, %x", h.raw, data[consumed:consumed+len(h.raw)])
			}
			if h.length > maxWSMessage || h.op >= wsClose && h.length > maxWSControl {
				t.Fatalf("accepted a frame of %d bytes, opcode %d", h.length, h.op)
			}
			consumed += len(h.raw)
			n, _ := io.CopyN(io.Discard, src, h.length)
			consumed += int(n)
			if n < h.length {
				break
			}
		}
		if fromClient {
			return
		}
		sb := &bufConn{}
		r := &wsRelay{sandbox: sb, upIn: bufio.NewReader(&cutReader{data: data, cuts: cuts}), sc: scrubbing{inj: injectedOf(canary)}, idle: time.Second}
		r.fromUpstream()
		out := wsFrameReader{}
		rd := bytes.NewReader(sb.out.Bytes())
		var stream []byte // the data frames' payloads, in order
		for rd.Len() > 0 {
			h, err := out.next(rd)
			if err != nil {
				t.Fatalf("the sandbox got a frame the reader refuses: %v", err)
			}
			p := make([]byte, h.length)
			if _, err := io.ReadFull(rd, p); err != nil {
				t.Fatalf("the sandbox got a short frame: %v", err)
			}
			if bytes.Contains(p, []byte(canary)) {
				t.Fatalf("the sandbox got the credential in %q", p)
			}
			if h.op < wsClose {
				stream = append(stream, p...)
			}
		}
		if bytes.Contains(stream, []byte(canary)) {
			t.Fatalf("the sandbox got the credential across messages: %q", stream)
		}
	})
}

// BenchmarkWebSocketEcho: one 1 KiB text message to the echo upstream
// and its echo back, per op, over one WebSocket opened with
// github.com/coder/websocket: directly, and through the proxy (which
// scrubs each echo, the scan going on from the one before). ns/op is
// the round trip.
func BenchmarkWebSocketEcho(b *testing.B) {
	opt, saw, upCA, upAddr := wsUpstream(b)
	h := newHarnessConfig(b, wsConfig, opt)
	ctx := context.Background()
	routes := map[string]func() (*websocket.Conn, error){
		"direct": func() (*websocket.Conn, error) {
			c, _, err := websocket.Dial(ctx, "wss://api.github.com/socket", &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: upCA.pool},
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, upAddr)
				},
			}}})
			return c, err
		},
		"keyhole": func() (*websocket.Conn, error) {
			c, _, err := h.wsDial(ctx, "/socket", nil)
			return c, err
		},
	}
	msg := []byte(strings.Repeat("x", 1<<10))
	for _, name := range []string{"direct", "keyhole"} {
		b.Run(name, func(b *testing.B) {
			c, err := routes[name]()
			if err != nil {
				b.Fatal(err)
			}
			defer c.CloseNow()
			<-saw
			for range 3 { // the upstream's greetings
				if _, _, err := c.Read(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(msg)))
			b.ResetTimer()
			for b.Loop() {
				if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
					b.Fatal(err)
				}
				if _, got, err := c.Read(ctx); err != nil || len(got) != len(msg) {
					b.Fatalf("echo: %d bytes, %v", len(got), err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
