package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"keyhole.dev/keyhole/proxy/policy"
)

// h2Field is one header field as the sandbox writes it, pseudo-headers
// included, in order.
type h2Field struct{ name, value string }

// h2Req is a request written frame by frame, as a hostile client would:
// no client library cleans it up first.
type h2Req struct {
	fields []h2Field
	data   []string  // DATA frames
	trail  []h2Field // a trailing HEADERS frame
	// pad, when set, adds a header of this many bytes, sent over
	// CONTINUATION frames.
	pad int
}

// h2Res is what came back on the stream.
type h2Res struct {
	status  string
	header  http.Header
	data    string
	trailer http.Header
	reset   http2.ErrCode // RST_STREAM's, or GOAWAY's for the connection
	goaway  bool
}

// all is everything the sandbox read, for the credential to be looked
// for in.
func (r h2Res) all() string {
	var b strings.Builder
	r.header.Write(&b)
	b.WriteString(r.data)
	r.trailer.Write(&b)
	return b.String()
}

// h2Tunnel opens a tunnel to host and speaks HTTP/2 in it, raw.
func (h *harness) h2Tunnel(host, sni string) (*tls.Conn, *http2.Framer) {
	h.t.Helper()
	c, _, resp := h.connect(host + ":443")
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("CONNECT %s = %s", host, resp.Status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: h.sandbox.pool, NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil {
		h.t.Fatalf("handshake: %v", err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		h.t.Fatalf("ALPN = %q, want h2", p)
	}
	io.WriteString(tc, http2.ClientPreface)
	fr := http2.NewFramer(tc, tc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 1 << 20
	fr.WriteSettings()
	return tc, fr
}

// h2Exchange writes req on stream 1 of fr and reads what comes back on
// it until the stream or the connection ends.
func h2Exchange(t testing.TB, fr *http2.Framer, req h2Req) h2Res {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range req.fields {
		enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value})
	}
	for i := 0; i < req.pad; i += 4 << 10 {
		enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d", i), Value: strings.Repeat("a", 4<<10)})
	}
	block := hb.Bytes()
	end := len(req.data) == 0 && len(req.trail) == 0
	const chunk = 16 << 10
	first := block[:min(len(block), chunk)]
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: end, EndHeaders: len(block) <= chunk})
	for rest := block[len(first):]; len(rest) > 0; {
		n := min(len(rest), chunk)
		fr.WriteContinuation(1, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	for i, d := range req.data {
		fr.WriteData(1, i == len(req.data)-1 && len(req.trail) == 0, []byte(d))
	}
	if len(req.trail) > 0 {
		hb.Reset()
		for _, f := range req.trail {
			enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
	}
	res := h2Res{header: http.Header{}, trailer: http.Header{}}
	var data strings.Builder
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				var se http2.StreamError
				if !errors.As(err, &se) {
					t.Logf("reading frames: %v", err)
				}
			}
			res.data = data.String()
			return res
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			st := f.PseudoValue("status")
			into := res.header
			if res.status != "" && !strings.HasPrefix(res.status, "1") {
				into = res.trailer
			}
			if st != "" {
				res.status = st
				if strings.HasPrefix(st, "1") {
					into = http.Header{} // interim: scanned, not kept
				}
			}
			for _, hf := range f.RegularFields() {
				into.Add(hf.Name, hf.Value)
				if strings.HasPrefix(st, "1") {
					res.header.Add("interim-"+hf.Name, hf.Value)
				}
			}
			if f.StreamEnded() {
				res.data = data.String()
				return res
			}
		case *http2.DataFrame:
			if f.StreamID != 1 {
				continue
			}
			data.Write(f.Data())
			if n := len(f.Data()); n > 0 {
				fr.WriteWindowUpdate(0, uint32(n))
				fr.WriteWindowUpdate(1, uint32(n))
			}
			if f.StreamEnded() {
				res.data = data.String()
				return res
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				res.reset = f.ErrCode
				res.data = data.String()
				return res
			}
		case *http2.GoAwayFrame:
			res.goaway = true
			if f.LastStreamID < 1 {
				res.reset = f.ErrCode
				res.data = data.String()
				return res
			}
		}
	}
}

