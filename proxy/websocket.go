package proxy

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"keyhole.dev/keyhole/proxy/policy"
)

// A WebSocket a rule allows (websocket: true) is decided and injected on
// its handshake, like any request; after the upstream's 101 the proxy
// relays frames both ways rather than bytes, so that it can keep the
// credential out of what the sandbox reads and hold each side to the
// limits below.

// The relay's limits. A message from the upstream is held whole, to be
// scrubbed of the credential before the sandbox gets any of it, and
// then copied into the frame that carries it on, so twice maxWSMessage
// is what one WebSocket can hold of the proxy's memory; the sandbox's
// frames are passed on as they arrive.
const (
	// maxWSMessage caps a message (all its frames) and so each frame,
	// either way.
	maxWSMessage = 1 << 20
	// maxWSControl is RFC 6455's cap on a control frame's payload.
	maxWSControl = 125
)

// The opcodes of RFC 6455, section 5.2.
const (
	wsContinuation = 0x0
	wsText         = 0x1
	wsBinary       = 0x2
	wsClose        = 0x8
	wsPing         = 0x9
	wsPong         = 0xa
)

// The close codes the proxy sends (RFC 6455, section 7.4.1).
const (
	wsCloseGoingAway       = 1001
	wsClosePolicyViolation = 1008
)

// wsGUID is RFC 6455's key suffix for Sec-WebSocket-Accept.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// webSocketGrant is what a handshake's decision lets the forwarder do:
// ask the upstream to upgrade, and relay while allowed still reports
// that the config in force allows it.
type webSocketGrant struct {
	allowed func() bool
	// onClose hears why the proxy closed the WebSocket; the text is the
	// proxy's own, never the peer's.
	onClose func(r *http.Request, why string)
}

// webSocketGrant is the grant of a handshake that st decided on info,
// injecting connection's credential: a config reloaded since is asked
// again (once per config) whether it still allows the upgrade with the
// same connection, and the WebSocket is closed when it does not.
func (s *Server) webSocketGrant(st *state, info policy.RequestInfo, connection string) *webSocketGrant {
	info.Header = nil // it holds the credential now; the handshake's own was checked
	var last atomic.Pointer[state]
	var ok atomic.Bool
	last.Store(st)
	ok.Store(true)
	return &webSocketGrant{
		allowed: func() bool {
			cur := s.state.Load()
			if last.Load() == cur {
				return ok.Load()
			}
			d := cur.policy.Decide(info)
			allowed := d.WebSocket && d.Connection == connection
			ok.Store(allowed)
			last.Store(cur)
			return allowed
		},
		onClose: func(r *http.Request, why string) {
			s.log.Warn("websocket closed by the proxy", "host", r.Host, "reason", logText(why))
		},
	}
}

// prepareWebSocket makes h, prepared for an allowed handshake, ask the
// upstream to upgrade to websocket. The sandbox's extension offer is
// dropped: a compressed frame (permessage-deflate) could hold the
// credential where the scrub cannot see it, so neither leg compresses.
func prepareWebSocket(h http.Header) {
	deleteFold(h, "Sec-WebSocket-Extensions")
	h["Connection"] = []string{"Upgrade"}
	h["Upgrade"] = []string{"websocket"}
}

// webSocketAccept is the Sec-WebSocket-Accept that answers key.
func webSocketAccept(key string) string {
	sum := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// checkUpgrade says why an upstream's 101 to the handshake out cannot
// be relayed, or "" when it can: it must switch to websocket, accept
// the key sent and name no extension, since none was offered.
func checkUpgrade(out *http.Request, res *http.Response) string {
	if !strings.EqualFold(strings.TrimSpace(res.Header.Get("Upgrade")), "websocket") {
		return "the upstream switched to another protocol than websocket"
	}
	if res.Header.Get("Sec-WebSocket-Accept") != webSocketAccept(out.Header.Get("Sec-WebSocket-Key")) {
		return "the upstream's Sec-WebSocket-Accept does not answer the handshake's key"
	}
	if len(res.Header.Values("Sec-WebSocket-Extensions")) > 0 {
		return "the upstream accepted a WebSocket extension that was not offered"
	}
	return ""
}

// upgrade answers the sandbox's handshake with the upstream's 101 and
// relays the WebSocket until either side ends it. upConn is the
// upstream connection, for its deadlines (nil: none are set).
func (f *forwarder) upgrade(w http.ResponseWriter, out *http.Request, res *http.Response, upConn net.Conn, sc scrubbing) {
	up, ok := res.Body.(io.ReadWriteCloser)
	if why := checkUpgrade(out, res); why != "" || !ok {
		res.Body.Close()
		if why == "" {
			why = "the upstream's switched connection cannot be written"
		}
		f.onError(w, out, errors.New(why), sc.inj)
		return
	}
	accept := res.Header.Get("Sec-WebSocket-Accept")
	f.filterHeader(out, res.Header, sc, "header")
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		f.onError(w, out, fmt.Errorf("taking over the sandbox's connection: %w", err), sc.inj)
		return
	}
	if rec, ok := w.(*statusRecorder); ok {
		rec.status = http.StatusSwitchingProtocols
	}
	conn.SetDeadline(time.Time{})
	r := &wsRelay{
		sandbox: conn, sandboxIn: brw.Reader,
		up: up, upConn: upConn, upIn: bufio.NewReaderSize(up, 16<<10),
		sc: sc, idle: f.stall, req: out, done: make(chan struct{}),
	}
	if r.idle <= 0 {
		r.idle = 90 * time.Second
	}
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
	res.Header.Del("Sec-WebSocket-Accept")
	res.Header.Write(&head)
	head.WriteString("Sec-WebSocket-Accept: " + accept + "\r\n\r\n")
	if err := r.writeSandbox(head.Bytes()); err != nil {
		r.closeAll()
		return
	}
	r.run()
}

