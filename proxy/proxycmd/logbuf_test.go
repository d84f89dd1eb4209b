package proxycmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is an io.Writer safe for concurrent writers (the proxy's
// logging goroutines, the log buffer's flush timer); it counts its Write
// calls.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.b.Write(p)
}

func (s *syncBuffer) snapshot() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String(), s.writes
}

func (s *syncBuffer) String() string {
	out, _ := s.snapshot()
	return out
}

func TestLogBuffer(t *testing.T) {
	t.Run("lines wait for the interval, then go in one write", func(t *testing.T) {
		var out syncBuffer
		b := newLogBuffer(&out, 50*time.Millisecond)
		defer b.Close()
		for i := range 10 {
			fmt.Fprintf(b, "line %d\n", i)
		}
		if got, _ := out.snapshot(); got != "" {
			t.Fatalf("written before the interval: %q", got)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, writes := out.snapshot()
			if got != "" {
				if strings.Count(got, "\n") != 10 || writes != 1 {
					t.Fatalf("after the interval: %d writes of %q; want 1 write of 10 lines", writes, got)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("nothing written 5 s after a 50 ms interval")
			}
			time.Sleep(10 * time.Millisecond)
		}
		// A later line arms the timer again.
		fmt.Fprintln(b, "again")
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if got, _ := out.snapshot(); strings.HasSuffix(got, "again\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a line after the first flush was never written")
			}
		}
	})
	t.Run("a full buffer is written at once", func(t *testing.T) {
		var out syncBuffer
		b := newLogBuffer(&out, time.Hour)
		defer b.Close()
		line := strings.Repeat("x", 1023) + "\n"
		for range flushAt / len(line) {
			b.Write([]byte(line))
		}
		if got, writes := out.snapshot(); writes != 1 || len(got) != flushAt {
			t.Fatalf("%d writes, %d bytes; want 1 write of %d", writes, len(got), flushAt)
		}
	})
	t.Run("close flushes and later lines go straight through", func(t *testing.T) {
		var out syncBuffer
		b := newLogBuffer(&out, time.Hour)
		fmt.Fprintln(b, "before")
		b.Close()
		if got, _ := out.snapshot(); got != "before\n" {
			t.Fatalf("after Close: %q", got)
		}
		fmt.Fprintln(b, "after")
		if got, _ := out.snapshot(); got != "before\nafter\n" {
			t.Fatalf("a line after Close: %q", got)
		}
	})
	t.Run("interval zero writes each line", func(t *testing.T) {
		var out syncBuffer
		b := newLogBuffer(&out, 0)
		fmt.Fprintln(b, "a")
		fmt.Fprintln(b, "b")
		if got, writes := out.snapshot(); got != "a\nb\n" || writes != 2 {
			t.Fatalf("%d writes of %q", writes, got)
		}
	})
	t.Run("concurrent lines stay whole and each writer's stay in order", func(t *testing.T) {
		var out syncBuffer
		b := newLogBuffer(&out, time.Millisecond)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 2000 {
					fmt.Fprintf(b, "w%d %05d %s\n", w, i, strings.Repeat("y", 40))
				}
			}()
		}
		wg.Wait()
		b.Close()
		got, _ := out.snapshot()
		next := map[string]int{}
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if len(lines) != 8*2000 {
			t.Fatalf("%d lines, want %d", len(lines), 8*2000)
		}
		for _, l := range lines {
			var w string
			var i int
			if _, err := fmt.Sscanf(l, "%s %d", &w, &i); err != nil || len(l) != len(w)+1+5+1+40 {
				t.Fatalf("torn line %q", l)
			}
			if i != next[w] {
				t.Fatalf("writer %s: line %d after %d", w, i, next[w]-1)
			}
			next[w]++
		}
	})
}

// TestStdLogSink: net/http's reports through the standard logger become
// one JSON WARN event each, without what they quote.
func TestStdLogSink(t *testing.T) {
	tests := map[string]struct{ line, report string }{
		"bytes on an idle connection, quoted": {
			line:   "Unsolicited response received on idle HTTP channel starting with \"HTTP/1.1 200 OK\\r\\nX-Echo: Bearer ghp_secret\\r\\n\"; err=<nil>\n",
			report: "Unsolicited response received on idle HTTP channel starting with",
		},
		"nothing quoted":  {line: "http: a report\n", report: "http: a report"},
		"a quote at once": {line: "\"ghp_secret\"\n", report: ""},
		"a long report":   {line: strings.Repeat("x", 300) + "\n", report: strings.Repeat("x", 200)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			log.New(stdLogSink{slog.New(slog.NewJSONHandler(&out, nil))}, "", 0).Print(tc.line)
			var ev map[string]any
			if err := json.Unmarshal(out.Bytes(), &ev); err != nil {
				t.Fatalf("not one JSON line: %q", out.String())
			}
			if ev["level"] != "WARN" || ev["report"] != tc.report || strings.Contains(out.String(), "ghp_secret") {
				t.Fatalf("logged %q, want a WARN reporting %q and nothing quoted", out.String(), tc.report)
			}
		})
	}
}
