package proxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// wsMessage is one message as the sandbox reads it, its frames joined.
type wsMessage struct {
	op   byte
	data string
}

// readMessages reads frames until a close or the connection's end and
// returns the data messages, each whole, and the close code (0: none).
// onMessage, when set, hears of each message as it completes.
func readMessages(t testing.TB, r io.Reader, onMessage func(wsMessage)) ([]wsMessage, uint16) {
	t.Helper()
	var fr wsFrameReader
	var msgs []wsMessage
	var cur *wsMessage
	for {
		h, err := fr.next(r)
		if err != nil {
			return msgs, 0
		}
		p := make([]byte, h.length)
		if _, err := io.ReadFull(r, p); err != nil {
			return msgs, 0
		}
		switch {
		case h.op == wsClose:
			code := uint16(0)
			if len(p) >= 2 {
				code = binary.BigEndian.Uint16(p)
			}
			if cur != nil {
				t.Errorf("a close inside a message")
			}
			return msgs, code
		case h.op >= wsClose:
			continue
		case h.op != wsContinuation:
			cur = &wsMessage{op: h.op}
		}
		cur.data += string(p)
		if h.fin {
			msgs = append(msgs, *cur)
			if onMessage != nil {
				onMessage(*cur)
			}
			cur = nil
		}
	}
}

// splitFrames is the upstream's bytes for the value v cut at k: in two
// messages (the second of op2), or in the two frames of one message.
func splitFrames(v string, k int, op2 byte, continuation bool) []byte {
	first, second := "m:"+v[:k], v[k:]+";"
	if continuation {
		b := appendFrameFin(nil, false, wsText, []byte(first), nil)
		return appendFrame(b, wsContinuation, []byte(second), nil)
	}
	return appendFrame(appendFrame(nil, wsText, []byte(first), nil), op2, []byte(second), nil)
}

// wantSplit is what the sandbox must read of splitFrames: the value
// masked in both messages, but for a start shorter than wsHoldMin, which
// goes on at once (and the rest is masked); in one message, masked
// whole.
func wantSplit(v string, k int, op2 byte, continuation bool) []wsMessage {
	stars := func(n int) string { return strings.Repeat("*", n) }
	if continuation { // one message, read whole
		return []wsMessage{{op: wsText, data: "m:" + stars(len(v)) + ";"}}
	}
	first := "m:" + stars(k)
	if k < wsHoldMin {
		first = "m:" + v[:k]
	}
	return []wsMessage{{op: wsText, data: first}, {op: op2, data: stars(len(v)-k) + ";"}}
}

// TestWSScrubSplit: the upstream's credential cut at every offset
// between two text messages, a text and a binary message, and the two
// frames of one message, relayed whole (read in one go) and a byte at a
// time: the sandbox reads it masked in both parts, the messages as they
// were sent.
func TestWSScrubSplit(t *testing.T) {
	in := injectedOf(canary)
	for _, tc := range []struct {
		name         string
		op2          byte
		continuation bool
	}{
		{name: "two text messages", op2: wsText},
		{name: "text then binary", op2: wsBinary},
		{name: "a continuation frame", continuation: true},
	} {
		for _, cuts := range [][]byte{nil, {1}} {
			t.Run(fmt.Sprintf("%s/reads of %v", tc.name, cuts), func(t *testing.T) {
				for k := 1; k < len(canary); k++ {
					data := splitFrames(canary, k, tc.op2, tc.continuation)
					data = appendFrame(data, wsClose, closePayload(1000, "bye"), nil)
					sb := &bufConn{}
					r := &wsRelay{sandbox: sb, upIn: bufio.NewReader(&cutReader{data: data, cuts: cuts}), sc: scrubbing{inj: in}, idle: time.Second}
					r.fromUpstream()
					got, code := readMessages(t, bytes.NewReader(sb.out.Bytes()), nil)
					if want := wantSplit(canary, k, tc.op2, tc.continuation); fmt.Sprint(got) != fmt.Sprint(want) || code != 1000 {
						t.Fatalf("cut at %d: the sandbox read %q (close %d), want %q", k, got, code, want)
					}
				}
			})
		}
	}
}

// TestWSScrubHeldThenClosed: the start of a value at a message's end,
// then a close (whose reason holds the rest) or a run of empty messages:
// the held bytes go to the sandbox masked, the messages in order.
func TestWSScrubHeldThenClosed(t *testing.T) {
	in := injectedOf(canary)
	const k = 10
	head := appendFrame(nil, wsText, []byte("m:"+canary[:k]), nil)
	// The empty messages come back empty, then the rest masked.
	empties := []wsMessage{{op: wsText, data: "m:**********"}}
	for range maxWSHeld + 1 {
		empties = append(empties, wsMessage{op: wsBinary})
	}
	tests := map[string]struct {
		then []byte
		want []wsMessage
	}{
		"a close with the rest as its reason": {
			then: appendFrame(nil, wsClose, closePayload(1000, canary[k:]), nil),
			want: []wsMessage{{op: wsText, data: "m:**********"}},
		},
		"empty messages past the cap, then the rest": {
			then: append(bytes.Repeat(appendFrame(nil, wsBinary, nil, nil), maxWSHeld+1),
				appendFrame(appendFrame(nil, wsText, []byte(canary[k:]), nil), wsClose, closePayload(1000, ""), nil)...),
			want: append(empties, wsMessage{op: wsText, data: strings.Repeat("*", len(canary)-k)}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sb := &bufConn{}
			r := &wsRelay{sandbox: sb, upIn: bufio.NewReader(bytes.NewReader(append(bytes.Clone(head), tc.then...))), sc: scrubbing{inj: in}, idle: time.Second}
			r.fromUpstream()
			got, code := readMessages(t, bytes.NewReader(sb.out.Bytes()), nil)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || code != 1000 {
				t.Fatalf("the sandbox read %q (close %d), want %q", got, code, tc.want)
			}
			if bytes.Contains(sb.out.Bytes(), []byte(canary[:wsHoldMin])) {
				t.Fatalf("the sandbox got the value's start: %q", sb.out.Bytes())
			}
		})
	}
}

