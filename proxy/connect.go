package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// serveConnect admits and serves a CONNECT's tunnel.
func (s *Server) serveConnect(w http.ResponseWriter, r *http.Request, st *state, start time.Time) {
	f := &connectFront{s: s, w: w, r: r, st: st, start: start}
	s.serveTunnel(r.Context(), f, st, r.RequestURI, s.reserveTunnel)
}

// intercept terminates the sandbox's TLS with a leaf for the admitted
// host and hands the connection to the inner HTTP server.
func (s *Server) intercept(conn net.Conn, a interception) {
	host := a.d.Host
	hc := &hostConn{Conn: conn, tunnel: a, budget: maxClientHello}
	tconn := tls.Server(hc, s.tunnelTLS)
	tconn.SetDeadline(time.Now().Add(s.opts.Timeouts.Handshake))
	if err := tconn.Handshake(); err != nil {
		s.log.Warn("tls handshake with the sandbox failed", "host", host, "error", err.Error())
		tconn.Close()
		a.release()
		return
	}
	hc.budget = -1 // the handshake is over: reads are the tunnel's requests
	tconn.SetDeadline(time.Time{})
	tc := &tunnelConn{Conn: tconn, connect: host, sni: tconn.ConnectionState().ServerName, release: a.release}
	ln := s.innerLn
	if tconn.ConnectionState().NegotiatedProtocol == "h2" {
		ln = s.innerH2Ln // h2.go
	}
	if !ln.push(tc) {
		tc.Close()
	}
}

// leafFor serves the leaf of the interception the handshake runs on:
// only an intercepted tunnel's handshake gets one, and no leaf is ever
// minted for a name the config does not inject.
func (s *Server) leafFor(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	hc, ok := hello.Conn.(*hostConn)
	if !ok {
		return nil, errors.New("handshake outside a tunnel")
	}
	cs := s.ca.Load()
	if cs == nil {
		return nil, fmt.Errorf("%w: not loaded", ErrCA)
	}
	return hc.tunnel.leaf(s.leaves, cs.ca, time.Now())
}

// hostConn is the sandbox side of an intercepted tunnel before TLS: it
// carries the interception, whose leaf leafFor serves, and bounds what
// the handshake reads from the sandbox. crypto/tls keeps the buffers a
// handshake grew for the life of the connection, so a ClientHello as
// large as crypto/tls takes (64 KiB) would cost every idle tunnel the
// sandbox keeps open some 100 KiB more than a real one does.
type hostConn struct {
	net.Conn
	tunnel interception
	// budget is how many more bytes the handshake may read; -1 once it
	// is over. The reads of one connection are sequential: the
	// handshake's, then the HTTP server's, after the handshake returned.
	budget int
}

// Read reads the connection, within the handshake's budget. Each read is
// cut to the budget left, so that bytes the sandbox sent after its
// Finished (a first request) count only as far as crypto/tls asks for
// them; only a handshake that needs more fails.
func (c *hostConn) Read(b []byte) (int, error) {
	if c.budget < 0 {
		return c.Conn.Read(b)
	}
	if c.budget == 0 {
		return 0, errHelloTooLarge
	}
	if len(b) > c.budget {
		b = b[:c.budget]
	}
	n, err := c.Conn.Read(b)
	c.budget -= n
	return n, err
}

