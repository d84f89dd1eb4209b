package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// admission is what admitting a tunnel gives, and what the proxy then
// does with it: exactly one of tunnelRefused, tunnelFailed, passthrough
// and interception. Only an interception can have a leaf minted.
type admission interface {
	// decision is the decision the tunnel's request line logs.
	decision() policy.Decision
}

// tunnelRefused is a refused tunnel: the decision refuses its host, or
// the host resolved to an internal address the config does not let it
// reach.
type tunnelRefused struct{ d policy.Decision }

// tunnelFailed is an allowed tunnel that could not be opened: no tunnel
// slot was free (503), or the upstream could not be reached (502). It is
// no policy refusal, and carries no X-Omnia-Egress-Refused.
type tunnelFailed struct {
	d      policy.Decision
	status int
	err    error
}

// passthrough is a tunnel to a passthrough host with its upstream
// dialled: the bytes are copied both ways, untouched. Closing both ends
// is the splice's; release frees the tunnel's slot.
type passthrough struct {
	d        policy.Decision
	upstream net.Conn
	release  func()
}

// interception is a tunnel to an injected host: the proxy terminates its
// TLS with a leaf for the host and decides every request inside it.
// release frees the tunnel's slot.
type interception struct {
	d       policy.Decision // ActionIntercept, with the host's policy
	release func()
}

func (a tunnelRefused) decision() policy.Decision { return a.d }
func (a tunnelFailed) decision() policy.Decision  { return a.d }
func (a passthrough) decision() policy.Decision   { return a.d }
func (a interception) decision() policy.Decision  { return a.d }

// leaf returns the leaf the tunnel's TLS is terminated with, for the
// host the decision names whatever the client's SNI says (a different
// SNI gets host-mismatch on its first request), minted once per host and
// CA. It is the only way the proxy mints a leaf: a passthrough or refused
// host has no interception, so no leaf is ever minted for it.
func (a interception) leaf(c *leafCache, ca *CA, now time.Time) (*tls.Certificate, error) {
	return c.get(ca, a.d.Host, now)
}

// errTooManyTunnels is a tunnel that found every slot taken.
var errTooManyTunnels = errors.New("too many open tunnels")

// admitTunnel admits a tunnel to target, the host:port a CONNECT names or
// a redirected connection's TLS server name and original port: the one
// admission of the proxy listener's CONNECTs and the transparent
// listener's connections. It decides target as a CONNECT; once the host
// is allowed it takes a tunnel slot with reserve, which returns the
// slot's release or false when none is free; and for a passthrough host
// it dials the upstream by name, never at an address the sandbox chose,
// nor at an internal address unless the config lets the host reach one
// (a refused dial is logged and counted here). A refused or failed
// tunnel has its slot released; a passthrough or an interception holds
// it until it ends.
func (s *Server) admitTunnel(ctx context.Context, st *state, target string, reserve func() (func(), bool)) admission {
	d := st.policy.Decide(policy.RequestInfo{Kind: policy.KindConnect, Method: http.MethodConnect, Target: target})
	if !d.Allowed() {
		return tunnelRefused{d: d}
	}
	release, ok := reserve()
	if !ok {
		return tunnelFailed{d: d, status: http.StatusServiceUnavailable, err: errTooManyTunnels}
	}
	if d.Action == policy.ActionIntercept {
		return interception{d: d, release: release}
	}
	// An allowed host names no port: only port 443 is reached.
	upstream, err := s.dial(ctx, "tcp", net.JoinHostPort(d.Host, "443"))
	if e, ok := refusedDial(err); ok {
		release()
		s.dialRefused(e)
		return tunnelRefused{d: e.d}
	}
	if err != nil {
		release()
		return tunnelFailed{d: d, status: http.StatusBadGateway, err: err}
	}
	return passthrough{d: d, upstream: upstream, release: release}
}

// reserveTunnel takes one of the Options.MaxTunnels tunnel slots, if one
// is free, and returns its release.
func (s *Server) reserveTunnel() (func(), bool) {
	select {
	case s.tunnels <- struct{}{}:
	default:
		return nil, false
	}
	s.metrics.tunnels.Add(1)
	return sync.OnceFunc(func() { <-s.tunnels; s.metrics.tunnels.Add(-1) }), true
}

