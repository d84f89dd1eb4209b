package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// TestServerOverrideFields: a method override carried in the query, a
// form body, a multipart part or a JSON field, on an allowed request,
// over real sockets. Each is refused l7-not-allowed before the upstream
// sees anything, with one log line; bodies without one go through byte
// for byte, and bodies no server reads fields from are not looked at.
func TestServerOverrideFields(t *testing.T) {
	h := newHarness(t)
	const lfs = "/acme/widgets.git/info/lfs/objects/batch"
	json := "Content-Type: application/json\r\n"
	lfsJSON := "Content-Type: application/vnd.git-lfs+json\r\n"
	form := "Content-Type: application/x-www-form-urlencoded\r\n"
	multi := "Content-Type: multipart/form-data; boundary=b\r\n"
	auth := "Authorization: Bearer omnia-injected-github\r\n"
	tests := map[string]struct {
		host, method, target string
		headers, body        string
		allowed              bool
	}{
		"_HttpMethod in the query":            {host: "uploads.github.com", method: "POST", target: "/repos/acme/widgets/pulls?_HttpMethod=DELETE", headers: json + auth, body: "{}"},
		"X-HTTP-Method-Override in the query": {host: "uploads.github.com", method: "POST", target: "/x?x-http-method-override=DELETE", headers: auth},
		"_method in a form body":              {host: "uploads.github.com", method: "POST", target: "/x", headers: form + auth, body: "title=t&_method=DELETE"},
		"_method in a body without a type":    {host: "uploads.github.com", method: "POST", target: "/x", headers: auth, body: "_method=DELETE"},
		"_method in a JSON body":              {host: "uploads.github.com", method: "POST", target: "/x", headers: json + auth, body: `{"title":"t","_method":"DELETE"}`},
		"_method in a chunked JSON body":      {host: "uploads.github.com", method: "POST", target: "/x", headers: json + auth + "Transfer-Encoding: chunked\r\n", body: `{"_method":"DELETE"}`},
		"_method in a multipart part":         {host: "uploads.github.com", method: "POST", target: "/x", headers: multi + auth, body: "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n"},
		"_method beside a body rule's field":  {host: "github.com", method: "POST", target: lfs, headers: lfsJSON, body: `{"operation":"download","_method":"DELETE"}`},
		"escaped _method beside it":           {host: "github.com", method: "POST", target: lfs, headers: lfsJSON, body: `{"operation":"download","\u005fMETHOD":"DELETE"}`},
		"a gzip JSON body":                    {host: "uploads.github.com", method: "POST", target: "/x", headers: json + auth + "Content-Encoding: gzip\r\n", body: "\x1f\x8b\x08\x00"},
		"JSON that is not JSON":               {host: "uploads.github.com", method: "POST", target: "/x", headers: json + auth, body: `{"_method":"DELETE",}`},
		"a body rule's download":              {host: "github.com", method: "POST", target: lfs, headers: lfsJSON, body: `{"operation":"download"}`, allowed: true},
		"a JSON body":                         {host: "uploads.github.com", method: "POST", target: "/x", headers: json + auth, body: `{"title":"t","note":"_method=DELETE"}`, allowed: true},
		"a JSON-RPC method":                   {host: "uploads.github.com", method: "POST", target: "/x", headers: json + auth, body: `{"jsonrpc":"2.0","method":"tools/call"}`, allowed: true},
		"a form body":                         {host: "uploads.github.com", method: "POST", target: "/x", headers: form + auth, body: "title=t&method=x", allowed: true},
		"an octet-stream body":                {host: "uploads.github.com", method: "POST", target: "/x", headers: "Content-Type: application/octet-stream\r\n" + auth, body: "_method=DELETE", allowed: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before, linesBefore := len(h.api.seen()), len(h.logs.requests(t))
			c, br := h.tlsTunnel(tc.host, tc.host, false)
			defer c.Close()
			framed := fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(tc.body), tc.body)
			if strings.Contains(tc.headers, "chunked") {
				framed = fmt.Sprintf("\r\n%x\r\n%s\r\n0\r\n\r\n", len(tc.body), tc.body)
			}
			resp := roundTrip(t, c, br, tc.method+" "+tc.target+" HTTP/1.1\r\nHost: "+tc.host+"\r\n"+tc.headers+framed)
			seen := h.api.seen()[before:]
			if tc.allowed {
				if resp.StatusCode != 200 || len(seen) != 1 || seen[0].Body != tc.body || seen[0].URI != tc.target {
					t.Fatalf("%s; the upstream saw %+v; want the request forwarded as sent", resp.Status, seen)
				}
				if holdsSecret(seen[0].Body) || !holdsSecret(seen[0].Header.Get("Authorization")) {
					t.Errorf("the credential is not where it belongs")
				}
			} else {
				if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) {
					t.Fatalf("%s with %s %q, want 403 l7-not-allowed", resp.Status, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
				}
				if len(seen) != 0 {
					t.Fatalf("the upstream saw %d requests", len(seen))
				}
			}
			eventually(t, "the request's log line", func() bool { return len(h.logs.requests(t)) >= linesBefore+2 })
			lines := h.logs.requests(t)[linesBefore:]
			if len(lines) != 2 {
				t.Fatalf("%d request lines for a CONNECT and one request, want 2", len(lines))
			}
			want := map[bool]string{true: "allowed", false: "l7-not-allowed"}[tc.allowed]
			if l := lines[1]; l["host"] != tc.host || l["method"] != tc.method || l["reason"] != want {
				t.Errorf("request line %v, want %s %s %s", l, tc.method, tc.host, want)
			}
			if holdsSecret(h.logs.String()) {
				t.Errorf("the log holds the credential")
			}
		})
	}
}