// wsRelay relays one WebSocket between the sandbox and the upstream.
type wsRelay struct {
	sandbox   net.Conn
	sandboxIn *bufio.Reader
	up        io.ReadWriteCloser
	upConn    net.Conn
	upIn      *bufio.Reader
	sc        scrubbing
	idle      time.Duration
	req       *http.Request

	// ups scrubs the upstream's messages as one stream (nil: nothing to
	// scrub); upsMu orders its frames with those the hold timer sends,
	// and holdGen tells the timer whether what it was set for is still
	// held.
	ups     *wsScrub
	upsMu   sync.Mutex
	hold    *time.Timer
	holdGen uint64

	// sandboxMu and upMu serialize the writes to each side: frames and
	// the proxy's own close.
	sandboxMu, upMu sync.Mutex
	last            atomic.Int64 // unix nanos of the last frame either way
	once            sync.Once
	done            chan struct{}
}

// run relays until a side ends, the proxy finds a violation or the
// WebSocket idles, then closes both connections.
func (r *wsRelay) run() {
	r.touch()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.end(r.fromSandbox()) }()
	go func() { defer wg.Done(); r.end(r.fromUpstream()) }()
	t := time.NewTimer(r.idle)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			wg.Wait()
			return
		case <-t.C:
			since := time.Since(time.Unix(0, r.last.Load()))
			if since >= r.idle {
				r.end(&wsViolation{code: wsCloseGoingAway, why: fmt.Sprintf("no frame either way for %s", r.idle)})
				continue
			}
			t.Reset(r.idle - since)
		}
	}
}

func (r *wsRelay) touch() { r.last.Store(time.Now().UnixNano()) }

// wsViolation is the proxy's reason to close a WebSocket: sent to both
// sides in a close frame, and reported.
type wsViolation struct {
	code uint16
	why  string
}

func (v *wsViolation) Error() string { return v.why }

// end closes the WebSocket once: with a close frame to each side when
// err is a violation, then both connections.
func (r *wsRelay) end(err error) {
	r.once.Do(func() {
		var v *wsViolation
		if errors.As(err, &v) {
			if r.sc.ws != nil && r.sc.ws.onClose != nil {
				r.sc.ws.onClose(r.req, v.why)
			}
			payload := closePayload(v.code, "keyhole: "+v.why)
			// A side whose writer is stuck gets no close frame: its
			// connection is closed below, which ends the write.
			if r.sandboxMu.TryLock() {
				r.sandbox.SetWriteDeadline(time.Now().Add(time.Second))
				r.sandbox.Write(appendFrame(nil, wsClose, payload, nil))
				r.sandboxMu.Unlock()
			}
			if r.upMu.TryLock() {
				var key [4]byte
				rand.Read(key[:])
				if r.upConn != nil {
					r.upConn.SetWriteDeadline(time.Now().Add(time.Second))
				}
				r.up.Write(appendFrame(nil, wsClose, payload, &key))
				r.upMu.Unlock()
			}
		}
		r.closeAll()
		close(r.done)
	})
}

func (r *wsRelay) closeAll() {
	r.sandbox.Close()
	r.up.Close()
}

// closePayload is a close frame's payload: code, then reason cut to fit
// a control frame at a rune boundary.
func closePayload(code uint16, reason string) []byte {
	for len(reason) > maxWSControl-2 {
		_, n := utf8.DecodeLastRuneInString(reason)
		reason = reason[:len(reason)-n]
	}
	return append(binary.BigEndian.AppendUint16(nil, code), reason...)
}

