package proxy

import (
	"bytes"
	"time"
)

// The upstream's messages are scrubbed as one stream: the scan of each
// message goes on from the end of the one before, so a value cut at a
// message's end and continued in the next (or in a continuation frame,
// or a text message then a binary one) is found whole and masked in
// both. Masking cannot take back what the sandbox already has, so a
// message that ends with the start of a value is not sent whole until
// the next message shows whether the value goes on:
//
//   - bytes that may begin a value are held back, as the body scrubber
//     holds them (the longest value less one byte at most, with the line
//     breaks among them), but only when there are wsHoldMin of them or
//     more: fewer are sent at once, and what follows is still scanned
//     with them, so at most wsHoldMin-1 bytes of a value's start, never
//     the rest, reach the sandbox;
//   - the message's other bytes go on at once, as a frame that does not
//     end it; its last frame, with the held bytes, goes when the next
//     data frame arrives (masked where it completes a value);
//   - when none arrives within wsHoldFor, when the upstream closes, or
//     when more than maxWSHeld messages wait, the held bytes are sent
//     each replaced by '*': the sandbox never gets the start of a value
//     the upstream may complete later.
const (
	wsHoldMin = 4
	wsHoldFor = 100 * time.Millisecond
	maxWSHeld = 64
)

// wsScrub is the scan of one direction's messages as one stream.
type wsScrub struct {
	s *scanner
	// tail is the end of the stream scanned so far, as it came: what
	// may begin a value. The sandbox has its first sent bytes.
	tail []byte
	sent int
	// queue are the messages not yet sent whole, oldest first; their
	// bytes left to send are the tail's after sent.
	queue []wsPending
	stars []byte
}

// wsPending is a message whose last bytes are held back.
type wsPending struct {
	op      byte
	left    int  // bytes not yet sent
	started bool // a frame of it was sent
}

func newWSScrub(in Injected) *wsScrub { return &wsScrub{s: in.scanner()} }

// begin starts a message's buffer: the tail, then the message.
func (w *wsScrub) begin(msg []byte) []byte { return append(msg, w.tail...) }

// message scans data, begin's tail followed by one whole message of op,
// and appends to out the frames the sandbox may have now; data is
// masked in place.
func (w *wsScrub) message(out []byte, op byte, data []byte) []byte {
	w.queue = append(w.queue, wsPending{op: op, left: len(data) - len(w.tail)})
	keep := len(data) - w.s.scan(data)
	cut := len(data)
	if from := max(keep, w.sent); len(data)-from >= wsHoldMin {
		cut = from
	}
	w.tail = append(w.tail[:0], data[keep:]...)
	w.s.maskOut(data[w.sent:cut], w.sent)
	out = w.emit(out, data[w.sent:cut])
	w.sent = max(0, cut-keep)
	w.s.shift(keep)
	if len(w.queue) > maxWSHeld {
		out = w.release(out)
	}
	return out
}

// holding reports whether bytes are held back.
func (w *wsScrub) holding() bool { return len(w.queue) > 0 }

// release appends the frames that end the messages held back, their
// held bytes replaced by '*'. The tail stays as it came, so a value it
// begins is still found, and masked, in what follows.
func (w *wsScrub) release(out []byte) []byte {
	if !w.holding() {
		return out
	}
	w.stars = append(w.stars[:0], bytes.Repeat([]byte{'*'}, len(w.tail)-w.sent)...)
	out = w.emit(out, w.stars)
	w.sent = len(w.tail)
	return out
}

// emit appends frames carrying b, the next bytes of the queue's
// messages, each frame ending its message where b holds all of it.
func (w *wsScrub) emit(out, b []byte) []byte {
	for len(w.queue) > 0 {
		e := &w.queue[0]
		n := min(e.left, len(b))
		if n == 0 && e.left > 0 {
			break
		}
		e.left -= n
		op := e.op
		if e.started {
			op = wsContinuation
		}
		out = appendFrameFin(out, e.left == 0, op, b[:n], nil)
		e.started = true
		b = b[n:]
		if e.left > 0 {
			break
		}
		w.queue = append(w.queue[:0], w.queue[1:]...)
	}
	return out
}
