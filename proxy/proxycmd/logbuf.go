package proxycmd

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// logBuffer gathers the proxy's log lines and writes them in batches: at
// most interval after the first unwritten line, at once when flushAt
// bytes have gathered, and on Close. A write per request line was the
// proxy's third syscall per request (with the upstream's and the
// sandbox's), about 5% of its CPU; batching makes it one per flush.
// Envoy buffers its access log the same way (flushed every second).
//
// Every Write is one whole line (slog and the request log each write a
// line at a time), and lines are written in the order they came, so
// batching never splits or reorders them. What is lost if the process is
// killed outright is at most interval's worth of lines; a graceful stop
// flushes everything. With interval 0 every line is written at once.
type logBuffer struct {
	mu       sync.Mutex
	w        io.Writer
	buf      []byte
	interval time.Duration
	timer    *time.Timer // armed while buf holds lines; nil before the first
	closed   bool
}

// flushAt bounds the buffer: lines beyond it are written at once, so a
// burst costs memory only up to this much.
const flushAt = 64 << 10

func newLogBuffer(w io.Writer, interval time.Duration) *logBuffer {
	return &logBuffer{w: w, interval: interval}
}

// Write queues one line, or writes it straight through when batching is
// off or the buffer is closed.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.interval <= 0 || b.closed {
		return b.w.Write(p)
	}
	if len(b.buf) == 0 {
		if b.timer == nil {
			b.timer = time.AfterFunc(b.interval, b.Flush)
		} else {
			b.timer.Reset(b.interval)
		}
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= flushAt {
		b.flushLocked()
	}
	return len(p), nil
}

// Flush writes what is queued.
func (b *logBuffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *logBuffer) flushLocked() {
	if len(b.buf) == 0 {
		return
	}
	b.w.Write(b.buf)
	if cap(b.buf) > 4*flushAt { // a freak burst is not kept
		b.buf = nil
	} else {
		b.buf = b.buf[:0]
	}
}

// Close flushes and makes later writes go straight through, for the lines
// logged after the server has stopped.
func (b *logBuffer) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.flushLocked()
	b.closed = true
}

// stdLogSink takes the standard logger's lines (net/http's reports) and
// logs each as one WARN event, cut before its first quote: net/http
// quotes what a peer sent (%q), and what an upstream sent may echo the
// credential. What is kept is net/http's own words, at most 200 bytes.
type stdLogSink struct{ log *slog.Logger }

// Write logs p, one line of the standard logger.
func (s stdLogSink) Write(p []byte) (int, error) {
	msg, _, _ := strings.Cut(string(p), `"`)
	msg = strings.TrimSpace(msg)
	if len(msg) > 200 {
		msg = msg[:200]
	}
	s.log.Warn("net/http reported a problem; what it quoted is dropped", "report", msg)
	return len(p), nil
}
