//go:build e2e

package e2e

import (
	"fmt"
	"testing"
)

// TestPathTricks sends request targets that a normalizing server would
// resolve inside or outside the allowed prefix /repos/acme/widgets. The
// proxy must refuse them as sent, never normalize them into an allowed
// path, and the upstream must see none of them. A raw TLS client sends the
// bytes exactly, where curl or a library would clean them up first.
func TestPathTricks(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	tests := map[string]struct {
		target string
	}{
		"dot-dot segments":               {target: "/repos/acme/widgets/../../../user"},
		"single dot segment":             {target: "/repos/acme/./widgets"},
		"encoded dot-dot":                {target: "/repos/acme/widgets/%2e%2e/%2e%2e/%2e%2e/user"},
		"mixed-case encoded dot-dot":     {target: "/repos/acme/widgets/%2E%2e/%2e%2E/%2e%2e/user"},
		"encoded slash":                  {target: "/repos/acme/widgets%2f..%2f..%2f..%2fuser"},
		"lowercase encoded slash":        {target: "/repos/acme/widgets/x%2F..%2F..%2Fuser"},
		"backslash":                      {target: "/repos/acme/widgets\\..\\..\\..\\user"},
		"encoded backslash":              {target: "/repos/acme/widgets/%5c..%5c..%5cuser"},
		"empty segment":                  {target: "/repos/acme/widgets//x"},
		"leading double slash":           {target: "//repos/acme/widgets"},
		"semicolon parameter":            {target: "/repos/acme/widgets;/../../../user"},
		"encoded NUL":                    {target: "/repos/acme/widgets/%00"},
		"raw overlong dot-dot":           {target: "/repos/acme/widgets/\xc0\xae\xc0\xae/\xc0\xae\xc0\xae/\xc0\xae\xc0\xae/user"},
		"encoded newline":                {target: "/repos/acme/widgets/%0d%0aX-Evil:%201"},
		"fullwidth dot-dot (NFKC)":       {target: "/repos/acme/widgets/%EF%BC%8E%EF%BC%8E/%EF%BC%8E%EF%BC%8E/%EF%BC%8E%EF%BC%8E/user"},
		"fragment":                       {target: "/repos/acme/widgets#/../../user"},
		"asterisk form":                  {target: "*"},
		"absolute form to the same host": {target: "https://api.github.com/repos/acme/widgets/../../../user"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(w.api.requests())
			c, br := w.mustTunnel(t, "api.github.com")
			resp := roundTrip(t, c, br, "GET", fmt.Sprintf("GET %s HTTP/1.1\r\nHost: api.github.com\r\n\r\n", tc.target))
			switch {
			case resp.StatusCode == 400:
				// The HTTP parser rejected the request line: also fine.
			default:
				wantRefused(t, tc.target, resp.StatusCode, resp.Header, 403, "l7-not-allowed")
			}
			if seen := w.api.requests()[before:]; len(seen) != 0 {
				t.Errorf("the upstream saw %q", seen[0].URI)
			}
		})
	}
}

// TestTunnelFraming sends what a hostile client might put on one tunnel:
// pipelined requests, ambiguous bodies, duplicate credentials. Every
// request is decided on its own, and nothing unchecked reaches the upstream.
func TestTunnelFraming(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	const allowed = "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n"
	const refused = "GET /user HTTP/1.1\r\nHost: api.github.com\r\n\r\n"
	tests := map[string]struct {
		raw string
		// codes are the statuses of the responses, in order.
		codes []int
		// upstream are the request URIs the upstream must see, in order.
		upstream []string
	}{
		"pipelined allowed then refused": {
			raw: allowed + refused, codes: []int{200, 403}, upstream: []string{"/repos/acme/widgets"},
		},
		"pipelined refused then allowed": {
			raw: refused + allowed, codes: []int{403, 200}, upstream: []string{"/repos/acme/widgets"},
		},
		"a refused request's body hides a request": {
			raw: "POST /user HTTP/1.1\r\nHost: api.github.com\r\nContent-Length: " +
				fmt.Sprint(len(refused)) + "\r\n\r\n" + refused + allowed,
			codes: []int{403, 200}, upstream: []string{"/repos/acme/widgets"},
		},
		// Chunked framing wins over Content-Length (RFC 9112 §6.3), so
		// the empty chunked body ends the POST and the smuggled GET is
		// decided on its own; the proxy re-frames what it forwards.
		"Content-Length and Transfer-Encoding together": {
			raw: "POST /repos/acme/widgets/pulls HTTP/1.1\r\nHost: api.github.com\r\nContent-Length: 4\r\n" +
				"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + refused,
			codes: []int{201, 403}, upstream: []string{"/repos/acme/widgets/pulls"},
		},
		"duplicate Host headers": {
			raw: "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nHost: github.com\r\n\r\n", codes: []int{400},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(w.api.requests())
			c, br := w.mustTunnel(t, "api.github.com")
			if _, err := c.Write([]byte(tc.raw)); err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.codes {
				resp, err := readResponse(br, "GET")
				if err != nil {
					t.Fatalf("response %d: %v", i+1, err)
				}
				if resp.StatusCode != want {
					t.Errorf("response %d: %d, want %d (%s %q)", i+1, resp.StatusCode, want, refusal, resp.Header.Get(refusal))
				}
			}
			var got []string
			for _, r := range w.api.requests()[before:] {
				got = append(got, r.URI)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.upstream) {
				t.Errorf("the upstream saw %q, want %q", got, tc.upstream)
			}
		})
	}

	t.Run("every casing and copy of Authorization is replaced", func(t *testing.T) {
		before := len(w.api.requests())
		res := w.curl(t, "https://api.github.com/repos/acme/widgets",
			"-H", "authorization: Bearer one", "-H", "AUTHORIZATION: token two", "-H", "Authorization: Basic dGhyZWU=")
		if res.code != 200 {
			t.Fatalf("status %d", res.code)
		}
		seen := w.api.requests()[before:]
		if len(seen) != 1 {
			t.Fatalf("the upstream saw %d requests", len(seen))
		}
		if got := seen[0].Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+w.token {
			t.Errorf("the upstream saw %d Authorization values, want only the injected one", len(got))
		}
	})
}