// splice copies bytes both ways between a passthrough tunnel's ends. Any
// traffic in either direction keeps both alive; Timeouts.Idle of silence
// closes them. A config reload that no longer passes host through closes
// them too (closeRevokedTunnels): the bytes of a tunnel are never
// decided, so a tunnel opened under the old config would otherwise carry
// on as long as it has traffic. The check here covers a reload that came
// between the CONNECT's decision and this registration (the dial can
// take Timeouts.Dial).
func (s *Server) splice(client, upstream net.Conn, host string, release func()) {
	s.passMu.Lock()
	if s.passClosed || !s.state.Load().policy.Passthrough(host) {
		s.passMu.Unlock()
		client.Close()
		upstream.Close()
		release()
		return
	}
	s.passConns[client] = host
	s.passConns[upstream] = host
	s.passWG.Add(1)
	s.passMu.Unlock()
	defer func() {
		s.passMu.Lock()
		delete(s.passConns, client)
		delete(s.passConns, upstream)
		s.passMu.Unlock()
		release()
		s.passWG.Done()
	}()
	idle := s.opts.Timeouts.Idle
	touch := func() {
		dl := time.Now().Add(idle)
		client.SetReadDeadline(dl)
		upstream.SetReadDeadline(dl)
	}
	touch()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				touch()
				// A peer that stops reading must not hold the tunnel
				// forever: a write may wait as long as a read.
				dst.SetWriteDeadline(time.Now().Add(idle))
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		// Half-close so the other side sees EOF, then make sure the
		// other direction ends too.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		src.SetReadDeadline(time.Now())
	}
	wg.Add(2)
	go pipe(upstream, client)
	pipe(client, upstream)
	wg.Wait()
	client.Close()
	upstream.Close()
}

// closeRevokedTunnels closes the passthrough tunnels whose host st no
// longer passes through: removed from the config, or made an injected
// host whose requests must now be decided one by one. It runs after st
// is stored, under the lock splice registers under, so no tunnel can be
// registered under the old config and missed.
func (s *Server) closeRevokedTunnels(st *state) int {
	s.passMu.Lock()
	defer s.passMu.Unlock()
	n := 0
	for c, host := range s.passConns {
		if !st.policy.Passthrough(host) {
			c.Close()
			n++
		}
	}
	return n / 2 // each tunnel has two ends
}

// tunnelKey carries a request's *tunnelConn in its context.
type tunnelKey struct{}

// serveTunnelRequest handles one request read inside an intercepted
// tunnel.
func (s *Server) serveTunnelRequest(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	st := s.state.Load()
	tc, _ := r.Context().Value(tunnelKey{}).(*tunnelConn)
	if tc == nil {
		http.Error(w, "keyhole: internal error", http.StatusInternalServerError)
		return
	}
	if r.ProtoMajor == 2 {
		s.serveTunnelStream(w, r, st, tc, start) // h2.go
		return
	}
	s.serveRequest(w, r, st, tc, start)
}

