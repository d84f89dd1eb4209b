package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// smuggleConfig allows every standard method on one path of
// api.github.com, and POST to the pulls collection; DELETE of the
// repository and anything under /capture are refused.
const smuggleConfig = configHead + `
  "hosts": [
    {"name": "api.github.com", "connection": "github-acme",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "pathPrefixes": ["/repos/acme/widgets/x"]},
               {"methods": ["POST"], "pathPrefixes": ["/repos/acme/widgets/pulls"]}]}
  ]
}`

// upRequest is one request an upstream parsed off a connection.
type upRequest struct {
	conn     int64
	method   string
	path     string
	cred     bool // its header carried the credential
	body     bool // its header announced a body
	echoCred bool // the body it echoed back held the credential
}

// bodyIgnoringUpstream serves requests on each connection as servers do
// that answer before reading a body: each is answered as soon as its
// header is in. With ignore set the body is never read, so the next
// request is parsed from where the body begins, as by servers that do
// not expect a body on some methods; else it is read and dropped after
// the answer. A request to /capture echoes its own body, which is
// whatever followed its header on the connection.
func bodyIgnoringUpstream(t *testing.T, ignore bool) (harnessOpt, func() []upRequest) {
	var mu sync.Mutex
	var seen []upRequest
	var ids atomic.Int64
	serve := func(c net.Conn) {
		id := ids.Add(1)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			r := upRequest{conn: id, method: req.Method, path: req.URL.Path,
				cred: holdsSecret(req.Header.Get("Authorization")), body: req.ContentLength != 0}
			var echo []byte
			if req.URL.Path == "/capture" {
				echo, _ = io.ReadAll(req.Body)
				r.echoCred = holdsSecret(string(echo))
			}
			mu.Lock()
			seen = append(seen, r)
			mu.Unlock()
			if req.Method == http.MethodHead {
				echo = nil
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Answer: %s %s\r\n\r\n%s", len(echo), req.Method, req.URL.Path, echo)
			if !ignore {
				io.Copy(io.Discard, req.Body)
			}
		}
	}
	up, _ := rawUpstreamConns(t, serve, "api.github.com")
	return up, func() []upRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]upRequest(nil), seen...)
	}
}

// TestServerBodySmuggling: a request body an upstream does not read is,
// to that upstream, the start of the next request on its connection. For
// every method that may carry a body, with the body framed by
// Content-Length or chunked, and against an upstream that ignores bodies
// or only answers before reading them, the sandbox sends a body that is
// itself a request prefix, then allowed requests. No request the proxy
// sends with the credential may follow a body on one upstream
// connection: the prefix must neither run a refused request with the
// credential nor swallow the proxy's next request, credential included,
// as its own body to be echoed back to the sandbox.
func TestServerBodySmuggling(t *testing.T) {
	prefixes := map[string]string{
		"capture the next request": "POST /capture HTTP/1.1\r\nHost: api.github.com\r\nContent-Length: 140\r\n\r\n",
		"run a refused DELETE":     "DELETE /repos/acme/widgets HTTP/1.1\r\nX-Ignore: ",
	}
	framings := map[string]func(body string) string{
		"Content-Length": func(body string) string {
			return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
		},
		"chunked": func(body string) string {
			return fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
		},
	}
	decided := map[string]bool{"POST /repos/acme/widgets/pulls": true}
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		decided[m+" /repos/acme/widgets/x"] = true
	}
	for _, ignore := range []bool{true, false} {
		mode := "upstream answers, then reads the body"
		if ignore {
			mode = "upstream ignores the body"
		}
		t.Run(mode, func(t *testing.T) {
			for _, method := range []string{"GET", "HEAD", "DELETE", "OPTIONS", "POST", "PUT", "PATCH"} {
				for fname, frame := range framings {
					for pname, prefix := range prefixes {
						t.Run(method+"/"+fname+"/"+pname, func(t *testing.T) {
							// A proxy and upstream of its own: a connection
							// one case left behind must not decide another.
							up, seen := bodyIgnoringUpstream(t, ignore)
							h := newHarnessConfig(t, smuggleConfig, up)
							c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
							defer c.Close()
							// Each answer, read whole; a failed exchange ends
							// the sequence, and what the upstream saw is
							// checked all the same.
							var got []string
							send := func(method, head string) bool {
								t.Helper()
								if _, err := io.WriteString(c, head); err != nil {
									t.Errorf("sending %s: %v", method, err)
									return false
								}
								resp, err := http.ReadResponse(br, &http.Request{Method: method})
								if err != nil {
									t.Errorf("reading the answer to %s: %v", method, err)
									return false
								}
								body, _ := io.ReadAll(resp.Body)
								resp.Body.Close()
								got = append(got, fmt.Sprintf("%s %v %s", resp.Status, resp.Header, body))
								if resp.StatusCode != http.StatusOK {
									t.Errorf("%s got %s: %s", method, resp.Status, body)
									return false
								}
								return true
							}
							c.SetDeadline(time.Now().Add(3 * time.Second))
							_ = send(method, method+" /repos/acme/widgets/x HTTP/1.1\r\nHost: api.github.com\r\n"+frame(prefix)) &&
								send("POST", "POST /repos/acme/widgets/pulls HTTP/1.1\r\nHost: api.github.com\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}") &&
								send("GET", "GET /repos/acme/widgets/x HTTP/1.1\r\nHost: api.github.com\r\n\r\n") &&
								send("POST", "POST /repos/acme/widgets/pulls HTTP/1.1\r\nHost: api.github.com\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
							for i, g := range got {
								if holdsSecret(g) {
									t.Errorf("answer %d handed the credential back: %s", i, g)
								}
								if !strings.Contains(g, "X-Answer") {
									t.Errorf("answer %d is not the upstream's answer to a request the proxy sent: %s", i, g)
								}
							}
							after := seen()
							tainted := map[int64]bool{}
							for _, r := range after {
								if r.cred && !decided[r.method+" "+r.path] {
									t.Errorf("the upstream ran %s %s with the credential, which the proxy never decided", r.method, r.path)
								}
								if r.echoCred {
									t.Errorf("the upstream read the proxy's next request, credential included, as the body of %s %s", r.method, r.path)
								}
								if r.cred && tainted[r.conn] {
									t.Errorf("%s %s with the credential followed a request body on upstream connection %d", r.method, r.path, r.conn)
								}
								if r.body || !decided[r.method+" "+r.path] {
									tainted[r.conn] = true
								}
							}
						})
					}
				}
			}
		})
	}
}
