package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// forwarder sends a decided request to scheme://r.Host over a pooled
// upstream connection and copies the response back. It does what
// httputil.ReverseProxy (with a Rewrite) did for this proxy, minus what
// the proxy never needs: no deep copy of the request and its header (the
// handler owns both, and prepareHeader has already made the header the
// upstream gets), no protocol upgrades but a WebSocket's (Upgrade is a
// stripped hop-by-hop header, so a 101 to anything else is an upstream
// error), no X-Forwarded-* (the
// sandbox's are dropped, none added). It edits no request header itself;
// how the request is framed comes from framing.go. It never follows
// redirects: every response goes back as is. The one upgrade it asks
// for is a WebSocket's, on a handshake a rule allows (websocket.go).
type forwarder struct {
	scheme string
	rt     http.RoundTripper
	// pool, when set, carries bodiless GET and HEAD requests instead of
	// rt, and observe times them to response headers as rt does itself.
	pool    *upPool
	observe func(time.Duration)
	bufs    *sync.Pool // *[]byte of 32 KiB: a response copy buffer
	// onError answers a failed upstream exchange; inj is what the
	// request carried, for the error's text to be scrubbed of.
	onError func(w http.ResponseWriter, r *http.Request, err error, inj Injected)
	// onScrub, when set, hears of each response part (where: "interim",
	// "header", "trailer") whose named headers held the credential.
	onScrub func(r *http.Request, where string, names []string)
	// stall, when set, is how long a write of the response to the
	// sandbox may wait: a sandbox that stops reading a long response
	// would otherwise hold the handler, its buffers, its tunnel and the
	// upstream connection forever, as no other timeout runs while a
	// response is written.
	stall time.Duration
}

// scrubbing is what the forwarder keeps from the sandbox on one
// response: the credential the request carried, in every header and, when
// body is set, in the body too.
type scrubbing struct {
	inj  Injected
	body bool
	// ws, set for a WebSocket handshake a rule allows, lets the
	// forwarder ask the upstream to upgrade and relay the frames, which
	// are scrubbed whatever body says.
	ws *webSocketGrant
	// renew, set for a token the proxy obtains from a token endpoint,
	// replaces the token in the header with a renewed one after an
	// upstream's 401 and returns what the response must then be scrubbed
	// of too; replay is the request's body, held whole to send again
	// (nil when it has none, or one too long to hold).
	renew  func(h http.Header) (Injected, error)
	replay []byte
	// mcp, set for a request to an MCP endpoint whose rules list tools,
	// has the tools lists of its answer cut to them (mcp.go).
	mcp *policy.MCPExchange
}

func newForwarder(scheme string, rt http.RoundTripper, onError func(http.ResponseWriter, *http.Request, error, Injected)) *forwarder {
	return &forwarder{
		scheme:  scheme,
		rt:      rt,
		bufs:    &sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }},
		onError: onError,
	}
}

