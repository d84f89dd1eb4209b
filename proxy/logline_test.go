package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// slogRequestLine is the line slog.NewJSONHandler writes for f: the form
// the hand-written line must match byte for byte.
func slogRequestLine(t time.Time, f requestFields) []byte {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, nil)
	r := slog.NewRecord(t, slog.LevelInfo, "request", 0)
	r.AddAttrs(f.attrs()...)
	h.Handle(context.Background(), r)
	return buf.Bytes()
}

func TestRequestLineMatchesSlog(t *testing.T) {
	base := requestFields{sandbox: "agents/support", host: "api.github.com", method: "GET", path: "/repos/acme/widgets",
		decision: "inject", reason: "allowed", connection: "github-acme", status: 200, durationMS: 0.123}
	with := func(mod func(*requestFields)) requestFields { f := base; mod(&f); return f }
	when := time.Date(2026, 11, 30, 0, 21, 35, 123456789, time.UTC)
	tests := []struct {
		name string
		t    time.Time
		f    requestFields
	}{
		{"typical line", when, base},
		{"empty fields and zero duration", when, requestFields{status: 403}},
		{"whole-second time drops the fraction", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), base},
		{"time in another zone", when.In(time.FixedZone("X", -7*3600-30*60)), base},
		{"time with a monotonic reading", time.Now(), base},
		{"quotes, backslashes and control bytes", when, with(func(f *requestFields) { f.path = "/a\"b\\c\nd\re\tf\x00g\x1f\x7fh" })},
		{"HTML characters are not escaped", when, with(func(f *requestFields) { f.path = "/<script>&amp;" })},
		{"invalid UTF-8 becomes U+FFFD", when, with(func(f *requestFields) { f.host = "bad\xff\xfehost\xe2\x82" })},
		{"line and paragraph separators are escaped", when, with(func(f *requestFields) { f.path = "/a\u2028b\u2029c€日本" })},
		{"long duration", when, with(func(f *requestFields) { f.durationMS = 123456789.001 })},
		{"whole-number duration", when, with(func(f *requestFields) { f.durationMS = 5 })},
		{"tiny duration uses an exponent", when, with(func(f *requestFields) { f.durationMS = 1e-7 })},
		{"huge duration uses an exponent", when, with(func(f *requestFields) { f.durationMS = 2.5e22 })},
		{"MCP tools", when, with(func(f *requestFields) { f.mcpTools = "delete_repo,get_\"issue\u2028" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := appendRequestLine(nil, tt.t, tt.f)
			want := slogRequestLine(tt.t, tt.f)
			if !bytes.Equal(got, want) {
				t.Errorf("hand-written line differs from slog's:\n got %s\nwant %s", got, want)
			}
			var m map[string]any
			if err := json.Unmarshal(got, &m); err != nil {
				t.Errorf("line is not JSON: %v", err)
			}
		})
	}
}

func TestRequestLogWritesWholeLines(t *testing.T) {
	var buf syncBuffer
	l := newRequestLog(&buf)
	done := make(chan struct{})
	for i := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 50 {
				l.write(time.Now(), requestFields{host: strings.Repeat("h", i*100), status: 200})
			}
		}()
	}
	for range 4 {
		<-done
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 200 {
		t.Fatalf("%d lines, want 200", len(lines))
	}
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["msg"] != "request" {
			t.Fatalf("broken line %q: %v", line, err)
		}
	}
}

// FuzzRequestLine holds the hand-written line to slog's for any strings
// and durations.
func FuzzRequestLine(f *testing.F) {
	f.Add("/repos/acme/widgets", "api.github.com", "GET", 200, 0.123)
	f.Add("/a\"\\\n\x00\u2028<>&", "h\xff", "", 0, 1e-9)
	f.Fuzz(func(t *testing.T, path, host, method string, status int, d float64) {
		fields := requestFields{sandbox: "ns/sb", host: host, method: method, path: path, decision: "refuse",
			reason: "l7-not-allowed", connection: "c", status: status, durationMS: d}
		when := time.Unix(1764460000, 987654321).UTC()
		got := appendRequestLine(nil, when, fields)
		want := slogRequestLine(when, fields)
		if d != d || d > 1e308 || d < -1e308 {
			return // slog writes an error for NaN and infinities; a duration is never one
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("differs:\n got %s\nwant %s", got, want)
		}
	})
}

// BenchmarkRequestLine compares the hand-written line with slog's for
// the same record, both into a discarding writer.
func BenchmarkRequestLine(b *testing.B) {
	f := requestFields{sandbox: "agents/support", host: "api.github.com", method: "GET", path: "/repos/acme/widgets",
		decision: "inject", reason: "allowed", connection: "github-acme", status: 200, durationMS: 0.123}
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		l := newRequestLog(io.Discard)
		for b.Loop() {
			l.write(time.Now(), f)
		}
	})
	b.Run("slog", func(b *testing.B) {
		b.ReportAllocs()
		log := slog.New(slog.NewJSONHandler(io.Discard, nil))
		ctx := context.Background()
		for b.Loop() {
			log.LogAttrs(ctx, slog.LevelInfo, "request",
				slog.String("sandbox", f.sandbox), slog.String("host", f.host), slog.String("method", f.method),
				slog.String("path", f.path), slog.String("decision", f.decision), slog.String("reason", f.reason),
				slog.String("connection", f.connection), slog.Int("status", f.status), slog.Float64("duration_ms", f.durationMS))
		}
	})
}
