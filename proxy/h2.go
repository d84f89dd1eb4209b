package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// HTTP/2 in an intercepted tunnel (docs/proxy.md, "HTTP/2 and gRPC").
//
// The sandbox's leg offers h2 in ALPN, and a tunnel whose client selected
// it goes to a server of its own (Server.innerH2). Each stream is
// a request like one read over HTTP/1.1: serveTunnelRequest decides it,
// prepares its header and forwards it, and nothing here decides anything
// but what HTTP/2 alone brings (a Host header beside :authority, CONNECT).
//
// net/http's HTTP/2 server treats as malformed, before any handler runs,
// what would become framing over HTTP/1.1: connection-specific headers
// (Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade) and
// a TE other than "trailers" get a 400; a header value with CR, LF or NUL,
// a repeated or unknown pseudo-header, a pseudo-header after a regular
// one, and a Content-Length the DATA frames disagree with reset the
// stream (RFC 9113, 8.1.1 and 8.2). The upstream request is framed anew
// by the client that sends it (framing.go's rules over HTTP/1.1), from
// the request's parsed fields, never from the sandbox's bytes.
//
// A stream goes upstream over HTTP/2 when the upstream offers h2 in ALPN,
// else over HTTP/1.1 through the same client as an HTTP/1.1 request,
// unless it cannot go there without loss: a gRPC request is refused
// then. Request trailers go to neither (framing.go).

// The sandbox leg's HTTP/2 limits. A tunnel is one connection whatever
// it carries, and DefaultMaxTunnels of them must fit the sidecar's
// memory: each connection buffers at most h2ConnWindow of request bodies
// the handlers have not read, reads frames of h2MaxFrame at most, and
// runs h2MaxStreams requests at once. Over HTTP/1.1 a tunnel carries one
// request at a time; over HTTP/2 the streams of all tunnels forwarded at
// once are capped at Options.MaxTunnels (Server.h2Streams), so that the
// requests in flight, and what each holds (buffers, an upstream
// connection), stay what the tunnel cap allows over HTTP/1.1.
const (
	h2MaxStreams   = 32
	h2ConnWindow   = 64 << 10
	h2StreamWindow = 64 << 10
	h2MaxFrame     = 16 << 10 // the protocol's default
)

// h2NoH2Remembered is how long an upstream that selected HTTP/1.1 is
// sent HTTP/1.1 without asking again.
const h2NoH2Remembered = 5 * time.Minute

// h2Tunnels returns the server of the tunnels whose sandbox selected h2
// in ALPN: inner's handler, limits and timeouts, HTTP/2 alone, on
// connections whose TLS is already terminated. A tunnel that selected
// http/1.1 stays with inner, which reads no HTTP/2 preface.
func h2Tunnels(inner *http.Server) *http.Server {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:                      inner.Handler,
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            inner.ReadHeaderTimeout,
		IdleTimeout:                  inner.IdleTimeout,
		// Over HTTP/2 each stream's writes wait at most this long, which
		// the forwarder extends as a long response flows.
		WriteTimeout:   inner.WriteTimeout,
		MaxHeaderBytes: inner.MaxHeaderBytes,
		ErrorLog:       inner.ErrorLog,
		ConnContext:    inner.ConnContext,
		Protocols:      &p,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          h2MaxStreams,
			MaxReadFrameSize:              h2MaxFrame,
			MaxReceiveBufferPerConnection: h2ConnWindow,
			MaxReceiveBufferPerStream:     h2StreamWindow,
			MaxDecoderHeaderTableSize:     4 << 10,
			MaxEncoderHeaderTableSize:     4 << 10,
		},
	}
}

// errNoH2 is an upstream that did not select h2 in ALPN.
var errNoH2 = errors.New("the upstream does not speak HTTP/2")