// forward forwards r, whose header prepareHeader made, and keeps sc's
// credential out of the response. A failure after the response header
// was sent aborts the handler with http.ErrAbortHandler, so the client's
// connection is closed rather than a truncated body looking complete.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, sc scrubbing) {
	out := r.WithContext(r.Context())
	u := *r.URL
	u.Scheme, u.Host = f.scheme, r.Host
	u.RawQuery = cleanQuery(u.RawQuery)
	out.URL = &u
	out.RequestURI = "" // a client request must not carry one
	frameRequest(out)
	if out.Body != nil {
		// The transport closes a body it could not send; the inbound
		// body must stay open for the server, and the transport's writer
		// can outlive this handler, so reads after return fail.
		body := &noCloseBody{rc: out.Body}
		out.Body = body
		defer body.Close()
	}

	// 1xx responses (100 Continue, 103 Early Hints) are passed on as
	// they arrive, filtered as the final header is.
	got1xx := func(code int, header map[string][]string) {
		h := w.Header()
		for k, vv := range header {
			h[k] = append(h[k], vv...)
		}
		f.filterHeader(out, h, sc, "interim")
		f.extendWrite(w)
		w.WriteHeader(code)
		clear(h) // WriteHeader does not clear the map after a 1xx
	}
	res, conn, err := f.roundTrip(out, sc, got1xx)
	for sends := 1; err == nil && res.StatusCode == http.StatusUnauthorized && sc.renew != nil && sc.ws == nil && sends < maxRenewSends; sends++ {
		var again bool
		if res, conn, again, err = f.retryRenewed(out, res, conn, &sc, got1xx); !again {
			break
		}
	}
	if err != nil {
		f.onError(w, out, err, sc.inj)
		return
	}
	if res.StatusCode == http.StatusSwitchingProtocols && sc.ws != nil {
		f.upgrade(w, out, res, conn, sc)
		return
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		res.Body.Close()
		f.onError(w, out, errors.New("upstream switched protocols unasked"), sc.inj)
		return
	}
	var body io.Reader = res.Body
	if sc.body && !sc.inj.Empty() {
		if ce, ok := encoded(res.Header); ok {
			res.Body.Close()
			f.onError(w, out, fmt.Errorf("the upstream sent a body in the %q content coding, which the proxy cannot scrub of the credential", policy.Clip(ce)), sc.inj)
			return
		}
		bp := f.bufs.Get().(*[]byte)
		defer f.bufs.Put(bp)
		body = sc.inj.ScrubReader(res.Body, *bp)
	}
	if sc.mcp != nil {
		// After the scrubbing, so what the filter writes is scrubbed.
		if body, err = filterMCPAnswer(res, body, sc.mcp.Tools); err != nil {
			res.Body.Close()
			f.onError(w, out, err, sc.inj)
			return
		}
	}
	f.filterHeader(out, res.Header, sc, "header")
	h := w.Header()
	for k, vv := range res.Header {
		if len(h[k]) == 0 {
			h[k] = vv // res.Header is not used again but read
		} else {
			h[k] = append(h[k], vv...)
		}
	}
	// The transport moves Trailer into res.Trailer: announce it again,
	// less what the sandbox must not get (the values arrive after the
	// body, the names are known now).
	f.filterHeader(out, res.Trailer, sc, "trailer")
	var announced map[string]bool
	if len(res.Trailer) > 0 {
		announced = make(map[string]bool, len(res.Trailer))
		keys := make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			keys = append(keys, k)
			announced[k] = true
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	rc := http.NewResponseController(w)
	if f.stall > 0 {
		// Each write may wait this long (copyBody extends it), and so
		// may the flush of what is left once the handler returns; the
		// server sets the next request's deadline when it reads it.
		rc.SetWriteDeadline(time.Now().Add(f.stall))
		defer func() { rc.SetWriteDeadline(time.Now().Add(f.stall)) }()
	}
	w.WriteHeader(res.StatusCode)

	stream := res.ContentLength == -1 || isEventStream(res.Header.Get("Content-Type"))
	if stream {
		rc.Flush() // headers now: the body may take its time
	}
	if err := f.copyBody(w, rc, body, stream); err != nil {
		res.Body.Close()
		panic(http.ErrAbortHandler)
	}
	res.Body.Close() // fills res.Trailer
	f.filterHeader(out, res.Trailer, sc, "trailer")
	switch {
	case len(res.Trailer) > 0:
		// Force chunking, so net/http neither computes a Content-Length
		// for a short body nor drops the trailers.
		rc.Flush()
	case !stream && h.Get("Content-Length") != "":
		// The whole response is written: send it now, in the one write
		// the server would make once the handler returns, so the
		// sandbox does not wait for the request's log line and metrics.
		// Only where the length is announced: a flush without it would
		// make the server chunk the body.
		rc.Flush()
	}
	for k, vv := range res.Trailer {
		if announced[k] {
			h[k] = append(h[k], vv...)
			continue
		}
		for _, v := range vv {
			h.Add(http.TrailerPrefix+k, v)
		}
	}
}

// extendWrite gives the next write to the sandbox f.stall from now: a
// 1xx can come long after the request's header, which the server's own
// deadline runs from.
func (f *forwarder) extendWrite(w http.ResponseWriter) {
	if f.stall > 0 {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(f.stall))
	}
}