// tunnelFront is one listener's side of a tunnel: how it answers each
// outcome of admitTunnel, and logs the tunnel's request line.
type tunnelFront interface {
	// refuse answers and logs a refusal.
	refuse(d policy.Decision)
	// fail answers and logs a tunnel that could not be opened.
	fail(f tunnelFailed)
	// open answers and logs an admitted tunnel and returns the sandbox's
	// end of it; false when the sandbox's connection is gone.
	open(d policy.Decision) (net.Conn, bool)
}

// serveTunnel admits a tunnel to target (admitTunnel) and serves it:
// refused or failed, as f answers them; a passthrough spliced to its
// upstream; an interception terminated and its requests served.
func (s *Server) serveTunnel(ctx context.Context, f tunnelFront, st *state, target string, reserve func() (func(), bool)) {
	switch a := s.admitTunnel(ctx, st, target, reserve).(type) {
	case tunnelRefused:
		f.refuse(a.d)
	case tunnelFailed:
		f.fail(a)
	case passthrough:
		client, ok := f.open(a.d)
		if !ok {
			a.upstream.Close()
			a.release()
			return
		}
		s.splice(client, a.upstream, a.d.Host, a.release)
	case interception:
		client, ok := f.open(a.d)
		if !ok {
			a.release()
			return
		}
		s.intercept(client, a)
	}
}

// connectFront is a CONNECT's side of its tunnel: answered in HTTP on
// the proxy listener, then hijacked.
type connectFront struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	st    *state
	start time.Time
}

// refuse answers 403 with X-Omnia-Egress-Refused and closes the
// connection.
func (f *connectFront) refuse(d policy.Decision) {
	writeRefusal(f.w, d, true)
	f.s.logRequest(f.st, f.r, d, d.Reason.Status(), f.start)
}

// fail answers 503 or 502 and closes the connection.
func (f *connectFront) fail(a tunnelFailed) {
	msg := "keyhole: cannot reach " + a.d.Host
	if a.status == http.StatusServiceUnavailable {
		msg = "keyhole: too many open tunnels; retry later"
	}
	f.w.Header().Set("Connection", "close")
	http.Error(f.w, msg, a.status)
	f.s.logRequest(f.st, f.r, a.d, a.status, f.start)
}

// open hijacks the connection and answers 200: the tunnel's bytes
// follow, the ClientHello perhaps already among what was read.
func (f *connectFront) open(d policy.Decision) (net.Conn, bool) {
	conn, brw, err := http.NewResponseController(f.w).Hijack()
	if err != nil {
		return nil, false
	}
	conn.SetDeadline(time.Time{})
	freeSlot(conn) // the tunnel cap counts it from here
	var client net.Conn = conn
	if brw.Reader.Buffered() > 0 {
		client = &bufferedConn{Conn: conn, r: brw.Reader}
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		return nil, false
	}
	f.s.logRequest(f.st, f.r, d, http.StatusOK, f.start)
	return client, true
}

// transparentFront is a redirected connection's side of its tunnel: no
// HTTP can be sent before a handshake, so a refusal is a TLS alert. Its
// tunnel slot was taken before its ClientHello was read (release), and
// is freed when it is refused.
type transparentFront struct {
	s       *Server
	c       net.Conn
	hello   []byte // the ClientHello read to learn the server name
	st      *state
	start   time.Time
	release func()
}

// refuse sends a TLS access_denied alert and closes the connection.
func (f *transparentFront) refuse(d policy.Decision) {
	f.s.refuseTransparent(f.st, f.c, d, true, f.start)
	f.release()
}

// fail closes the connection.
func (f *transparentFront) fail(a tunnelFailed) {
	f.s.log.Warn("transparent tunnel cannot reach its upstream", "host", a.d.Host, "error", a.err.Error())
	f.c.Close()
	f.release()
	f.s.logTransparent(f.st, a.d, a.status, f.start)
}

// open returns the connection with its ClientHello to be read again.
func (f *transparentFront) open(d policy.Decision) (net.Conn, bool) {
	f.c.SetReadDeadline(time.Time{})
	f.s.logTransparent(f.st, d, http.StatusOK, f.start)
	return &prefixConn{Conn: f.c, r: io.MultiReader(bytes.NewReader(f.hello), f.c)}, true
}
