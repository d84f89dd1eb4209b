package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// bodyRuleConfig lets the sandbox reopen a pull request on api.github.com
// and nothing else: PATCH with "state" "open" only.
const bodyRuleConfig = configHead + `
  "hosts": [
    {"name": "api.github.com", "connection": "github-acme",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["PATCH"], "pathPatterns": ["/repos/acme/widgets/pulls/*"], "body": {"state": ["open"]}}]}
  ]
}`

// TestServerBodyRule sends bodies that some JSON reader upstream would
// read as "state": "closed" through the proxy over real sockets, each as
// raw bytes in a TLS tunnel, and checks that none reaches the upstream
// while the plain allowed body does, byte for byte, with the credential.
func TestServerBodyRule(t *testing.T) {
	h := newHarnessConfig(t, bodyRuleConfig)
	const target = "/repos/acme/widgets/pulls/7"
	tests := map[string]struct {
		headers string // extra header lines, each ending in \r\n
		body    string
		allowed bool
	}{
		"open":                   {headers: "Content-Type: application/json\r\n", body: `{"state":"open","title":"t"}`, allowed: true},
		"open, escaped name":     {headers: "Content-Type: application/json; charset=utf-8\r\n", body: `{"\u0073tate":"open"}`, allowed: true},
		"closed":                 {headers: "Content-Type: application/json\r\n", body: `{"state":"closed"}`},
		"long s":                 {headers: "Content-Type: application/json\r\n", body: `{"state":"open","ſtate":"closed"}`},
		"long s escaped":         {headers: "Content-Type: application/json\r\n", body: `{"state":"open","\u017ftate":"closed"}`},
		"kelvin in another name": {headers: "Content-Type: application/json\r\n", body: `{"state":"open","\u212aey":"x"}`},
		"upper case copy":        {headers: "Content-Type: application/json\r\n", body: `{"state":"open","STATE":"closed"}`},
		"first of two":           {headers: "Content-Type: application/json\r\n", body: `{"state":"closed","state":"open"}`},
		"snake copy":             {headers: "Content-Type: application/json\r\n", body: `{"state":"open","sta_te":"closed"}`},
		"NUL in name":            {headers: "Content-Type: application/json\r\n", body: `{"state":"open","state\u0000":"closed"}`},
		"byte order mark":        {headers: "Content-Type: application/json\r\n", body: "\xef\xbb\xbf{\"state\":\"open\"}"},
		"invalid UTF-8":          {headers: "Content-Type: application/json\r\n", body: "{\"state\":\"open\",\"t\":\"\xc0\xa2\"}"},
		"form polyglot":          {headers: "Content-Type: application/x-www-form-urlencoded\r\n", body: `{"state":"open","x":"&state=closed&"}`},
		"no content type":        {body: `{"state":"open","x":"&state=closed&"}`},
		"two content types":      {headers: "Content-Type: application/json\r\nContent-Type: application/x-www-form-urlencoded\r\n", body: `{"state":"open"}`},
		"content type dropped by Connection": {headers: "Content-Type: application/json\r\nConnection: Content-Type\r\n",
			body: `{"state":"open","x":"&state=closed&"}`},
		"gzip": {headers: "Content-Type: application/json\r\nContent-Encoding: gzip\r\n", body: `{"state":"open"}`},
		"chunked, long s": {headers: "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n",
			body: `{"state":"open","ſtate":"closed"}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(h.api.seen())
			c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
			defer c.Close()
			framing := fmt.Sprintf("Content-Length: %d\r\n", len(tc.body))
			payload := tc.body
			if strings.Contains(tc.headers, "Transfer-Encoding: chunked") {
				framing = ""
				payload = fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(tc.body), tc.body)
			}
			raw := "PATCH " + target + " HTTP/1.1\r\nHost: api.github.com\r\n" + tc.headers + framing + "\r\n" + payload
			resp := roundTrip(t, c, br, raw)
			got := h.api.seen()[before:]
			if !tc.allowed {
				if resp.StatusCode != http.StatusForbidden || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) {
					t.Fatalf("status %d %s=%q, want 403 l7-not-allowed", resp.StatusCode, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
				}
				if len(got) != 0 {
					t.Fatalf("the refused body reached the upstream: %q", got[0].Body)
				}
				return
			}
			if resp.StatusCode != http.StatusOK || len(got) != 1 {
				t.Fatalf("status %d, upstream saw %d requests; want 200 and 1", resp.StatusCode, len(got))
			}
			if got[0].Body != tc.body || got[0].Header.Get("Authorization") != "Bearer "+canary {
				t.Fatalf("upstream got body %q, Authorization %q", got[0].Body, got[0].Header.Get("Authorization"))
			}
			// The upstream reads what the proxy checked.
			var pr struct {
				State string `json:"state"`
			}
			if err := json.Unmarshal([]byte(got[0].Body), &pr); err != nil || pr.State != "open" {
				t.Fatalf("the upstream's encoding/json reads state %q, %v", pr.State, err)
			}
			if ct := got[0].Header.Values("Content-Type"); len(ct) != 1 {
				t.Fatalf("upstream Content-Type %q", ct)
			}
		})
	}
}

// TestServerExpectContinue: a client that sends Expect: 100-continue
// and waits gets the proxy's 100 before it sends the body, but the
// upstream gets nothing, the credential included, until the body has
// arrived and a rule has allowed it; a refused body never reaches it.
func TestServerExpectContinue(t *testing.T) {
	var arrived atomic.Int64
	var gotBody atomic.Value
	up := withUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1) // on the request's header, before its body
		b, _ := io.ReadAll(r.Body)
		gotBody.Store(string(b))
	}), "api.github.com")
	h := newHarnessConfig(t, bodyRuleConfig, up)
	tests := map[string]struct {
		body   string
		status int
	}{
		"allowed body": {body: `{"state":"open"}`, status: http.StatusOK},
		"refused body": {body: `{"state":"closed"}`, status: http.StatusForbidden},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := arrived.Load()
			c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
			defer c.Close()
			fmt.Fprintf(c, "PATCH /repos/acme/widgets/pulls/7 HTTP/1.1\r\nHost: api.github.com\r\nContent-Type: application/json\r\n"+
				"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(tc.body))
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusContinue {
				t.Fatalf("got %v, %v; want 100 Continue before the body", resp, err)
			}
			time.Sleep(100 * time.Millisecond)
			if n := arrived.Load() - before; n != 0 {
				t.Fatalf("the upstream got the request before its body was checked")
			}
			io.WriteString(c, tc.body)
			// The upstream's own 100 may be passed on too: a client
			// takes any number of 1xx before the final response.
			for resp.StatusCode == http.StatusContinue {
				if resp, err = http.ReadResponse(br, nil); err != nil {
					t.Fatal(err)
				}
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("%s, want %d", resp.Status, tc.status)
			}
			want := int64(0)
			if tc.status == http.StatusOK {
				want = 1
				if b, _ := gotBody.Load().(string); b != tc.body {
					t.Errorf("the upstream got the body %q, want %q", b, tc.body)
				}
			}
			if n := arrived.Load() - before; n != want {
				t.Errorf("the upstream got %d requests, want %d", n, want)
			}
		})
	}
}
