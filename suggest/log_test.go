package suggest

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"keyhole.dev/keyhole/proxy"
)

// line is a request line as the proxy writes it.
func line(sandbox, host, method, path, decision, reason string) string {
	return string(proxy.AppendRequestLine(nil, time.Date(2026, 11, 29, 23, 10, 0, 0, time.UTC), proxy.RequestLine{
		Sandbox: sandbox, Host: host, Method: method, Path: path, Decision: decision, Reason: reason, Status: 403, DurationMS: 0.5,
	}))
}

func TestReadLog(t *testing.T) {
	refused := line("agents/a", "api.github.com", "GET", "/user", "refuse", "l7-not-allowed")
	tests := map[string]struct {
		in                          string
		requests, refusals, skipped int
		path                        string
	}{
		"empty":                    {in: ""},
		"one refusal":              {in: refused, requests: 1, refusals: 1, path: "/user"},
		"no final newline":         {in: strings.TrimSuffix(refused, "\n"), requests: 1, refusals: 1, path: "/user"},
		"CRLF":                     {in: strings.ReplaceAll(refused, "\n", "\r\n"), requests: 1, refusals: 1, path: "/user"},
		"allowed":                  {in: line("agents/a", "h", "GET", "/", "inject", "allowed"), requests: 1},
		"audited in audit mode":    {in: line("agents/a", "api.github.com", "DELETE", "/orgs/acme", "audit", "l7-not-allowed"), requests: 1, refusals: 1, path: "/orgs/acme"},
		"kubectl --prefix":         {in: "[pod/p/proxy] " + refused, requests: 1, refusals: 1, path: "/user"},
		"kubectl --timestamps":     {in: "2026-11-29T23:10:00.000000000Z " + refused, requests: 1, refusals: 1, path: "/user"},
		"other event":              {in: `{"time":"2026-11-29T23:10:00Z","level":"INFO","msg":"listening","addr":":3128"}` + "\n", skipped: 1},
		"not JSON":                 {in: "panic: something else\n\tgoroutine 1\n", skipped: 2},
		"truncated":                {in: refused[:len(refused)/2] + "\n", skipped: 1},
		"NUL bytes":                {in: strings.Replace(refused, "/user", "/us\x00er", 1), skipped: 1},
		"escaped NUL in path":      {in: strings.Replace(refused, "/user", `/us\u0000er`, 1), requests: 1, refusals: 1, path: "/us\x00er"},
		"not UTF-8":                {in: strings.Replace(refused, "/user", "/us\xffer", 1), requests: 1, refusals: 1, path: "/us\ufffder"},
		"query cut":                {in: strings.Replace(refused, "/user", "/user?token=canary", 1), requests: 1, refusals: 1, path: "/user"},
		"fragment cut":             {in: strings.Replace(refused, "/user", "/user#canary", 1), requests: 1, refusals: 1, path: "/user"},
		"no status":                {in: strings.Replace(refused, `,"status":403`, "", 1), skipped: 1},
		"wrong types":              {in: strings.Replace(refused, `"GET"`, `7`, 1), skipped: 1},
		"huge line then a refusal": {in: strings.Repeat("x", 3*MaxLine) + "\n" + refused, requests: 1, refusals: 1, skipped: 1, path: "/user"},
		"huge final line":          {in: refused + strings.Repeat("x", 2*MaxLine), requests: 1, refusals: 1, skipped: 1, path: "/user"},
		"blank lines":              {in: "\n\n  \n" + refused, requests: 1, refusals: 1, path: "/user"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l, err := ReadLog(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if l.Requests != tc.requests || len(l.Refusals) != tc.refusals || l.Skipped != tc.skipped {
				t.Fatalf("requests %d, refusals %d, skipped %d; want %d, %d, %d", l.Requests, len(l.Refusals), l.Skipped, tc.requests, tc.refusals, tc.skipped)
			}
			if tc.refusals > 0 && l.Refusals[0].Path != tc.path {
				t.Fatalf("path %q, want %q", l.Refusals[0].Path, tc.path)
			}
		})
	}
}

func TestReadLogError(t *testing.T) {
	_, err := ReadLog(iotest.ErrReader(io.ErrUnexpectedEOF))
	if !errors.Is(err, ErrRead) {
		t.Fatalf("error %v, want ErrRead", err)
	}
}

func TestGroups(t *testing.T) {
	var b strings.Builder
	for _, l := range []struct{ sandbox, host, method, path, reason string }{
		{"agents/b", "api.github.com", "GET", "/b", "l7-not-allowed"},
		{"agents/a", "api.github.com", "POST", "/x", "l7-not-allowed"},
		{"agents/a", "api.github.com", "GET", "/z", "l7-not-allowed"},
		{"agents/a", "api.github.com", "GET", "/y", "l7-not-allowed"},
		{"agents/a", "api.github.com", "GET", "/z", "l7-not-allowed"},
		{"agents/a", "api.github.com", "GET", "/z", "host-mismatch"},
		{"agents/a", "pypi.org:443", "CONNECT", "", "host-not-allowed"},
	} {
		b.WriteString(line(l.sandbox, l.host, l.method, l.path, "refuse", l.reason))
	}
	l, err := ReadLog(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range l.Groups() {
		got = append(got, strings.Join([]string{g.Sandbox, g.Host, g.Reason, g.Method, strings.Join(g.Paths, ","), string(rune('0' + g.Count))}, " "))
	}
	want := []string{
		"agents/a api.github.com host-mismatch GET /z 1",
		"agents/a api.github.com l7-not-allowed GET /y,/z 3",
		"agents/a api.github.com l7-not-allowed POST /x 1",
		"agents/a pypi.org:443 host-not-allowed CONNECT  1",
		"agents/b api.github.com l7-not-allowed GET /b 1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("groups:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// FuzzReadLog holds ReadLog to reading anything without a panic or a
// hang, and to reporting only what a line holds: every refusal's path is
// free of a query.
func FuzzReadLog(f *testing.F) {
	f.Add([]byte(line("agents/a", "api.github.com", "GET", "/user", "refuse", "l7-not-allowed")))
	f.Add([]byte("[pod/x] " + line("a", "h:443", "CONNECT", "", "refuse", "host-not-allowed")))
	f.Add([]byte("{\"time\":\x00\xff\n{}\n"))
	f.Add(bytes.Repeat([]byte("{\"time\":"), 1000))
	f.Fuzz(func(t *testing.T, in []byte) {
		l, err := ReadLog(bytes.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.Refusals {
			if strings.ContainsAny(r.Path, "?#") {
				t.Fatalf("path %q holds a query or fragment", r.Path)
			}
		}
		if n := bytes.Count(in, []byte("\n")) + 1; l.Requests+l.Skipped > n {
			t.Fatalf("%d lines counted in %d", l.Requests+l.Skipped, n)
		}
		l.Groups()
	})
}