func (r *wsRelay) writeSandbox(b []byte) error {
	r.sandboxMu.Lock()
	defer r.sandboxMu.Unlock()
	r.sandbox.SetWriteDeadline(time.Now().Add(r.idle))
	_, err := r.sandbox.Write(b)
	return err
}

// stillAllowed checks the config in force, which a reload may have
// changed since the handshake.
func (r *wsRelay) stillAllowed() error {
	if g := r.sc.ws; g != nil && g.allowed != nil && !g.allowed() {
		return &wsViolation{code: wsClosePolicyViolation, why: "the config no longer allows this WebSocket"}
	}
	return nil
}

// fromSandbox passes the sandbox's frames to the upstream as they
// arrive, header then payload, each checked first.
func (r *wsRelay) fromSandbox() error {
	var fr wsFrameReader
	fr.fromClient = true
	buf := make([]byte, 16<<10)
	for {
		h, err := fr.next(r.sandboxIn)
		if err != nil {
			return err
		}
		if err := r.stillAllowed(); err != nil {
			return err
		}
		r.touch()
		r.upMu.Lock()
		if r.upConn != nil {
			r.upConn.SetWriteDeadline(time.Now().Add(r.idle))
		}
		_, err = r.up.Write(h.raw)
		if err == nil {
			_, err = io.CopyBuffer(r.up, io.LimitReader(r.sandboxIn, h.length), buf)
		}
		r.upMu.Unlock()
		if err != nil {
			return err
		}
	}
}

// fromUpstream passes the upstream's messages to the sandbox, each read
// whole and scrubbed of the credential, with the scan going on from one
// message to the next (wsScrub); control frames are scrubbed on their
// own and passed on between a message's frames, as they come.
func (r *wsRelay) fromUpstream() error {
	var fr wsFrameReader
	var msg []byte
	var op byte
	scratch := make([]byte, 32<<10)
	var out []byte
	if !r.sc.inj.Empty() {
		r.ups = newWSScrub(r.sc.inj)
		defer r.stopHold()
	}
	for {
		h, err := fr.next(r.upIn)
		if err != nil {
			return err
		}
		if err := r.stillAllowed(); err != nil {
			return err
		}
		r.touch()
		start := len(msg)
		if h.op != wsContinuation && h.op < wsClose {
			op = h.op
			msg = msg[:0]
			if r.ups != nil {
				r.upsMu.Lock()
				msg = r.ups.begin(msg)
				r.upsMu.Unlock()
			}
			start = len(msg)
		}
		msg = slices.Grow(msg, int(h.length))[:start+int(h.length)]
		if _, err := io.ReadFull(r.upIn, msg[start:]); err != nil {
			return err
		}
		switch {
		case h.op >= wsClose:
			payload := r.scrub(msg[start:], scratch)
			msg = msg[:start]
			out = out[:0]
			if h.op == wsClose && r.ups != nil {
				// Nothing follows a close: what is held goes now.
				r.upsMu.Lock()
				r.holdGen++
				out = r.ups.release(out)
				r.upsMu.Unlock()
			}
			out = appendFrame(out, h.op, payload, nil)
			err = r.writeSandbox(out)
		case !h.fin:
			continue
		case r.ups != nil:
			err = r.sendScrubbed(out[:0], op, msg)
		default:
			err = r.writeSandbox(appendFrame(out[:0], op, msg, nil))
		}
		if h.fin && h.op < wsClose {
			msg = msg[:0]
			if cap(msg) > 64<<10 {
				msg = nil // a large message's buffer is not kept
			}
		}
		if err != nil {
			return err
		}
		if cap(out) > 64<<10 {
			out = nil
		}
	}
}

// sendScrubbed scans data (the stream's tail, then a whole message of
// op), sends the sandbox what it may have now, and sets the hold timer
// when bytes are held back.
func (r *wsRelay) sendScrubbed(out []byte, op byte, data []byte) error {
	r.upsMu.Lock()
	defer r.upsMu.Unlock()
	r.holdGen++
	if r.hold != nil {
		r.hold.Stop()
	}
	out = r.ups.message(out, op, data)
	if len(out) > 0 {
		if err := r.writeSandbox(out); err != nil {
			return err
		}
	}
	if r.ups.holding() {
		gen := r.holdGen
		r.hold = time.AfterFunc(wsHoldFor, func() { r.releaseHeld(gen) })
	}
	return nil
}

// releaseHeld sends what is held back, masked, when no data frame came
// for wsHoldFor since it was held (gen is still the generation).
func (r *wsRelay) releaseHeld(gen uint64) {
	r.upsMu.Lock()
	defer r.upsMu.Unlock()
	if gen != r.holdGen {
		return
	}
	if out := r.ups.release(nil); len(out) > 0 {
		if err := r.writeSandbox(out); err != nil {
			r.end(err)
		}
	}
}