// filterHeader removes from an upstream's response header (interim,
// final or trailer) what the sandbox must not get: hop-by-hop headers,
// the upstream's own refusal header, so the sandbox only ever sees
// refusals this proxy made, and the credential the request carried, in
// the values and in the names.
func (f *forwarder) filterHeader(r *http.Request, h http.Header, sc scrubbing, where string) {
	if len(h) == 0 {
		return
	}
	stripHopByHop(h)
	deleteFold(h, policy.RefusedHeader)
	names := sc.inj.ScrubHeaderNames(h)
	names = append(names, sc.inj.ScrubHeader(h)...)
	if len(names) > 0 && f.onScrub != nil {
		f.onScrub(r, where, names)
	}
}

// copyBody copies src to w through a pooled buffer, flushing after each
// write when the response streams. It returns write errors and read
// errors other than EOF.
//
// Each write may wait f.stall, less at most a sixteenth of it: the write
// deadline moves on only once that much has passed since it was last
// set, not at every write. Setting it goes through the response's
// wrappers to the connection's timer, which for a download of 16 KiB
// records cost about as much as the rest of the proxy's own work on
// each.
func (f *forwarder) copyBody(w io.Writer, rc *http.ResponseController, src io.Reader, flush bool) error {
	bp := f.bufs.Get().(*[]byte)
	defer f.bufs.Put(bp)
	buf := *bp
	var set time.Time // when the write deadline was last set here
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			if f.stall > 0 {
				if now := time.Now(); now.Sub(set) >= f.stall/16 {
					rc.SetWriteDeadline(now.Add(f.stall))
					set = now
				}
			}
			nw, werr := w.Write(buf[:nr])
			if werr != nil {
				return werr
			}
			if nw != nr {
				return io.ErrShortWrite
			}
			if flush {
				if err := rc.Flush(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("reading the upstream response body: %w", rerr)
		}
	}
}

// encoded reports whether h declares a content coding other than
// identity, on any of its Content-Encoding lines (a client applies them
// all, not only the first), or a gRPC message coding (Grpc-Encoding: the
// messages of a gRPC body are compressed one by one), and returns it.
func encoded(h http.Header) (string, bool) {
	for k, vv := range h {
		if !strings.EqualFold(k, "Content-Encoding") && !strings.EqualFold(k, "Grpc-Encoding") {
			continue
		}
		for _, v := range vv {
			for c := range strings.SplitSeq(v, ",") {
				if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
					return c, true
				}
			}
		}
	}
	return "", false
}

// isEventStream reports a Server-Sent Events response, which is flushed
// as it comes like any response of unknown length. It compares the media
// type by hand: mime.ParseMediaType allocated a parameter map for every
// response, a tenth of the forwarder's garbage.
func isEventStream(ct string) bool {
	base, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(base), "text/event-stream")
}

// maxQueryParams is net/url's own limit on query parameters.
const maxQueryParams = 10000

// cleanQuery re-encodes a query that net/url cannot parse as is (a ';'
// separator, a bad %-escape, too many parameters), dropping what it
// cannot parse, as httputil.ReverseProxy does: the upstream then sees
// the same parameters the proxy would parse. A clean query is unchanged.
func cleanQuery(s string) string {
	reencode := func(s string) string {
		v, _ := url.ParseQuery(s)
		return v.Encode()
	}
	if s == "" {
		return s
	}
	if strings.Count(s, "&")+1 > maxQueryParams {
		return reencode(s)
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case ';':
			return reencode(s)
		case '%':
			if i+2 >= len(s) || !policy.IsHex(s[i+1]) || !policy.IsHex(s[i+2]) {
				return reencode(s)
			}
			i += 3
		default:
			i++
		}
	}
	return s
}