// TestServerOverrideFieldsStreamed: a body too long to read before
// deciding (over policy.MaxBodyCheck, as an LLM prompt with images can
// be) is checked as it streams. One with an override field at its end
// is refused l7-not-allowed, and the upstream never has the whole of it:
// its last byte is held back until the scan is done. One without goes
// through byte for byte.
func TestServerOverrideFieldsStreamed(t *testing.T) {
	h := newHarness(t)
	pad := strings.Repeat("x", 3<<20)
	json := "Content-Type: application/json\r\n"
	tests := map[string]struct {
		headers, body string
		allowed       bool
	}{
		"JSON, _method last": {headers: json, body: `{"prompt":"` + pad + `","_method":"DELETE"}`},
		"form, _method last": {headers: "Content-Type: application/x-www-form-urlencoded\r\n", body: "a=" + pad + "&_method=DELETE"},
		"multipart, _method last": {headers: "Content-Type: multipart/form-data; boundary=b\r\n",
			body: "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n" + pad + "\r\n--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n"},
		"JSON, chunked, _method last": {headers: json + "Transfer-Encoding: chunked\r\n", body: `{"prompt":"` + pad + `","_method":"DELETE"}`},
		"JSON, a single-quoted name":  {headers: json, body: `{"prompt":"` + pad + `",'_method':'DELETE'}`},
		"JSON without one":            {headers: json, body: `{"model":"m","prompt":"` + pad + `","_methods":1}`, allowed: true},
		"JSON, chunked, without one":  {headers: json + "Transfer-Encoding: chunked\r\n", body: `{"prompt":"` + pad + `"}`, allowed: true},
		"octet-stream holding one":    {headers: "Content-Type: application/octet-stream\r\n", body: pad + "&_method=DELETE", allowed: true},
	}
	n := 0
	for name, tc := range tests {
		// Each case its own path: a refused case's cut-off request may
		// reach the upstream after its case has ended.
		n++
		uri := fmt.Sprintf("/x/%d", n)
		ours := func() []seen {
			var out []seen
			for _, s := range h.api.seen() {
				if s.URI == uri {
					out = append(out, s)
				}
			}
			return out
		}
		t.Run(name, func(t *testing.T) {
			c, br := h.tlsTunnel("uploads.github.com", "uploads.github.com", false)
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			framed := fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(tc.body), tc.body)
			if strings.Contains(tc.headers, "chunked") {
				framed = fmt.Sprintf("\r\n%x\r\n%s\r\n0\r\n\r\n", len(tc.body), tc.body)
			}
			resp := roundTrip(t, c, br, "POST "+uri+" HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Bearer omnia-injected-github\r\n"+tc.headers+framed)
			var seen []seen
			if tc.allowed {
				eventually(t, "the upstream's request", func() bool { return len(ours()) > 0 })
			} else {
				time.Sleep(100 * time.Millisecond) // what the upstream got, if anything
			}
			seen = ours()
			if tc.allowed {
				if resp.StatusCode != 200 || len(seen) != 1 || seen[0].Body != tc.body {
					t.Fatalf("%s; the upstream saw %d requests; want the body forwarded whole", resp.Status, len(seen))
				}
				return
			}
			if resp.StatusCode != 403 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) {
				t.Fatalf("%s with %s %q, want 403 l7-not-allowed", resp.Status, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
			}
			for _, s := range seen {
				if len(s.Body) >= len(tc.body) {
					t.Fatalf("the upstream got the whole body (%d bytes)", len(s.Body))
				}
			}
			lines := h.logs.requests(t)
			if l := lines[len(lines)-1]; l["method"] != "POST" || l["decision"] != "refuse" || l["reason"] != "l7-not-allowed" || l["status"] != float64(403) {
				t.Errorf("request line %v, want POST refused l7-not-allowed", l)
			}
		})
	}
}