// get is a request's pseudo-headers, then its other fields.
func h2Get(method, authority, path string, more ...h2Field) []h2Field {
	return append([]h2Field{{":method", method}, {":scheme", "https"}, {":authority", authority}, {":path", path}}, more...)
}

// TestH2Attacks ports the HTTP/1.1 attacks of attack_test.go and
// smuggle_test.go to HTTP/2, frame by frame: what would become framing
// over HTTP/1.1 (the upstreams here speak only HTTP/1.1) never reaches
// the upstream, the decision is the one HTTP/1.1 gets, and the credential
// never reaches the sandbox.
func TestH2Attacks(t *testing.T) {
	var seen sync.Map
	var mu sync.Mutex
	var paths []string
	echo := echoUpstream(&seen)
	h := newHarness(t, withUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path+" "+string(body))
		mu.Unlock()
		echo(w, r)
	}), "api.github.com", "uploads.github.com", "github.com"))
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: api.github.com\r\n\r\n"
	refused := func(reason policy.Reason) func(t *testing.T, r h2Res) {
		return func(t *testing.T, r h2Res) {
			if r.status != "403" || r.header.Get(policy.RefusedHeader) != string(reason) {
				t.Errorf("got %s (reset %v) %v, want 403 %s", r.status, r.reset, r.header, reason)
			}
		}
	}
	// malformed is what RFC 9113 8.1.1 asks of a malformed request: a
	// stream error, or a 400 before any handler.
	malformed := func(t *testing.T, r h2Res) {
		if r.status != "400" && r.reset != http2.ErrCodeProtocol && r.status != "431" {
			t.Errorf("got %q (reset %v), want 400 or a PROTOCOL_ERROR reset", r.status, r.reset)
		}
	}
	tests := map[string]struct {
		host     string // the tunnel's, and its SNI
		req      h2Req
		want     func(t *testing.T, r h2Res)
		upstream int // requests the upstream must see
	}{
		"allowed, a control": {host: "api.github.com", upstream: 1,
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets")},
			want: func(t *testing.T, r h2Res) {
				if r.status != "200" || !strings.Contains(r.data, "credential carried: true") {
					t.Errorf("got %s %q", r.status, r.data)
				}
				if r.header.Get("X-Echo-Authorization") != "Bearer [REDACTED]" || r.trailer.Get("X-Trailer-Authorization") != "Bearer [REDACTED]" ||
					r.trailer.Get("X-Late-Authorization") != "Bearer [REDACTED]" || r.header.Get("Interim-X-Echo-Authorization") != "Bearer [REDACTED]" {
					t.Errorf("echoes not redacted: header %v trailer %v", r.header, r.trailer)
				}
				if r.header.Get(policy.RefusedHeader) != "" || r.trailer.Get(policy.RefusedHeader) != "" {
					t.Errorf("the upstream's refusal header reached the sandbox: %v %v", r.header, r.trailer)
				}
			}},
		"te: trailers passes": {host: "api.github.com", upstream: 1,
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"te", "trailers"})},
			want: func(t *testing.T, r h2Res) {
				if r.status != "200" {
					t.Errorf("got %s (reset %v)", r.status, r.reset)
				}
			}},
		"transfer-encoding chunked": {host: "uploads.github.com", want: malformed,
			req: h2Req{fields: h2Get("POST", "uploads.github.com", "/x", h2Field{"transfer-encoding", "chunked"}), data: []string{"0\r\n\r\n" + smuggled}}},
		"connection":             {host: "api.github.com", want: malformed, req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"connection", "keep-alive"})}},
		"connection names auth":  {host: "api.github.com", want: malformed, req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"connection", "authorization"})}},
		"keep-alive":             {host: "api.github.com", want: malformed, req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"keep-alive", "timeout=5"})}},
		"proxy-connection":       {host: "api.github.com", want: malformed, req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"proxy-connection", "keep-alive"})}},
		"upgrade":                {host: "api.github.com", want: malformed, req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"upgrade", "websocket"})}},
		"te other than trailers": {host: "api.github.com", want: malformed, req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"te", "gzip"})}},
		"CRLF in a value": {host: "api.github.com", want: malformed,
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"x-a", "b\r\nAuthorization: x"})}},
		"LF in a value":  {host: "api.github.com", want: malformed, req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"x-a", "b\nGET /smuggled"})}},
		"NUL in a value": {host: "api.github.com", want: malformed, req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"x-a", "b\x00c"})}},
		"CRLF in the path": {host: "api.github.com", want: malformed,
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets HTTP/1.1\r\nHost: x\r\n\r\nGET /smuggled")}},
		"repeated :path": {host: "api.github.com", want: malformed,
			req: h2Req{fields: append(h2Get("GET", "api.github.com", "/repos/acme/widgets"), h2Field{":path", "/user"})}},
		"repeated :authority": {host: "api.github.com", want: malformed,
			req: h2Req{fields: []h2Field{{":method", "GET"}, {":scheme", "https"}, {":authority", "api.github.com"}, {":authority", "evil.example"}, {":path", "/repos/acme/widgets"}}}},
		"pseudo-header after a regular one": {host: "api.github.com", want: malformed,
			req: h2Req{fields: []h2Field{{":method", "GET"}, {":scheme", "https"}, {"x-a", "b"}, {":authority", "api.github.com"}, {":path", "/repos/acme/widgets"}}}},
		"upper-case name": {host: "api.github.com", want: malformed, req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"X-A", "b"})}},
		"content-length 0 with DATA": {host: "uploads.github.com",
			req: h2Req{fields: h2Get("POST", "uploads.github.com", "/x", h2Field{"content-length", "0"}), data: []string{smuggled}},
			want: func(t *testing.T, r h2Res) {
				if r.reset != http2.ErrCodeProtocol && r.status == "" {
					t.Errorf("got %s (reset %v)", r.status, r.reset)
				}
			}, upstream: -1},
		"content-length short of DATA": {host: "uploads.github.com",
			req: h2Req{fields: h2Get("POST", "uploads.github.com", "/x", h2Field{"content-length", "5"}), data: []string{"hello" + smuggled}},
			want: func(t *testing.T, r h2Res) {
				if r.status == "200" && r.reset == 0 {
					t.Errorf("got %s, want the stream reset", r.status)
				}
			}, upstream: -1},
		"content-length past DATA": {host: "uploads.github.com",
			req: h2Req{fields: h2Get("POST", "uploads.github.com", "/x", h2Field{"content-length", "500"}), data: []string{"hello"}},
			want: func(t *testing.T, r h2Res) {
				if r.status == "200" && r.reset == 0 {
					t.Errorf("got %s, want the stream reset", r.status)
				}
			}, upstream: -1},
		"Host header other than :authority": {host: "api.github.com", want: refused(policy.ReasonHostMismatch),
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"host", "evil.example"})}},
		"two Host headers": {host: "api.github.com", want: refused(policy.ReasonHostMismatch),
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"host", "api.github.com"}, h2Field{"host", "evil.example"})}},
		"Host header equal to :authority": {host: "api.github.com", upstream: 1,
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"host", "api.github.com"})},
			want: func(t *testing.T, r h2Res) {
				if r.status != "200" {
					t.Errorf("got %s", r.status)
				}
			}},
		":authority other than the tunnel's": {host: "uploads.github.com", want: refused(policy.ReasonHostMismatch),
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets")}},
		"no :authority, Host of another": {host: "uploads.github.com", want: refused(policy.ReasonHostMismatch),
			req: h2Req{fields: []h2Field{{":method", "GET"}, {":scheme", "https"}, {":path", "/repos/acme/widgets"}, {"host", "api.github.com"}}}},
		"userinfo in :authority": {host: "api.github.com", want: malformed,
			req: h2Req{fields: h2Get("GET", "x@api.github.com", "/repos/acme/widgets")}},
		"CONNECT": {host: "uploads.github.com", want: refused(policy.ReasonL7NotAllowed),
			req: h2Req{fields: []h2Field{{":method", "CONNECT"}, {":authority", "uploads.github.com:443"}}}},
		"extended CONNECT": {host: "uploads.github.com",
			req: h2Req{fields: []h2Field{{":method", "CONNECT"}, {":protocol", "websocket"}, {":scheme", "https"}, {":authority", "uploads.github.com"}, {":path", "/x"}}},
			want: func(t *testing.T, r h2Res) {
				if r.status != "403" && r.reset != http2.ErrCodeProtocol {
					t.Errorf("got %s (reset %v), want a refusal", r.status, r.reset)
				}
			}},
		"method override header": {host: "api.github.com", want: refused(policy.ReasonL7NotAllowed),
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"x-http-method-override", "DELETE"})}},
		"path override header": {host: "api.github.com", want: refused(policy.ReasonL7NotAllowed),
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets", h2Field{"x-original-url", "/user"})}},
		"_method in the query": {host: "api.github.com", want: refused(policy.ReasonL7NotAllowed),
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets?_method=DELETE")}},
		"a method no rule allows": {host: "api.github.com", want: refused(policy.ReasonL7NotAllowed),
			req: h2Req{fields: h2Get("DELETE", "api.github.com", "/repos/acme/widgets")}},
		"a path no rule allows": {host: "api.github.com", want: refused(policy.ReasonL7NotAllowed),
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets/../../../user")}},
		"override field in the body": {host: "github.com", want: refused(policy.ReasonL7NotAllowed),
			req: h2Req{fields: h2Get("POST", "github.com", "/acme/widgets/git-upload-pack", h2Field{"content-type", "application/x-www-form-urlencoded"}), data: []string{"_method=DELETE"}}},
		"header list past the cap": {host: "api.github.com",
			want: func(t *testing.T, r h2Res) {
				if r.status != "431" {
					t.Errorf("got %q (reset %v), want 431", r.status, r.reset)
				}
			},
			req: h2Req{fields: h2Get("GET", "api.github.com", "/repos/acme/widgets"), pad: maxHeaderBytes + 1024}},
		"request trailers dropped": {host: "uploads.github.com", upstream: 1,
			req: h2Req{fields: h2Get("POST", "uploads.github.com", "/x", h2Field{"trailer", "x-http-method-override"}), data: []string{"a"},
				trail: []h2Field{{"x-http-method-override", "DELETE"}}},
			want: func(t *testing.T, r h2Res) {
				if r.status != "200" {
					t.Errorf("got %s (reset %v)", r.status, r.reset)
				}
			}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			paths = nil
			mu.Unlock()
			c, fr := h.h2Tunnel(tc.host, tc.host)
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			res := h2Exchange(t, fr, tc.req)
			tc.want(t, res)
			if holdsSecret(res.all()) {
				t.Errorf("the credential reached the sandbox: %q", res.all())
			}
			c.Close()
			// The proxy's upstream request, if any, ends before the
			// handler does; give a refused one the time to not happen.
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			got := append([]string(nil), paths...)
			mu.Unlock()
			for _, p := range got {
				if strings.Contains(p, "/smuggled") || strings.Contains(p, "DELETE") || strings.Contains(p, "/user") {
					t.Errorf("the upstream saw %q", p)
				}
			}
			if tc.upstream >= 0 && len(got) != tc.upstream {
				t.Errorf("the upstream saw %d requests, want %d: %q", len(got), tc.upstream, got)
			}
		})
	}
}
