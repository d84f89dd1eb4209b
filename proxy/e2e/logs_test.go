//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// logLine is one structured line the proxy wrote to stderr.
type logLine map[string]any

// str returns the string field k, or "".
func (l logLine) str(k string) string {
	s, _ := l[k].(string)
	return s
}

// logLines parses the proxy's stderr. Every non-empty line must be one
// JSON object: the proxy logs only structured lines.
func (w *world) logLines(t *testing.T) []logLine {
	t.Helper()
	var lines []logLine
	for _, raw := range strings.Split(w.proxy.stderr.String(), "\n") {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Errorf("the proxy wrote a line that is not a JSON object: %q", raw)
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// logQuery picks the request lines about one request. Empty fields match
// anything; path matches the start of the logged path.
type logQuery struct {
	host, method, path, decision, reason string
}

func (q logQuery) String() string {
	return fmt.Sprintf("host=%q method=%q path=%q decision=%q reason=%q", q.host, q.method, q.path, q.decision, q.reason)
}

func (q logQuery) matches(l logLine) bool {
	return l.str("reason") != "" &&
		(q.host == "" || l.str("host") == q.host) &&
		(q.method == "" || l.str("method") == q.method) &&
		(q.path == "" || strings.HasPrefix(l.str("path"), q.path)) &&
		(q.decision == "" || l.str("decision") == q.decision) &&
		(q.reason == "" || l.str("reason") == q.reason)
}

// findLogs returns the request lines matching q, waiting briefly because
// the proxy may log just after the client has its response.
func (w *world) findLogs(t *testing.T, q logQuery, atLeast int) []logLine {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		var out []logLine
		for _, l := range w.logLines(t) {
			if q.matches(l) {
				out = append(out, l)
			}
		}
		if len(out) >= atLeast || time.Now().After(deadline) {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wantLog fails unless at least one request line matches q.
func (w *world) wantLog(t *testing.T, q logQuery) {
	t.Helper()
	if len(w.findLogs(t, q, 1)) == 0 {
		t.Errorf("no proxy log line with %s", q)
	}
}

// TestLogLines checks the canonical request line: exactly one JSON line
// per request, with its decision and reason, for each kind of verdict.
func TestLogLines(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	tests := []struct {
		name  string
		url   string
		args  []string
		query logQuery
	}{
		{
			name:  "injected and forwarded",
			url:   "https://api.github.com/repos/acme/widgets/tags",
			query: logQuery{host: "api.github.com", method: "GET", path: "/repos/acme/widgets/tags", reason: "allowed"},
		},
		{
			name:  "refused by the rules",
			url:   "https://api.github.com/repos/acme/gadgets",
			query: logQuery{host: "api.github.com", method: "GET", path: "/repos/acme/gadgets", decision: "refuse", reason: "l7-not-allowed"},
		},
		{
			name:  "refused at CONNECT",
			url:   "https://unlisted.example/",
			query: logQuery{host: "unlisted.example", decision: "refuse", reason: "host-not-allowed"},
		},
		{
			name:  "Host names another host",
			url:   "https://api.github.com/repos/acme/widgets/forks",
			args:  []string{"-H", "Host: github.com"},
			query: logQuery{path: "/repos/acme/widgets/forks", decision: "refuse", reason: "host-mismatch"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w.curl(t, tc.url, tc.args...)
			got := w.findLogs(t, tc.query, 1)
			if len(got) != 1 {
				t.Fatalf("%d log lines with %s, want exactly 1\nstderr:\n%s", len(got), tc.query, w.proxy.stderr.String())
			}
		})
	}
}
