package proxy

import (
	"io"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// requestLog writes the request lines by hand, byte for byte as
// slog.NewJSONHandler(w, nil) writes a LogAttrs record with the same
// message and attributes (TestRequestLineMatchesSlog holds it to that).
// Going through slog cost an attribute slice, a boxed float and a JSON
// encoder per request; this appends into a pooled buffer instead.
type requestLog struct {
	mu   sync.Mutex // one line per Write, whatever w is
	w    io.Writer
	bufs sync.Pool // *[]byte
}

// requestFields are a request line's fields, in the line's order.
type requestFields struct {
	sandbox, host, method, path, decision, reason, connection string
	// mcpTools, on a request to an MCP endpoint, are the tools its
	// tools/call messages name, comma-separated; empty, the field is
	// left out.
	mcpTools   string
	status     int
	durationMS float64
}

func newRequestLog(w io.Writer) *requestLog {
	return &requestLog{w: w, bufs: sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}}
}

// write writes one line stamped t.
func (l *requestLog) write(t time.Time, f requestFields) {
	bp := l.bufs.Get().(*[]byte)
	b := appendRequestLine((*bp)[:0], t, f)
	l.mu.Lock()
	l.w.Write(b)
	l.mu.Unlock()
	if cap(b) <= 16<<10 { // a freak long line is not kept
		*bp = b
		l.bufs.Put(bp)
	}
}

// appendRequestLine appends the JSON line, newline included.
func appendRequestLine(b []byte, t time.Time, f requestFields) []byte {
	b = append(b, `{"time":"`...)
	b = t.Round(0).AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"request","sandbox":`...)
	b = appendJSONString(b, f.sandbox)
	b = append(b, `,"host":`...)
	b = appendJSONString(b, f.host)
	b = append(b, `,"method":`...)
	b = appendJSONString(b, f.method)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, f.path)
	b = append(b, `,"decision":`...)
	b = appendJSONString(b, f.decision)
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, f.reason)
	b = append(b, `,"connection":`...)
	b = appendJSONString(b, f.connection)
	if f.mcpTools != "" {
		b = append(b, `,"mcpTools":`...)
		b = appendJSONString(b, f.mcpTools)
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(f.status), 10)
	b = append(b, `,"duration_ms":`...)
	b = appendJSONFloat(b, f.durationMS)
	return append(b, "}\n"...)
}

// appendJSONString appends s quoted as slog's JSON handler does: no HTML
// escaping, control bytes as \n, \r, \t or \u00XX, invalid UTF-8 as
// \ufffd, and U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json (which slog calls for
// floats) does: shortest form, exponent only outside [1e-6, 1e21).
// NaN and infinities, which JSON cannot hold, never occur here: a
// duration is finite.
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// RequestLine is what one request line of the proxy's log holds, as
// AppendRequestLine writes it.
type RequestLine struct {
	Sandbox, Host, Method, Path, Decision, Reason, Connection string
	Status                                                    int
	DurationMS                                                float64
}

// AppendRequestLine appends the JSON request line the proxy writes for
// l, stamped t, newline included: the proxy's own writer, for tools and
// tests that produce or read its log (keyhole suggest's tests write
// their logs with it, so the format they read is the one the proxy
// writes).
func AppendRequestLine(b []byte, t time.Time, l RequestLine) []byte {
	return appendRequestLine(b, t, requestFields{
		sandbox: l.Sandbox, host: l.Host, method: l.Method, path: l.Path,
		decision: l.Decision, reason: l.Reason, connection: l.Connection,
		status: l.Status, durationMS: l.DurationMS,
	})
}