// serveRequest handles one request that is not a CONNECT: an
// absolute-form request on the proxy listener (tc nil), or one read
// inside the intercepted tunnel tc. It decides the request, prepares its
// header from the decision (prepareHeader) and forwards it: to a
// passthrough host over http://, to an injected host over verified TLS.
func (s *Server) serveRequest(w http.ResponseWriter, r *http.Request, st *state, tc *tunnelConn, start time.Time) {
	rec := &statusRecorder{ResponseWriter: w}
	// Strip hop-by-hop headers before deciding, so the headers decided on
	// are the headers sent (Connection: Content-Type cannot drop a
	// Content-Type a body rule was checked against), and before injecting,
	// so nothing the sandbox names in Connection can remove the credential.
	expect := hasExpectContinue(r.Header) // as net/http read it, before any stripping
	// Upgrade and Connection are hop-by-hop: whether the request is a
	// WebSocket handshake is read before they go.
	ws := tc != nil && policy.IsWebSocketHandshake(r.Method, r.ProtoAtLeast(1, 1), r.Body == nil || r.Body == http.NoBody, r.Header)
	stripHopByHop(r.Header)
	info := policy.RequestInfo{Kind: policy.KindPlain, Method: r.Method, Target: r.RequestURI, Host: r.Host}
	var d policy.Decision
	var ok bool
	if tc != nil {
		if st, info, d, ok = s.readTunnelRequest(w, r, st, tc, ws); !ok {
			return
		}
	} else {
		d = st.policy.Decide(info)
	}
	// The body's head stays only in the replay, which drops it once
	// the upstream has read it: a request waiting on a slow upstream
	// does not hold a megabyte.
	info.Body = nil
	defer func() { s.logRequest(st, r, rec.decided(d), rec.status, start) }()
	if !d.Allowed() {
		s.boundRefusedBody(w, r, expect)
		// After a host-mismatch the connection cannot be trusted to
		// name one host: close it.
		writeRefusal(rec, d, tc != nil && (d.Reason == policy.ReasonHostMismatch || d.Reason == policy.ReasonHostNotAllowed))
		return
	}
	sc, err := prepareHeader(r.Header, d, s.injectorFor(st))
	if err != nil {
		hp := d.HostPolicy()
		s.metrics.injectFailure(hp.Name)
		d = policy.Refusal(policy.ReasonCredentialUnavailable, d.Host, "keyhole cannot read the credential of connection %s for %s; check the mounted Secret", hp.Connection, hp.Name)
		if errors.Is(err, errMint) {
			s.log.Warn("credential not minted", "host", hp.Name, "connection", hp.Connection, "error", logText(err.Error()))
			d = policy.Refusal(policy.ReasonCredentialUnavailable, d.Host, "keyhole cannot mint the credential of connection %s for %s; the proxy's log says why", hp.Connection, hp.Name)
		}
		d.Connection = hp.Connection
		writeRefusal(rec, d, false)
		return
	}
	r.Host = d.Host // the forwarders send to the canonical host
	if d.Action == policy.ActionAudit {
		s.audited(st, r, d) // forwarded without the credential (audit.go)
		s.tlsForwarder(r).forward(rec, r, sc)
		return
	}
	if hp := d.HostPolicy(); hp != nil && hp.Inject.AWSSigV4 != nil {
		if sc.inj, ok = s.signAWSRequest(rec, r, d, st); !ok {
			return
		}
	}
	if d.MCP != nil && d.MCP.Filter {
		// The answer is filtered, so it must come uncompressed: without
		// Accept-Encoding the upstream sends it as it is.
		sc.mcp = d.MCP
		r.Header.Del("Accept-Encoding")
	}
	if d.WebSocket {
		prepareWebSocket(r.Header)
		sc.ws = s.webSocketGrant(st, info, d.Connection)
	}
	if d.Action != policy.ActionInject {
		s.forwardPlain.forward(rec, r, sc)
		return
	}
	if !info.BodyComplete {
		// Too long to read before deciding: look for override fields
		// as it streams, its last byte held back until the scan ends.
		if scan := policy.NewOverrideScanner(info.ContentType, d.HostPolicy().OverrideEncodings(info.ContentEncoding)); scan != nil {
			host, conn := d.Host, d.Connection
			sb := newScannedBody(r.Body, scan, func(name string, err error) *bodyRefusedError {
				d := policy.Refusal(policy.ReasonL7NotAllowed, host, "the body's %s field is refused on injected hosts: servers read it as another method than the request line's, which the rules checked", name)
				if err != nil {
					d = policy.Refusal(policy.ReasonL7NotAllowed, host, "%v", err)
				}
				d.Connection = conn
				return &bodyRefusedError{d: d}
			})
			// An upstream that answers early stops the body's reads:
			// end the scan (and its goroutine, for multipart) anyway.
			defer sb.finish()
			r.Body = sb
		}
	}
	if hp := d.HostPolicy(); renewable(hp) && !d.WebSocket {
		if !s.renewable(rec, r, st, hp, &sc) {
			return
		}
	}
	s.tlsForwarder(r).forward(rec, r, sc)
}

// maxReplayBody bounds a request body the proxy holds to send again
// after an upstream's 401 renewed the token.
const maxReplayBody = 64 << 10

// renewable lets the forwarder renew hp's token after an upstream's 401
// and send r again: r has no body, or one of a known length up to
// maxReplayBody, which it reads whole now and holds. A longer body, or
// one of unknown length, streams as usual, and its 401 goes back as it
// came. It returns false when reading the body failed, having answered
// the request.
func (s *Server) renewable(w http.ResponseWriter, r *http.Request, st *state, hp *policy.HostPolicy, sc *scrubbing) bool {
	if r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength < 0 || r.ContentLength > maxReplayBody {
			return true
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, maxReplayBody+1))
		if err != nil {
			s.upstreamError(w, r, err, sc.inj)
			return false
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		sc.replay = b
	}
	sc.renew = func(h http.Header) (Injected, error) { return s.renewInjection(st, hp, h) }
	return true
}