// h2Upstream sends the streams of the sandbox's HTTP/2 connections: over
// HTTP/2 to an upstream that selects h2, else through h1, the client of
// HTTP/1.1 requests (framing.go's rules), when that loses nothing.
type h2Upstream struct {
	h2 *http.Transport // dials only connections that selected h2
	h1 http.RoundTripper
	m  *metrics

	mu   sync.Mutex
	noH2 map[string]time.Time // host:port → when it last selected HTTP/1.1
}

// newH2Upstream returns the HTTP/2 client to injected hosts: TLS verified
// against roots, dialled with dial, and h1 for the upstreams that do not
// speak HTTP/2.
func (s *Server) newH2Upstream(roots *tls.Config, h1 http.RoundTripper) *h2Upstream {
	u := &h2Upstream{h1: h1, m: s.metrics, noH2: map[string]time.Time{}}
	t := s.opts.Timeouts
	var p http.Protocols
	p.SetHTTP1(true) // never used: the dialler refuses what is not h2
	p.SetHTTP2(true)
	u.h2 = &http.Transport{
		Proxy: nil,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return u.dialH2(ctx, s, roots, network, addr)
		},
		ResponseHeaderTimeout: t.ResponseHeader,
		IdleConnTimeout:       t.Idle,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		Protocols:             &p,
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerConnection: 1 << 20,
			MaxReceiveBufferPerStream:     256 << 10,
			SendPingTimeout:               t.Idle,
		},
	}
	return u
}

// dialH2 connects to addr and runs TLS offering h2 and http/1.1 (an
// upstream that speaks only HTTP/1.1 then completes the handshake rather
// than failing it). One that does not select h2 is remembered as one that
// speaks HTTP/1.1, and the dial fails with errNoH2 before any byte of a
// request is sent.
func (u *h2Upstream) dialH2(ctx context.Context, s *Server, roots *tls.Config, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeouts.Dial)
	defer cancel()
	raw, err := s.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	conf := roots.Clone()
	conf.ServerName = host
	conf.NextProtos = []string{"h2", "http/1.1"}
	tc := tls.Client(raw, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		tc.Close()
		u.mu.Lock()
		u.noH2[addr] = time.Now()
		u.mu.Unlock()
		return nil, errNoH2
	}
	return tc, nil
}

// speaksH1 reports whether addr selected HTTP/1.1 within h2NoH2Remembered.
func (u *h2Upstream) speaksH1(addr string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	at, ok := u.noH2[addr]
	if ok && time.Since(at) > h2NoH2Remembered {
		delete(u.noH2, addr)
		return false
	}
	return ok
}

// RoundTrip sends r over HTTP/2, or over HTTP/1.1 to an upstream that
// does not speak it when r can go there whole.
func (u *h2Upstream) RoundTrip(r *http.Request) (*http.Response, error) {
	addr := r.URL.Host
	if r.URL.Port() == "" {
		addr = net.JoinHostPort(r.URL.Hostname(), "443")
	}
	lossy := needsH2(r)
	if !u.speaksH1(addr) {
		// A stream ends with its own END_STREAM: nothing of a body can
		// be read as the next request, so the connection stays (over
		// HTTP/2, Close would make it carry this request alone).
		h2r := *r
		h2r.Close = false
		if wantsTrailers(r) {
			h2r.Header = r.Header.Clone() // the HTTP/1.1 client may get r yet
			h2r.Header.Set("Te", "trailers")
		}
		body := r.Body
		if body != nil {
			// A dial that fails before the request is written leaves
			// the body to the HTTP/1.1 client; the transport closes the
			// body it got, so it gets one whose Close is a no-op.
			h2r.Body = keepOpenBody{body}
		}
		start := time.Now()
		res, err := u.h2.RoundTrip(&h2r)
		if !errors.Is(err, errNoH2) {
			if err == nil {
				u.m.observeUpstream(time.Since(start))
			}
			return res, err
		}
	}
	if lossy {
		d := policy.Refusal(policy.ReasonL7NotAllowed, r.Host, "the upstream does not speak HTTP/2, and gRPC cannot go over HTTP/1.1")
		return nil, &bodyRefusedError{d: d}
	}
	return u.h1.RoundTrip(r)
}

