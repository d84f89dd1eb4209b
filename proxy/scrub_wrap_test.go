package proxy

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestServerScrubWrappedEcho: an upstream echoes the request's header
// block as base64 wrapped into lines (MIME's 76 characters and PEM's 64,
// each with CRLF and with LF), a line per write, so the proxy reads the
// echo line by line. The sandbox sends a header that sorts before
// Authorization, of every length that moves the credential through each
// position of a line at each of base64's alignments. With
// scrubResponseBodies, no echo the sandbox gets back, unwrapped and
// decoded at any alignment, holds the credential, and each is the
// upstream's echo with the credential's characters masked and its lines
// kept.
func TestServerScrubWrappedEcho(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(r.URL.Path, "/") // /repos/acme/widgets/echo/<n>/<eol>
		n, _ := strconv.Atoi(parts[5])
		eol := map[string]string{"crlf": "\r\n", "lf": "\n"}[parts[6]]
		var doc strings.Builder
		r.Header.Write(&doc) // sorted by name: A-Pad comes before Authorization
		body := wrapLines(base64.StdEncoding.EncodeToString([]byte(doc.String())), n, eol)
		for line := range strings.SplitAfterSeq(body, eol) {
			fmt.Fprint(w, line)
			w.(http.Flusher).Flush()
		}
	})
	h := newHarness(t, withUpstream(t, echo, "api.github.com"))
	cfg := strings.Replace(testConfig, `"passthrough"`, `"scrubResponseBodies": true, "passthrough"`, 1)
	writeAtomic(t, h.cfgPath, []byte(cfg))
	eventually(t, "the config with scrubResponseBodies", func() bool { return h.srv.state.Load().cfg.ScrubResponseBodies })
	c := h.client()
	readable := 0
	for _, wrap := range wrapStyles {
		name := map[string]string{"\r\n": "crlf", "\n": "lf"}[wrap.eol]
		for pad := range wrapPads + 1 {
			req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.github.com/repos/acme/widgets/echo/%d/%s", wrap.n, name), nil)
			req.Header.Set("A-Pad", strings.Repeat("p", pad))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readBody(t, resp)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d-character lines, pad %d: %s", wrap.n, pad, resp.Status)
			}
			unwrapped := strings.NewReplacer("\r", "", "\n", "").Replace(body)
			if decodesTo(unwrapped, canary) {
				readable++
				t.Errorf("%d-character lines with %s, pad %d: the echo decodes to the credential", wrap.n, name, pad)
			}
			// The echo came back, masked where the credential was and
			// otherwise whole: its lines and what is before the token.
			if !strings.Contains(unwrapped, "****") || strings.Count(body, wrap.eol) < 2 ||
				!decodesTo(unwrapped, "A-Pad: "+strings.Repeat("p", pad)) {
				t.Errorf("%d-character lines with %s, pad %d: not the upstream's echo, masked: %q", wrap.n, name, pad, body)
			}
			for line := range strings.SplitSeq(strings.TrimSuffix(body, wrap.eol), wrap.eol) {
				if len(line) > wrap.n {
					t.Errorf("%d-character lines with %s, pad %d: a line of %d", wrap.n, name, pad, len(line))
				}
			}
		}
	}
	if readable > 0 {
		t.Logf("%d of %d echoes decoded to the credential", readable, len(wrapStyles)*(wrapPads+1))
	}
	if strings.Contains(h.logs.String(), canary) {
		t.Fatal("the logs hold the credential")
	}
}