// roundTrip sends out once: bodiless GET and HEAD over the pool's fast
// path, anything else over the transport, with 1xx responses passed to
// got1xx as they arrive. conn is the upstream connection, off the fast
// path.
func (f *forwarder) roundTrip(out *http.Request, sc scrubbing, got1xx func(int, map[string][]string)) (res *http.Response, conn net.Conn, err error) {
	if f.pool != nil && sc.ws == nil && fastPath(out) {
		start := time.Now()
		res, err = f.pool.roundTrip(out, func(r1 *http.Response) { got1xx(r1.StatusCode, r1.Header) })
		if err == nil {
			f.observe(time.Since(start))
		}
		return res, nil, err
	}
	// The transport reports 1xx from its reader goroutine; done
	// stops that once the final response is in.
	var mu sync.Mutex
	done := false
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			mu.Lock()
			conn = info.Conn
			mu.Unlock()
		},
		Got1xxResponse: func(code int, header textproto.MIMEHeader) error {
			mu.Lock()
			defer mu.Unlock()
			if !done {
				got1xx(code, header)
			}
			return nil
		},
	}
	out.Close = closesAfter(out)
	res, err = f.rt.RoundTrip(out.WithContext(httptrace.WithClientTrace(out.Context(), trace)))
	mu.Lock()
	done = true
	c := conn
	mu.Unlock()
	if err == nil && c != nil && res.ProtoMajor == 1 && !framedByItself(out.Method, res.StatusCode) {
		// The Transport pools the connection after a 204 or a
		// 304, which end at their header: a body the upstream
		// sends anyway, after the next request was written, would
		// be read as that request's response. Closing it here
		// leaves the pool a dead connection, which the Transport
		// drops. (It is idle from the moment the response was
		// read, so a request taking it in the few microseconds
		// before this close fails rather than reading those
		// bytes, unless they arrive within them.) An HTTP/2
		// connection carries each response in a stream of its own,
		// which ends where the upstream ends it.
		c.Close()
	}
	return res, c, err
}

// maxRenewDrain bounds what of a 401's body is read so that its
// connection can carry the retry; a longer one closes the connection.
const maxRenewDrain = 64 << 10

// maxRenewSends bounds how many times one request is sent upstream with
// a token the proxy obtains: the first send and up to two after a 401.
// The second renewal serves a request slower than its token's life (an
// upstream or a proxy so loaded that the renewed token expired on the
// way, as two-second tokens can); the token cache's staleGap keeps an
// upstream that refuses every token to one renewal a second, so such an
// upstream mostly sees two sends.
const maxRenewSends = 3

// retryRenewed answers an upstream's 401 to a request carrying a token
// the proxy obtained from a token endpoint: the token may have been
// revoked or expired early, so the proxy renews it and sends the request
// again, when it can send the same request again: it has no body, or one
// the proxy still holds (sc.replay). again reports whether it sent the
// request again; otherwise, or when the renewal fails, the 401 goes back
// as it came.
func (f *forwarder) retryRenewed(out *http.Request, res *http.Response, conn net.Conn, sc *scrubbing, got1xx func(int, map[string][]string)) (_ *http.Response, _ net.Conn, again bool, _ error) {
	if out.Body != nil && out.Body != http.NoBody && sc.replay == nil {
		return res, conn, false, nil
	}
	inj, err := sc.renew(out.Header)
	if err != nil {
		return res, conn, false, nil
	}
	sc.inj.merge(inj)
	io.Copy(io.Discard, io.LimitReader(res.Body, maxRenewDrain))
	res.Body.Close()
	if sc.replay != nil {
		out.Body = io.NopCloser(bytes.NewReader(sc.replay))
	}
	res, conn, err = f.roundTrip(out, *sc, got1xx)
	return res, conn, true, err
}

// noCloseBody passes reads to the inbound body until closed; Close does
// not close the inbound body, which belongs to the server.
type noCloseBody struct {
	rc     io.ReadCloser
	closed atomic.Bool
}

// Read reads the inbound body, or fails once closed.
func (b *noCloseBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errors.New("read of the request body after the handler returned")
	}
	return b.rc.Read(p)
}

// Close marks the body closed; the inbound body stays open.
func (b *noCloseBody) Close() error {
	b.closed.Store(true)
	return nil
}