// closeIdle closes the idle upstream connections.
func (u *h2Upstream) closeIdle() { u.h2.CloseIdleConnections() }

// keepOpenBody passes reads on and ignores Close.
type keepOpenBody struct {
	r interface{ Read([]byte) (int, error) }
}

func (b keepOpenBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (keepOpenBody) Close() error                 { return nil }

// needsH2 reports whether r cannot go over HTTP/1.1 without loss: a gRPC
// request, whose status comes in trailers, and whose framing over
// HTTP/1.1 no gRPC server reads.
func needsH2(r *http.Request) bool {
	return isGRPC(r.Header)
}

// wantsTrailersKey marks, in a stream's context, a request that sent
// "te: trailers": TE is a hop-by-hop header, stripped before the
// decision, and gRPC servers may require it of a request, so the HTTP/2
// client sends it again.
type wantsTrailersKey struct{}

func wantsTrailers(r *http.Request) bool {
	v, _ := r.Context().Value(wantsTrailersKey{}).(bool)
	return v
}

// isGRPC reports a gRPC request: content-type application/grpc, alone or
// with a +subtype or parameters.
func isGRPC(h http.Header) bool {
	ct := strings.ToLower(h.Get("Content-Type"))
	return ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc;")
}

// tlsForwarder is the forwarder of a decided request to an injected host:
// the HTTP/2 one for a stream of the sandbox's HTTP/2 connection.
func (s *Server) tlsForwarder(r *http.Request) *forwarder {
	if r.ProtoMajor == 2 && s.forwardH2 != nil {
		return s.forwardH2
	}
	return s.forwardTLS
}

// setupH2 serves HTTP/2 on the tunnels and makes the forwarder of their
// streams.
func (s *Server) setupH2(upTLS *tls.Config) {
	s.innerH2, s.innerH2Ln = h2Tunnels(s.inner), newConnListener()
	s.h2Streams = make(chan struct{}, s.opts.MaxTunnels)
	s.tunnelTLS.NextProtos = []string{"h2", "http/1.1"} // what the sandbox leg offers
	s.h2up = s.newH2Upstream(upTLS, timedTransport{rt: s.upstream, m: s.metrics})
	s.forwardH2 = newForwarder("https", s.h2up, s.upstreamError)
	s.forwardH2.onScrub = s.upstreamScrubbed
	s.forwardH2.stall = s.opts.Timeouts.Idle
}

// serveTunnelStream handles one stream of an HTTP/2 connection in tunnel
// tc: what HTTP/2 alone brings is refused here, the rest is decided as
// an HTTP/1.1 request is, and a refusal of a gRPC request also carries
// the gRPC status a gRPC client shows.
func (s *Server) serveTunnelStream(w http.ResponseWriter, r *http.Request, st *state, tc *tunnelConn, start time.Time) {
	select {
	case s.h2Streams <- struct{}{}:
		defer func() { <-s.h2Streams }()
	default:
		// Not a refusal: the client may retry (gRPC: UNAVAILABLE).
		s.log.Warn("HTTP/2 stream not served: too many open", "host", tc.connect, "max", cap(s.h2Streams))
		http.Error(w, "keyhole: too many HTTP/2 streams open; retry later", http.StatusServiceUnavailable)
		return
	}
	hw := &h2Writer{ResponseWriter: w, grpc: isGRPC(r.Header)}
	defer hw.finish()
	if d, refused := h2Refusal(r, tc); refused {
		rec := &statusRecorder{ResponseWriter: hw}
		s.boundRefusedBody(rec, r, false)
		writeRefusal(rec, d, true)
		s.logRequest(st, r, rec.decided(d), rec.status, start)
		return
	}
	// The Host header, equal to :authority, goes: the upstream's comes
	// from the decision's host, as over HTTP/1.1.
	delete(r.Header, "Host")
	if r.Header.Get("Te") == "trailers" {
		r = r.WithContext(context.WithValue(r.Context(), wantsTrailersKey{}, true))
	}
	s.serveRequest(hw, r, st, tc, start)
}

// h2Refusal decides what HTTP/2 alone brings: CONNECT (a tunnel inside
// the tunnel, or RFC 8441's extended CONNECT for a WebSocket, which the
// rules cannot see into), and a Host header that names another host than
// :authority, or more than one (RFC 9113, 8.3.1: the two must agree, and
// an upstream reached over HTTP/1.1 reads Host).
func h2Refusal(r *http.Request, tc *tunnelConn) (policy.Decision, bool) {
	if r.Method == http.MethodConnect {
		d := policy.Refusal(policy.ReasonL7NotAllowed, tc.connect, "CONNECT inside an intercepted tunnel is refused: the rules cannot see into a tunnel")
		return d, true
	}
	if hv, ok := r.Header["Host"]; ok && (len(hv) != 1 || !strings.EqualFold(hv[0], r.Host)) {
		d := policy.Refusal(policy.ReasonHostMismatch, tc.connect, "the Host header names another host than :authority")
		return d, true
	}
	return policy.Decision{}, false
}

// h2Writer is a stream's response writer. A refusal keeps the sandbox's
// connection open unless the connection cannot be trusted to name one
// host (over HTTP/2, Connection: close ends every stream of the
// connection, not one request); and a refusal of a gRPC request goes as
// a gRPC client reads one (a "trailers-only" response): status 200, no
// body, the grpc-status and grpc-message of the refusal beside keyhole's
// refusal header. The request log keeps the refusal's own status.
type h2Writer struct {
	http.ResponseWriter
	grpc    bool
	pending bool   // a gRPC refusal, written by finish
	code    int    // its status
	msg     []byte // its one-line message, as writeRefusal wrote it
}

// WriteHeader holds a gRPC refusal back for finish, and passes any other
// status on.
func (w *h2Writer) WriteHeader(code int) {
	h := w.Header()
	reason := h.Get(policy.RefusedHeader)
	if reason == "" || code < 200 || w.pending {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if reason != string(policy.ReasonHostMismatch) && reason != string(policy.ReasonHostNotAllowed) {
		h.Del("Connection")
	}
	if !w.grpc {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.pending, w.code = true, code
}

// Write keeps the text of a gRPC refusal for grpc-message: a gRPC client
// reads a body as messages.
func (w *h2Writer) Write(b []byte) (int, error) {
	if w.pending {
		if room := maxGRPCMessage - len(w.msg); room > 0 {
			w.msg = append(w.msg, b[:min(len(b), room)]...)
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// FlushError flushes, but for a gRPC refusal, which finish writes whole.
func (w *h2Writer) FlushError() error {
	if w.pending {
		return nil
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// finish writes a gRPC refusal held back.
func (w *h2Writer) finish() {
	if !w.pending {
		return
	}
	status := grpcPermissionDenied
	if w.code != http.StatusForbidden {
		status = grpcUnavailable
	}
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(status))
	h.Set("Grpc-Message", grpcEncode(strings.TrimSpace(string(w.msg))))
	w.ResponseWriter.WriteHeader(http.StatusOK)
}

// Unwrap lets http.ResponseController reach the stream's deadlines.
func (w *h2Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// maxGRPCMessage bounds a refusal's grpc-message: the messages of
// refusals are one line, far shorter.
const maxGRPCMessage = 1 << 10

// The gRPC status codes a refusal carries.
const (
	grpcPermissionDenied = 7
	grpcUnavailable      = 14
)

// grpcEncode percent-encodes s as grpc-message wants: printable ASCII
// but '%' as is, every other byte as %XX.
func grpcEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c <= 0x7e && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
