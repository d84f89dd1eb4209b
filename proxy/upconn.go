package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// upPool is the fast path to TLS upstreams for bodiless GET and HEAD
// requests, the bulk of an agent's traffic: the handler's own goroutine
// writes the request on a pooled connection and reads the response from
// it. http.Transport hands every request to a writer goroutine and every
// response back from a reader goroutine, and those switches cost more
// CPU per keep-alive request than the proxy's own work. Requests with a
// body, which need 100-continue handling and cannot always be replayed,
// still go through the Transport.
type upPool struct {
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	tls      *tls.Config // ServerName is set per host
	dialWait time.Duration
	respWait time.Duration
	idle     time.Duration
	perHost  int

	mu     sync.Mutex
	conns  map[string][]*upConn // host → idle connections, newest last
	closed bool
}

// upConn is one upstream connection with its buffers.
type upConn struct {
	conn     *tls.Conn
	peek     *socketPeek
	br       *bufio.Reader
	bw       *bufio.Writer
	lastUsed time.Time
}

func (c *upConn) close() { c.conn.NetConn().Close() }

// get returns an idle connection to host (reused true) or dials one.
func (p *upPool) get(ctx context.Context, host string) (c *upConn, reused bool, err error) {
	if c := p.take(host, time.Now()); c != nil {
		return c, true, nil
	}
	c, err = p.dialTLS(ctx, host)
	return c, false, err
}

func (p *upPool) take(host string, now time.Time) *upConn {
	for {
		c := p.pop(host, now)
		if c == nil || c.idleClean(now) {
			return c
		}
		// Bytes arrived on an idle connection: the tail of a response
		// that was longer than it said, or anything else the upstream
		// sent unasked. Read as the next response they would answer a
		// request they do not belong to.
		c.close()
	}
}

// pop removes and returns the newest idle connection to host that has
// not been idle too long, closing those that have.
func (p *upPool) pop(host string, now time.Time) *upConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.conns[host]
	for len(list) > 0 {
		c := list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		if now.Sub(c.lastUsed) < p.idle {
			p.conns[host] = list
			return c
		}
		c.close()
	}
	delete(p.conns, host)
	return nil
}

// socketCheckAfter is how long a connection must have been idle before
// idleClean also looks into its socket. That look is a system call (1 to
// 2 µs of CPU here, a few percent of a request); on a connection reused
// at once it finds little, since what a late upstream sends after its
// response has mostly not arrived yet, while after a pause it finds what
// arrived during it. With the pause required, the look costs a busy
// connection at most 100 calls a second, whatever its request rate.
const socketCheckAfter = 10 * time.Millisecond

// idleClean reports whether nothing has arrived on an idle connection
// since its last response ended: nothing left in its buffer, nothing
// decrypted and waiting in the TLS layer and, once it has been idle for
// socketCheckAfter, nothing (not even a close) in the socket. A
// connection that is not clean is never reused.
func (c *upConn) idleClean(now time.Time) bool {
	if c.br.Buffered() > 0 || now.Sub(c.lastUsed) >= socketCheckAfter && c.peek.readable() {
		return false
	}
	// With the socket empty, a read that may not wait returns only what
	// the TLS layer already holds: a whole record read with the last
	// response. A timeout is the clean answer.
	c.conn.SetReadDeadline(time.Unix(1, 0))
	_, err := c.br.Peek(1)
	c.conn.SetReadDeadline(time.Time{})
	// errors.Is, unlike isTimeout's errors.As, allocates nothing: this
	// runs before every request on a kept connection.
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// put returns a connection whose last response was read whole.
func (p *upPool) put(host string, c *upConn) {
	c.lastUsed = time.Now()
	p.mu.Lock()
	if p.closed || len(p.conns[host]) >= p.perHost {
		p.mu.Unlock()
		c.close()
		return
	}
	if p.conns == nil {
		p.conns = map[string][]*upConn{}
	}
	p.conns[host] = append(p.conns[host], c)
	p.mu.Unlock()
}

// sweep closes connections idle for longer than the idle timeout.
func (p *upPool) sweep(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for host, list := range p.conns {
		keep := list[:0]
		for _, c := range list {
			if now.Sub(c.lastUsed) < p.idle {
				keep = append(keep, c)
			} else {
				c.close()
			}
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(p.conns, host)
		} else {
			p.conns[host] = keep
		}
	}
}

// closeAll closes the idle connections; later puts close theirs.
func (p *upPool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for host, list := range p.conns {
		for _, c := range list {
			c.close()
		}
		delete(p.conns, host)
	}
}

func (p *upPool) dialTLS(ctx context.Context, host string) (*upConn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.dialWait)
	defer cancel()
	raw, err := p.dial(ctx, "tcp", net.JoinHostPort(host, "443"))
	if err != nil {
		return nil, err
	}
	cfg := p.tls.Clone()
	cfg.ServerName = host
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	return &upConn{conn: tc, peek: newSocketPeek(raw), br: bufio.NewReaderSize(tc, 4<<10), bw: bufio.NewWriterSize(tc, 4<<10)}, nil
}

// roundTrip sends out (GET or HEAD, no body) to https://out.Host and
// returns the final response; 1xx responses go to got1xx as they come.
// The response body's Close puts the connection back when the body was
// read to its end and the upstream keeps it open, and closes it
// otherwise. A reused connection that fails before any response is
// replaced once, as http.Transport does for idempotent requests.
func (p *upPool) roundTrip(out *http.Request, got1xx func(*http.Response)) (*http.Response, error) {
	host := out.URL.Hostname()
	for attempt := 0; ; attempt++ {
		c, reused, err := p.get(out.Context(), host)
		if err != nil {
			return nil, err
		}
		res, err := p.exchange(c, out, got1xx)
		if err == nil {
			return res, nil
		}
		c.close()
		if !reused || attempt > 0 || out.Context().Err() != nil || isTimeout(err) {
			return nil, err
		}
	}
}

func (p *upPool) exchange(c *upConn, out *http.Request, got1xx func(*http.Response)) (*http.Response, error) {
	// A canceled request (the sandbox went away, the server shuts down)
	// unblocks whatever the connection is doing by closing it.
	stop := context.AfterFunc(out.Context(), c.close)
	fail := func(err error) (*http.Response, error) {
		stop()
		if cerr := out.Context().Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	if err := out.Write(c.bw); err != nil {
		return fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err)
	}
	c.conn.SetReadDeadline(time.Now().Add(p.respWait))
	var res *http.Response
	for {
		var err error
		if res, err = http.ReadResponse(c.br, out); err != nil {
			return fail(err)
		}
		if res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		got1xx(res)
	}
	c.conn.SetReadDeadline(time.Time{})
	keep := reusable(out, res)
	res.Body = &upBody{rc: res.Body, c: c, pool: p, host: out.URL.Hostname(), keep: keep, stop: stop}
	return res, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// upBody is a fast-path response body; Close decides the connection's fate.
type upBody struct {
	rc   io.ReadCloser
	c    *upConn
	pool *upPool
	host string
	keep bool // the upstream did not ask to close
	eof  bool
	done bool
	stop func() bool
}

// Read reads the body, noting its clean end.
func (b *upBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, errors.New("read of a closed upstream response body")
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close pools the connection after a whole body, else closes it: a
// partly read body would leave the rest on the wire.
func (b *upBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	canceled := !b.stop()
	if b.eof && b.keep && !canceled {
		b.pool.put(b.host, b.c)
	} else {
		b.c.close()
	}
	return nil
}
