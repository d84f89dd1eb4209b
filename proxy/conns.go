package proxy

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// statusRecorder remembers the status written through it, and a refusal
// made after the request's decision (a dial to an internal address).
type statusRecorder struct {
	http.ResponseWriter
	status  int
	refusal *policy.Decision
}

// decided is the decision to log: d, unless a refusal came after it.
func (r *statusRecorder) decided(d policy.Decision) policy.Decision {
	if r.refusal != nil {
		return *r.refusal
	}
	return d
}

// WriteHeader records the first final status.
func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and friends.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// timedTransport observes upstream latency to response headers.
type timedTransport struct {
	rt http.RoundTripper
	m  *metrics
}

// RoundTrip times the upstream round trip to its response headers.
func (t timedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.rt.RoundTrip(r)
	if err == nil {
		t.m.observeUpstream(time.Since(start))
	}
	return resp, err
}

// tunnelConn is an intercepted tunnel's TLS connection with what the
// CONNECT and handshake said. Closing it frees its tunnel slot.
type tunnelConn struct {
	net.Conn
	connect string // canonical CONNECT host
	sni     string
	release func()
}

// Close closes the tunnel and frees its slot.
func (c *tunnelConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// bufferedConn reads first what the CONNECT's reader already buffered
// (a client may send its ClientHello without waiting for our 200).
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

// Read drains the buffered bytes first.
func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the underlying TCP connection.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// connListener is a net.Listener fed by intercept: the inner HTTP server
// serves tunnels from it, sharing keep-alive handling, timeouts and
// graceful shutdown with an ordinary server.
type connListener struct {
	conns  chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newConnListener() *connListener {
	return &connListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to the server; false when the listener is closed.
func (l *connListener) push(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

// Accept returns the next intercepted tunnel.
func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; pushes fail from then on.
func (l *connListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

// Addr names the listener for logs.
func (l *connListener) Addr() net.Addr { return tunnelAddr{} }

type tunnelAddr struct{}

// Network is "tunnel".
func (tunnelAddr) Network() string { return "tunnel" }

// String is "tunnel".
func (tunnelAddr) String() string { return "tunnel" }

// slotListener accepts a connection only while fewer than cap(slots) it
// accepted are open and not yet tunnels; past that, Accept waits and the
// kernel's backlog holds the rest. Each connection still reading a
// request header may hold up to the server's MaxHeaderBytes in memory,
// and timeouts bound only how long, not how many: without the cap, a
// sandbox opening thousands of connections a second, each sending most
// of a header and stalling, would run the proxy out of memory.
type slotListener struct {
	net.Listener
	slots  chan struct{}
	done   chan struct{}
	closed sync.Once
}

func newSlotListener(ln net.Listener, n int) *slotListener {
	return &slotListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *slotListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, free: sync.OnceFunc(func() { <-l.slots })}, nil
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *slotListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// slotConn is a connection holding a slot of its slotListener.
type slotConn struct {
	net.Conn
	free func()
}

// Close closes the connection and frees its slot.
func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.free()
	return err
}

// CloseWrite half-closes the underlying TCP connection.
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// freeSlot frees c's slot when c came from a slotListener: a connection
// that became a tunnel is counted by the tunnel cap instead.
func freeSlot(c net.Conn) {
	if sc, ok := c.(*slotConn); ok {
		sc.free()
	}
}
