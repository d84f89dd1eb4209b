package proxy

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"keyhole.dev/keyhole/proxy/policy"
)

// maxLogText bounds text from a peer quoted in a log line, escapes
// included.
const maxLogText = 256

// logText makes text a peer sent safe to quote in a log line: printable
// ASCII kept (a backslash doubled), control bytes and invalid UTF-8
// escaped as \xNN and other characters as \uNNNN or \UNNNNNNNN, so no
// terminal or log viewer acts on it; cut to maxLogText bytes, escapes
// included, and marked "…" where cut.
func logText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch {
		case r == '\\':
			esc = `\\` // so an escape in the text cannot pass for one of ours
		case r >= 0x20 && r < 0x7f:
			esc = s[i : i+1]
		case r < utf8.RuneSelf || r == utf8.RuneError && size == 1:
			esc = fmt.Sprintf(`\x%02x`, s[i]) // a control byte, or not UTF-8
		case r <= 0xffff:
			esc = fmt.Sprintf(`\u%04x`, r)
		default:
			esc = fmt.Sprintf(`\U%08x`, r)
		}
		if b.Len()+len(esc) > maxLogText {
			b.WriteString("…")
			break
		}
		b.WriteString(esc)
		i += size
	}
	return b.String()
}

// logRequest writes the one log line of a request.
func (s *Server) logRequest(st *state, r *http.Request, d policy.Decision, status int, start time.Time) {
	// A refused CONNECT's decision names the host as sent, of any
	// length the header limit allows: clipped like every field the
	// sandbox chooses.
	host := d.Host
	if host == "" {
		host = r.Host
	}
	host = policy.Clip(host)
	s.metrics.request(s.metricHost(st, d.Host), d)
	sb := st.cfg.Sandbox
	sandbox := sb.Name
	if sb.Namespace != "" {
		sandbox = sb.Namespace + "/" + sb.Name
	}
	f := requestFields{
		sandbox: sandbox, host: host, method: policy.Clip(r.Method), path: logPath(r),
		decision: string(d.Action), reason: string(d.Reason), connection: d.Connection,
		status: status, durationMS: float64(time.Since(start).Microseconds()) / 1000,
	}
	if d.MCP != nil && len(d.MCP.Calls) > 0 {
		// Names the sandbox chose: clipped, as its path is.
		f.mcpTools = policy.Clip(strings.Join(d.MCP.Calls, ","))
	}
	if s.otlp != nil {
		s.otlp.add(time.Now(), f)
	}
	if s.reqLog != nil {
		s.reqLog.write(time.Now(), f)
		return
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", f.attrs()...)
}

// attrs are the request line's fields as slog writes them; the
// hand-written line (requestLog) matches their JSON byte for byte.
func (f requestFields) attrs() []slog.Attr {
	attrs := []slog.Attr{
		slog.String("sandbox", f.sandbox),
		slog.String("host", f.host),
		slog.String("method", f.method),
		slog.String("path", f.path),
		slog.String("decision", f.decision),
		slog.String("reason", f.reason),
		slog.String("connection", f.connection),
	}
	if f.mcpTools != "" {
		attrs = append(attrs, slog.String("mcpTools", f.mcpTools))
	}
	return append(attrs, slog.Int("status", f.status), slog.Float64("duration_ms", f.durationMS))
}

func (s *Server) metricHost(st *state, host string) string {
	if st.policy.Host(host) != nil {
		return host
	}
	if st.policy.Passthrough(strings.TrimSuffix(host, ":80")) {
		return strings.TrimSuffix(host, ":80")
	}
	return otherHost
}

// logPath is the request's path as sent, without query: queries may hold
// tokens the sandbox put there.
func logPath(r *http.Request) string {
	if r.Method == http.MethodConnect {
		return ""
	}
	p := r.RequestURI
	if _, rest, ok := strings.Cut(p, "://"); ok && !strings.HasPrefix(p, "/") {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			p = rest[i:]
		} else {
			p = "/"
		}
	}
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	const max = 256
	if len(p) > max {
		p = p[:max] + "…"
	}
	return p
}