// stopHold stops the hold timer: the relay of the upstream's frames is
// over.
func (r *wsRelay) stopHold() {
	r.upsMu.Lock()
	defer r.upsMu.Unlock()
	r.holdGen++
	if r.hold != nil {
		r.hold.Stop()
	}
}

// scrub masks the credential in p, in place (the scrub keeps lengths),
// with the reader that scrubs response bodies: in each of its encoded
// forms, and across line breaks.
func (r *wsRelay) scrub(p, scratch []byte) []byte {
	if r.sc.inj.Empty() || len(p) == 0 {
		return p
	}
	n, _ := io.ReadFull(r.sc.inj.ScrubReader(bytes.NewReader(p), scratch), p)
	return p[:n]
}

// appendFrame appends one final frame of op carrying payload to b,
// masked with key when key is set (a client's frame, to the upstream).
func appendFrame(b []byte, op byte, payload []byte, key *[4]byte) []byte {
	return appendFrameFin(b, true, op, payload, key)
}

// appendFrameFin is appendFrame for a frame that ends its message only
// when fin is set.
func appendFrameFin(b []byte, fin bool, op byte, payload []byte, key *[4]byte) []byte {
	if fin {
		op |= 0x80
	}
	b = append(b, op)
	var mask byte
	if key != nil {
		mask = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, mask|byte(n))
	case n <= 0xffff:
		b = append(b, mask|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, mask|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if key == nil {
		return append(b, payload...)
	}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}

// wsHeader is one frame's header as read.
type wsHeader struct {
	fin    bool
	op     byte
	length int64
	// raw is the header's bytes as sent, mask key included; it is
	// valid until the next read.
	raw []byte
}

// wsFrameReader reads the frames of one direction and holds them to
// RFC 6455 and to the proxy's caps: no extension bits (none is
// negotiated), known opcodes, control frames final and short, frames
// masked from the client and only from it, continuations only inside a
// message and a message's frames within maxWSMessage. It reads headers
// only; the caller reads each payload.
type wsFrameReader struct {
	fromClient bool
	inMessage  bool
	msgLen     int64
	hdr        [14]byte
}

// next reads the next frame's header, or says how the frame breaks the
// rules (a *wsViolation).
func (fr *wsFrameReader) next(r io.Reader) (wsHeader, error) {
	b := fr.hdr[:2]
	if _, err := io.ReadFull(r, b); err != nil {
		return wsHeader{}, err
	}
	h := wsHeader{fin: b[0]&0x80 != 0, op: b[0] & 0x0f}
	masked := b[1]&0x80 != 0
	n := int(2)
	switch l := b[1] & 0x7f; l {
	case 126:
		n += 2
	case 127:
		n += 8
	default:
		h.length = int64(l)
	}
	if masked {
		n += 4
	}
	if _, err := io.ReadFull(r, fr.hdr[2:n]); err != nil {
		return wsHeader{}, err
	}
	switch b[1] & 0x7f {
	case 126:
		h.length = int64(binary.BigEndian.Uint16(fr.hdr[2:4]))
	case 127:
		l := binary.BigEndian.Uint64(fr.hdr[2:10])
		if l > maxWSMessage {
			return h, fr.violation("a frame of more than %d bytes", maxWSMessage)
		}
		h.length = int64(l)
	}
	h.raw = fr.hdr[:n]
	switch {
	case b[0]&0x70 != 0:
		return h, fr.violation("a frame with reserved bits set: no extension is negotiated")
	case masked != fr.fromClient && fr.fromClient:
		return h, fr.violation("an unmasked frame from the client")
	case masked != fr.fromClient:
		return h, fr.violation("a masked frame from the server")
	case h.length > maxWSMessage:
		return h, fr.violation("a frame of more than %d bytes", maxWSMessage)
	}
	switch h.op {
	case wsClose, wsPing, wsPong:
		if !h.fin || h.length > maxWSControl {
			return h, fr.violation("a fragmented or long control frame")
		}
		return h, nil
	case wsText, wsBinary:
		if fr.inMessage {
			return h, fr.violation("a new message before the last one ended")
		}
		fr.msgLen = 0
	case wsContinuation:
		if !fr.inMessage {
			return h, fr.violation("a continuation frame outside a message")
		}
	default:
		return h, fr.violation("a frame of unknown opcode %d", h.op)
	}
	if fr.msgLen += h.length; fr.msgLen > maxWSMessage {
		return h, fr.violation("a message of more than %d bytes", maxWSMessage)
	}
	fr.inMessage = !h.fin
	return h, nil
}

func (fr *wsFrameReader) violation(format string, args ...any) error {
	who := "the upstream"
	if fr.fromClient {
		who = "the sandbox"
	}
	return &wsViolation{code: wsClosePolicyViolation, why: who + " sent " + fmt.Sprintf(format, args...)}
}
