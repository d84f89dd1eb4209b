package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// maxClientHello bounds what the transparent listener reads before it
// knows which server a connection names (the ClientHello with its record
// headers), and what an intercepted tunnel's handshake reads from the
// sandbox (hostConn). Real ClientHellos, post-quantum key shares
// included, are under 4 KiB, and a handshake reads little more (a
// second, smaller ClientHello after a HelloRetryRequest, then Finished);
// crypto/tls itself takes a handshake message of up to 64 KiB, and keeps
// the buffers it grew for one for the life of the connection.
const maxClientHello = 16 << 10

// errHelloTooLarge ends a ClientHello read that passed maxClientHello.
var errHelloTooLarge = errors.New("TLS handshake larger than the proxy reads")

// errHelloRead stops the handshake once the ClientHello is parsed: the
// transparent listener only wants its server name.
var errHelloRead = errors.New("ClientHello read")

// Listeners are what a Server serves on. Proxy is required.
type Listeners struct {
	// Proxy is where HTTPS_PROXY points: CONNECT and absolute-form.
	Proxy net.Listener
	// Transparent, when set, receives the connections the pod's nat
	// rules redirect (docs/proxy.md, transparent mode): TLS only, the
	// server named by its SNI, the same policy as CONNECT.
	Transparent net.Listener
	// Admin serves /healthz, /readyz and /metrics.
	Admin net.Listener
	// DNS and DNSTCP, when set, answer the sandbox's DNS over UDP and
	// TCP in sidecar mode, where the pod's rules redirect its port 53
	// to them: allowed names only, nothing forwarded (docs/proxy.md).
	DNS    net.PacketConn
	DNSTCP net.Listener
}

// serveTransparent accepts redirected connections until ln is closed.
func (s *Server) serveTransparent(ln net.Listener) error {
	for {
		c, err := s.accept(ln, "transparent accept")
		if err != nil {
			return err
		}
		go s.handleTransparent(c)
	}
}

// accept returns ln's next connection, waiting out the errors
// retryListener waits out (what names the listener in its log), and
// http.ErrServerClosed once ln is closed.
func (s *Server) accept(ln net.Listener, what string) (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err == nil {
			return c, nil
		}
		if s.retryListener(&backoff, what, err) {
			return nil, http.ErrServerClosed
		}
	}
}

// retryListener takes an error of a listener's accept or read (what): it
// reports whether the listener is closed, and otherwise logs the error
// and waits before the caller tries again, 5 ms doubling to a second over
// failures in a row (backoff, which the caller zeroes on a success). Out
// of file descriptors and the like, a listener waits and retries, as
// net/http's server does, rather than stop enforcing.
func (s *Server) retryListener(backoff *time.Duration, what string, err error) (closed bool) {
	if errors.Is(err, net.ErrClosed) {
		return true
	}
	*backoff = min(max(2**backoff, 5*time.Millisecond), time.Second)
	s.log.Warn(what+" failed; retrying", "error", err.Error(), "backoff", *backoff)
	time.Sleep(*backoff)
	return false
}

// handleTransparent decides one redirected connection by its TLS server
// name, exactly as a CONNECT to that name and the original port: intercept
// an injected host, tunnel a passthrough host, refuse the rest. The
// upstream is always dialled by name, never at the address the sandbox
// chose (docs/security.md).
func (s *Server) handleTransparent(c net.Conn) {
	start := time.Now()
	st := s.state.Load()
	// The slot is taken before the ClientHello is read, so that the
	// reads of ClientHellos are bounded too.
	release, ok := s.reserveTunnel()
	if !ok {
		// Not a policy refusal (CONNECT answers 503 here): no request
		// line, only the event.
		c.Close()
		s.log.Warn("transparent connection dropped: too many open tunnels", "max", s.opts.MaxTunnels)
		return
	}
	refuse := func(d policy.Decision, alert bool) {
		s.refuseTransparent(st, c, d, alert, start)
		release()
	}
	dst, err := s.origDst(c)
	if err != nil {
		refuse(policy.Refusal(policy.ReasonHostNotAllowed, "", "cannot read the connection's original destination: %v", err), false)
		return
	}
	if local, ok := c.LocalAddr().(*net.TCPAddr); ok && local.AddrPort() == dst {
		// Not redirected: addressed to this listener itself. Serving it
		// would let a name resolve back here in a loop.
		refuse(policy.Refusal(policy.ReasonHostNotAllowed, "", "connection addressed to the transparent listener itself, not redirected to it"), false)
		return
	}
	port := strconv.Itoa(int(dst.Port()))
	c.SetReadDeadline(time.Now().Add(s.opts.Timeouts.Handshake))
	hello, sni, err := readClientHello(c, maxClientHello)
	if err != nil {
		refuse(policy.Refusal(policy.ReasonHostNotAllowed, "", "port %s: the first bytes are not a TLS ClientHello the proxy can read (%v); transparent mode carries TLS only, send plain HTTP through HTTP_PROXY", port, err), false)
		return
	}
	if sni == "" {
		refuse(policy.Refusal(policy.ReasonHostNotAllowed, "", "port %s: the TLS ClientHello names no server (SNI); transparent mode decides by name and refuses TLS without one, IP literals included", port), true)
		return
	}
	f := &transparentFront{s: s, c: c, hello: hello, st: st, start: start, release: release}
	held := func() (func(), bool) { return release, true }
	s.serveTunnel(context.Background(), f, st, net.JoinHostPort(sni, port), held)
}

