package proxy

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// TestServerExpectContinueRefused: a request refused whatever its body
// holds is answered at once, without the 100 Continue its Expect asks
// for and without waiting for the body (RFC 9110, 15.2.1), and its
// connection is then closed, since the body it announced may or may not
// follow; an allowed request still gets its 100 Continue.
func TestServerExpectContinueRefused(t *testing.T) {
	h := newHarnessConfig(t, catalogRulesConfig)
	tests := map[string]struct {
		host, target, headers string
	}{
		"no rule for the path":           {host: "api.github.com", target: "/user"},
		"typed as a form":                {host: "api.github.com", target: "/user", headers: formCT},
		"typed as JSON":                  {host: "api.github.com", target: "/repos/acme/widgets/issues", headers: jsonCT},
		"a name decided on in the query": {host: "api.github.com", target: "/graphql?query=x", headers: jsonCT},
		"override in the query":          {host: "github.com", target: "/acme/widgets.git/git-upload-pack?_method=PUT", headers: formCT},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(h.api.seen())
			c, br := h.tlsTunnel(tc.host, tc.host, false)
			defer c.Close()
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", tc.target, tc.host, tc.headers)
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer without the body: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) {
				t.Fatalf("got %s %s=%q, want 403 l7-not-allowed at once", resp.Status, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
			}
			// The connection is closed: what follows on it cannot be
			// told apart from the body the request announced.
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("after the refusal the connection gave %v, want it closed", err)
			}
			if got := h.api.seen()[before:]; len(got) != 0 {
				t.Fatalf("the upstream got %d requests", len(got))
			}
		})
	}
	t.Run("allowed", func(t *testing.T) {
		const body = `{"query":"{ viewer { login } }"}`
		c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
		defer c.Close()
		fmt.Fprintf(c, "POST /graphql HTTP/1.1\r\nHost: api.github.com\r\n%sContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", jsonCT, len(body))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusContinue {
			t.Fatalf("got %v, %v; want 100 Continue", resp, err)
		}
		io.WriteString(c, body)
		for resp.StatusCode == http.StatusContinue {
			if resp, err = http.ReadResponse(br, nil); err != nil {
				t.Fatal(err)
			}
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("got %s, want 200", resp.Status)
		}
	})
}

// TestServerRefusedBodyNeverSent: a refused request that announces a
// body without Expect must send it, and net/http reads it after the
// handler to keep the connection; one that never sends it held the
// connection, and its tunnel slot, for as long as it stayed open. It now
// has Timeouts.ReadHeader to send it: then it gets its refusal and the
// connection is closed.
func TestServerRefusedBodyNeverSent(t *testing.T) {
	h := newHarnessConfig(t, catalogRulesConfig, func(o *Options) { o.Timeouts.ReadHeader = 300 * time.Millisecond })
	c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
	defer c.Close()
	fmt.Fprintf(c, "POST /user HTTP/1.1\r\nHost: api.github.com\r\nContent-Length: 5\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) {
		t.Fatalf("got %s %s=%q, want 403 l7-not-allowed", resp.Status, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal the connection gave %v, want it closed", err)
	}
	// A client that sends its body keeps its connection.
	c2, br2 := h.tlsTunnel("api.github.com", "api.github.com", false)
	defer c2.Close()
	for range 2 {
		resp := roundTrip(t, c2, br2, "POST /user HTTP/1.1\r\nHost: api.github.com\r\nContent-Length: 5\r\n\r\nhello")
		if resp.StatusCode != http.StatusForbidden || resp.Close {
			t.Fatalf("got %s (close %v), want 403 on a kept connection", resp.Status, resp.Close)
		}
	}
}