// readTunnelRequest reads what the decision on a request in tunnel tc
// looks at, and decides it: its header (already stripped of hop-by-hop
// headers) and, for a rule that checks it or for override fields a
// server could read from it, the head of its body, which it replays to
// the upstream. A request refused whatever its body holds is decided
// before its body is read, so its refusal goes at once: a client that
// sent Expect: 100-continue gets no 100 and waits for no body (RFC 9110,
// 15.2.1), and net/http closes the connection after the answer, since
// the body may or may not follow. It returns the state that decided the
// request, which is the newest: reading the body can take a while. When
// it fails it has answered the request.
func (s *Server) readTunnelRequest(w http.ResponseWriter, r *http.Request, st *state, tc *tunnelConn, ws bool) (*state, policy.RequestInfo, policy.Decision, bool) {
	info := policy.RequestInfo{Kind: policy.KindTunnel, Method: r.Method, Target: r.RequestURI, ConnectHost: tc.connect, SNI: tc.sni, Host: r.Host, Header: r.Header, BodyComplete: true, WebSocket: ws,
		ContentType: r.Header.Values("Content-Type"), ContentEncoding: r.Header.Values("Content-Encoding")}
	hp := st.policy.Host(tc.connect)
	read := false
	for {
		// The body is read for a rule that checks it, and wherever a
		// server could read a method override from it as a field.
		if !read && hp != nil && (hp.NeedsBody() || policy.OverrideBodyType(info.ContentType)) && r.Body != nil && r.Body != http.NoBody {
			if d, refused := st.policy.RefusedWhateverBody(info); refused {
				return st, info, d, true
			}
			head, ok := s.readBodyHead(w, r, tc.connect)
			if !ok {
				return st, info, policy.Decision{}, false
			}
			read = true
			info.Body, info.BodyComplete = head, len(head) <= policy.MaxBodyCheck
			// Replay what was read, then the rest, so the upstream gets
			// the body exactly as sent.
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		}
		// Reading the body can take Timeouts.ReadHeader: a config
		// reloaded meanwhile decides the request, as it decides every
		// request after it, so a sandbox cannot hold a body back to have
		// a revoked rule pass it after the revocation.
		cur := s.state.Load()
		if cur == st {
			return st, info, st.policy.Decide(info), true
		}
		st, hp = cur, cur.policy.Host(tc.connect)
	}
}

// hasExpectContinue reports whether h asks for 100 Continue, as net/http
// reads Expect.
func hasExpectContinue(h http.Header) bool {
	for _, v := range h.Values("Expect") {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(f), "100-continue") {
				return true
			}
		}
	}
	return false
}

// boundRefusedBody bounds what net/http does with the unread body of a
// request refused, before and after the refusal is written: it reads up
// to 256 KiB of it, so the connection can serve the next request, and
// with no read deadline a client that announced a body and sends none
// held the connection (and its tunnel slot) for as long as it stayed. A
// client that sent Expect: 100-continue and got no 100 may never send
// its body (RFC 9110, 10.1.1): nothing more is read, and net/http closes
// the connection after the refusal. Any other client must send its
// body: it has Timeouts.ReadHeader to, and the connection is closed if
// it does not.
func (s *Server) boundRefusedBody(w http.ResponseWriter, r *http.Request, expect bool) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	deadline := time.Now().Add(s.opts.Timeouts.ReadHeader)
	if expect {
		deadline = time.Now()
	}
	http.NewResponseController(w).SetReadDeadline(deadline)
}

// bodyRefusedError is a request refused once its body had streamed: it
// held an override field the decision could not see.
type bodyRefusedError struct{ d policy.Decision }

func (e *bodyRefusedError) Error() string { return e.d.Message }