// TestServerWebSocketSplitCredential: an upstream that echoes the
// credential cut between two messages, at every offset, between a text
// and a binary message, between the frames of one message, or cut and
// then idle: the sandbox reads it masked in every part, and a message
// whose end is held back still arrives, masked, while the upstream
// idles.
func TestServerWebSocketSplitCredential(t *testing.T) {
	tests := map[string]struct {
		op2          byte
		continuation bool
	}{
		"two text messages":    {op2: wsText},
		"text then binary":     {op2: wsBinary},
		"a continuation frame": {continuation: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opt, _ := wsRawUpstream(t, func(c net.Conn, br *bufio.Reader, req *http.Request) {
				switchTo(c, req)
				v := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
				var all []byte
				for k := 1; k < len(v); k++ {
					all = append(all, splitFrames(v, k, tc.op2, tc.continuation)...)
				}
				c.Write(appendFrame(all, wsClose, closePayload(1000, ""), nil))
				io.Copy(io.Discard, br)
			})
			h := newHarnessConfig(t, wsConfig, opt)
			c, br := openWebSocket(t, h)
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, code := readMessages(t, br, nil)
			var want []wsMessage
			for k := 1; k < len(canary); k++ {
				want = append(want, wantSplit(canary, k, tc.op2, tc.continuation)...)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || code != 1000 {
				t.Fatalf("the sandbox read %q (close %d), want %q", got, code, want)
			}
		})
	}

	t.Run("the first half, then idle", func(t *testing.T) {
		sent := make(chan struct{})
		opt, _ := wsRawUpstream(t, func(c net.Conn, br *bufio.Reader, req *http.Request) {
			switchTo(c, req)
			v := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
			c.Write(appendFrame(nil, wsText, []byte("m:"+v[:len(v)/2]), nil))
			<-sent // the sandbox has the first message
			c.Write(appendFrame(nil, wsText, []byte(v[len(v)/2:]+";"), nil))
			c.Write(appendFrame(nil, wsClose, closePayload(1000, ""), nil))
			io.Copy(io.Discard, br)
		})
		h := newHarnessConfig(t, wsConfig, opt)
		c, br := openWebSocket(t, h)
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		first := true
		got, code := readMessages(t, br, func(wsMessage) {
			if first {
				close(sent)
				first = false
			}
		})
		half := len(canary) / 2
		want := []wsMessage{{op: wsText, data: "m:" + strings.Repeat("*", half)}, {op: wsText, data: strings.Repeat("*", len(canary)-half) + ";"}}
		if fmt.Sprint(got) != fmt.Sprint(want) || code != 1000 {
			t.Fatalf("the sandbox read %q (close %d), want %q", got, code, want)
		}
	})
}

// TestWSScrubHoldsOnlyAValuesStart: a message goes to the sandbox whole
// at once unless it ends with wsHoldMin or more bytes that may begin a
// value; then all but those go at once, in a frame that does not end it.
func TestWSScrubHoldsOnlyAValuesStart(t *testing.T) {
	tests := map[string]struct {
		msg      string
		wantOut  []byte
		wantHeld bool
	}{
		"no value":                     {msg: "hello", wantOut: appendFrame(nil, wsText, []byte("hello"), nil)},
		"a whole value":                {msg: "m:" + canary, wantOut: appendFrame(nil, wsText, []byte("m:"+strings.Repeat("*", len(canary))), nil)},
		"a value's start, short":       {msg: "m:" + canary[:wsHoldMin-1], wantOut: appendFrame(nil, wsText, []byte("m:"+canary[:wsHoldMin-1]), nil)},
		"a value's start":              {msg: "m:" + canary[:wsHoldMin], wantOut: appendFrameFin(nil, false, wsText, []byte("m:"), nil), wantHeld: true},
		"a value's start, wrapped":     {msg: "m:" + canary[:2] + "\r\n" + canary[2:6], wantOut: appendFrameFin(nil, false, wsText, []byte("m:"), nil), wantHeld: true},
		"a value's start, blank line":  {msg: "m:" + canary[:6] + "\n\n", wantOut: appendFrame(nil, wsText, []byte("m:"+canary[:6]+"\n\n"), nil)},
		"a value's start, all of it":   {msg: canary[:10], wantOut: nil, wantHeld: true},
		"an empty message, after none": {msg: "", wantOut: appendFrame(nil, wsText, nil, nil)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWSScrub(injectedOf(canary))
			out := w.message(nil, wsText, append(w.begin(nil), tc.msg...))
			if !bytes.Equal(out, tc.wantOut) || w.holding() != tc.wantHeld {
				t.Fatalf("sent %q, holding %v; want %q, %v", out, w.holding(), tc.wantOut, tc.wantHeld)
			}
		})
	}
}