// refuseTransparent ends a refused redirected connection: a fatal TLS
// access_denied alert when the client spoke TLS (no HTTP header can be
// sent before a handshake), a reset otherwise; then the request line, the
// metric and an event line that says why.
func (s *Server) refuseTransparent(st *state, c net.Conn, d policy.Decision, alert bool, start time.Time) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	if alert {
		// A TLS 1.2 record: type alert, level fatal, access_denied (49).
		c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49})
	} else if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
	s.logTransparent(st, d, d.Reason.Status(), start)
	s.log.Info("transparent connection refused", "host", d.Host, "reason", string(d.Reason), "message", d.Message)
}

// logTransparent writes the request line of a redirected connection:
// method TLS, no path, the decision on its server name.
func (s *Server) logTransparent(st *state, d policy.Decision, status int, start time.Time) {
	s.metrics.transparent(d)
	s.logRequest(st, &http.Request{Method: "TLS"}, d, status, start)
}

// readClientHello reads a TLS ClientHello from c with crypto/tls's own
// parser and returns every byte it read (to replay to whoever handles the
// connection next) and the server name the hello carries, "" for none. It
// writes nothing to c. An error means the bytes are not a ClientHello
// crypto/tls accepts, or more than max bytes came before one was whole.
func readClientHello(c io.Reader, max int) (read []byte, sni string, err error) {
	rc := &recordConn{r: c, max: max}
	seen := false
	conf := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni, seen = h.ServerName, true
		return nil, errHelloRead
	}}
	herr := tls.Server(rc, conf).Handshake()
	if !seen {
		if rc.err != nil {
			herr = rc.err
		}
		return rc.buf, "", fmt.Errorf("%w", herr)
	}
	return rc.buf, sni, nil
}

// recordConn is the net.Conn crypto/tls reads the ClientHello through: it
// keeps what it reads, up to max bytes, and swallows what tls writes (the
// alert for the handshake readClientHello aborts).
type recordConn struct {
	r   io.Reader
	buf []byte
	max int
	err error
}

func (r *recordConn) Read(b []byte) (int, error) {
	room := r.max - len(r.buf)
	if room <= 0 {
		r.err = errHelloTooLarge
		return 0, r.err
	}
	if len(b) > room {
		b = b[:room]
	}
	n, err := r.r.Read(b)
	r.buf = append(r.buf, b[:n]...)
	return n, err
}

func (r *recordConn) Write(b []byte) (int, error)      { return len(b), nil }
func (r *recordConn) Close() error                     { return nil }
func (r *recordConn) LocalAddr() net.Addr              { return tunnelAddr{} }
func (r *recordConn) RemoteAddr() net.Addr             { return tunnelAddr{} }
func (r *recordConn) SetDeadline(time.Time) error      { return nil }
func (r *recordConn) SetReadDeadline(time.Time) error  { return nil }
func (r *recordConn) SetWriteDeadline(time.Time) error { return nil }

// prefixConn reads first the bytes already read from the connection (the
// ClientHello), then the connection.
type prefixConn struct {
	net.Conn
	r io.Reader
}

// Read replays the prefix, then reads the connection.
func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the underlying TCP connection.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// origDstFunc reads where a redirected connection was first addressed.
type origDstFunc func(net.Conn) (netip.AddrPort, error)