// scannedBody passes a request body on through an OverrideScanner,
// always holding its last byte back until the body has ended and the
// scan has given its verdict: refused, the upstream never gets the whole
// body (a server runs no request whose body it has not had whole), and
// Read fails with the refusal.
type scannedBody struct {
	mu      sync.Mutex // the transport may read while the handler ends
	ended   bool       // the scan is closed
	r       io.ReadCloser
	sc      *policy.OverrideScanner
	refuse  func(name string, err error) *bodyRefusedError
	space   []byte
	pend    []byte // read and scanned, not yet passed on
	eof     bool
	refusal error
}

func newScannedBody(r io.ReadCloser, sc *policy.OverrideScanner, refuse func(string, error) *bodyRefusedError) *scannedBody {
	return &scannedBody{r: r, sc: sc, refuse: refuse, space: make([]byte, 32<<10)}
}

// Read passes on what has been scanned but the last byte, and that byte
// too once the body ended and the scan passed it.
func (b *scannedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if b.ended && !b.eof {
			return 0, errors.New("read of the request body after the handler returned")
		}
		if b.refusal != nil {
			return 0, b.refusal // what is pending never goes
		}
		if k := len(b.pend); k > 1 || b.eof && k > 0 {
			if !b.eof {
				k--
			}
			n := copy(p, b.pend[:k])
			b.pend = b.pend[n:]
			return n, nil
		}
		if b.eof {
			return 0, io.EOF
		}
		n := copy(b.space, b.pend)
		m, err := b.r.Read(b.space[n:])
		b.sc.Write(b.space[n : n+m])
		b.pend = b.space[:n+m]
		switch {
		case err == io.EOF:
			b.eof, b.ended = true, true
			if name, err := b.sc.Close(); name != "" || err != nil {
				b.refusal = b.refuse(name, err)
			}
		case err != nil:
			b.ended = true
			b.sc.Close()
			return 0, err
		}
	}
}

// finish ends the scan if the body was not read to its end.
func (b *scannedBody) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ended {
		b.ended = true
		b.sc.Close()
	}
}

// Close closes the inbound body.
func (b *scannedBody) Close() error { return b.r.Close() }

// bodySlotWait is how long a request waits for one of the
// Options.MaxBodyChecks slots before it is turned away.
const bodySlotWait = time.Second

// readBodyHead reads the first policy.MaxBodyCheck+1 bytes of r's body
// for a rule to check. It holds one of the server's body-check slots while
// it reads, and gives the sandbox Timeouts.ReadHeader to send them: a
// stalled body would otherwise hold its buffer, and its tunnel, forever,
// and a stalled body per tunnel, over a thousand tunnels, would hold a
// gigabyte. When it fails it has answered the request: 503 when no slot
// freed up in time, 400 when the body did not arrive in time.
func (s *Server) readBodyHead(w http.ResponseWriter, r *http.Request, host string) ([]byte, bool) {
	fail := func(status int, msg string) ([]byte, bool) {
		w.Header().Set("Connection", "close")
		http.Error(w, "keyhole: "+msg, status)
		return nil, false
	}
	wait := time.NewTimer(min(bodySlotWait, s.opts.Timeouts.ReadHeader))
	defer wait.Stop()
	select {
	case s.bodyChecks <- struct{}{}:
	case <-wait.C:
		s.log.Warn("request body not checked: too many being read", "host", host, "max", cap(s.bodyChecks))
		return fail(http.StatusServiceUnavailable, "too many request bodies being checked; retry later")
	case <-r.Context().Done():
		return nil, false
	}
	defer func() { <-s.bodyChecks }()
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.opts.Timeouts.ReadHeader))
	head, err := io.ReadAll(io.LimitReader(r.Body, policy.MaxBodyCheck+1))
	if err != nil {
		return fail(http.StatusBadRequest, "cannot read the request body")
	}
	// The rest of the body, if any, streams upstream like any other.
	rc.SetReadDeadline(time.Time{})
	return head, true
}
