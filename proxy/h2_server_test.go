package proxy

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// h2Config adds grpc.example, an upstream that speaks HTTP/2, to the
// harness's config.
const h2Config = configHead + `
  "scrubResponseBodies": true,
  "hosts": [
    {"name": "api.github.com", "connection": "github-acme",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["GET", "HEAD"], "pathPrefixes": ["/repos/acme/widgets"]},
               {"methods": ["POST"], "pathPrefixes": ["/grpc.health.v1.Health"]}]},
    {"name": "grpc.example", "connection": "grpc",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["GET", "HEAD", "POST"], "pathPrefixes": ["/echo", "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"]}]}
  ]
}`

// h2Upstream is an upstream that speaks HTTP/2 (and HTTP/1.1), behind
// a CA of its own, which the harness's proxy trusts and reaches as
// grpc.example.
type h2Up struct {
	srv   *httptest.Server
	proto chan string
}

func newH2Up(t testing.TB, h http.Handler) (*h2Up, harnessOpt) {
	t.Helper()
	ca := newTestCA(t, "h2 upstream CA")
	u := &h2Up{proto: make(chan string, 64)}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case u.proto <- r.Proto:
		default:
		}
		h.ServeHTTP(w, r)
	}))
	u.srv.EnableHTTP2 = true
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "grpc.example")}}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	return u, func(o *Options) {
		o.UpstreamRoots.AddCert(ca.cert)
		o.Resolve["grpc.example:443"] = u.srv.Listener.Addr().String()
	}
}

// h2Client goes through the proxy and speaks HTTP/2 in its tunnels.
func (h *harness) h2Client() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: h.addr}),
			TLSClientConfig:   &tls.Config{RootCAs: h.sandbox.pool},
			ForceAttemptHTTP2: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

// TestH2UpstreamConnShared: the streams of one HTTP/2 upstream
// connection end where the upstream ends them, so a response that ends
// at its header (a 204, a HEAD's) does not close the connection under
// the streams it carries beside it.
func TestH2UpstreamConnShared(t *testing.T) {
	release := make(chan struct{})
	_, opt := newH2Up(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo/slow":
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			<-release
			io.WriteString(w, "done\n")
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	h := newHarnessConfig(t, h2Config, opt)
	c := h.h2Client()
	slow, err := c.Get("https://grpc.example/echo/slow")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Body.Close()
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequest(m, "https://grpc.example/echo/empty", nil)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, res)
		if res.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: %s", m, res.Status)
		}
	}
	close(release)
	if body := readBody(t, slow); body != "done\n" {
		t.Fatalf("the long response, beside two that ended at their header, ended as %q", body)
	}
}

// TestH2GRPCEncodingScrubbed: where response bodies are scrubbed, a gRPC
// answer compressed message by message (grpc-encoding) could hide the
// credential from the scrub, as a content coding could: the proxy asks
// for none, and refuses one it gets.
func TestH2GRPCEncodingScrubbed(t *testing.T) {
	asked := make(chan string, 1)
	_, opt := newH2Up(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- r.Header.Get("Grpc-Accept-Encoding")
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Encoding", "gzip")
		w.Write([]byte{1, 0, 0, 0, 3, 'x', 'y', 'z'})
	}))
	h := newHarnessConfig(t, h2Config, opt)
	req, _ := http.NewRequest(http.MethodPost, "https://grpc.example/grpc.health.v1.Health/Check", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Grpc-Accept-Encoding", "gzip")
	res, err := h.h2Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, res)
	if got := <-asked; got != "identity" {
		t.Errorf("the upstream was asked for grpc-accept-encoding %q, want identity", got)
	}
	if res.StatusCode != http.StatusBadGateway {
		t.Errorf("a gzip'd gRPC answer on a scrubbed host: %s, want 502", res.Status)
	}
}

// TestH2StreamCap: the streams served at once, all tunnels together,
// are capped at MaxTunnels, as the requests in flight are over HTTP/1.1;
// one more gets a 503, which a client may retry, and the cap frees as
// streams end.
func TestH2StreamCap(t *testing.T) {
	release := make(chan struct{})
	_, opt := newH2Up(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/echo/slow" {
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			<-release
		}
		io.WriteString(w, "ok\n")
	}))
	h := newHarnessConfig(t, h2Config, opt, func(o *Options) { o.MaxTunnels = 2 })
	c := h.h2Client()
	var open []*http.Response
	for range 2 {
		res, err := c.Get("https://grpc.example/echo/slow")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, res)
	}
	res, err := c.Get("https://grpc.example/echo")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, res)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get(policy.RefusedHeader) != "" {
		t.Fatalf("a third stream: %s %q, want 503 and no refusal header", res.Status, body)
	}
	close(release)
	for _, r := range open {
		readBody(t, r)
	}
	res, err = c.Get("https://grpc.example/echo")
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("after the streams ended: %s", res.Status)
	}
}

// echoHandler answers with what the request carried, in a header, the
// body and a trailer: what a hostile upstream would echo of the
// credential.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	auth := r.Header.Get("Authorization")
	w.Header().Set("Trailer", "Grpc-Status, X-Echo-Trailer")
	w.Header().Set("X-Echo", auth)
	w.Header().Set("X-Te", r.Header.Get("Te"))
	io.WriteString(w, "you sent "+auth+"\n")
	w.Header().Set("Grpc-Status", "0")
	w.Header().Set("X-Echo-Trailer", auth)
	w.Header().Set(http.TrailerPrefix+"X-Late", auth)
}

func TestH2TunnelInjects(t *testing.T) {
	up, opt := newH2Up(t, http.HandlerFunc(echoHandler))
	h := newHarnessConfig(t, h2Config, opt)
	c := h.h2Client()

	res, err := c.Get("https://grpc.example/echo")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, res)
	if res.ProtoMajor != 2 || res.StatusCode != http.StatusOK {
		t.Fatalf("got %s %s, want HTTP/2.0 200", res.Proto, res.Status)
	}
	if p := <-up.proto; p != "HTTP/2.0" {
		t.Errorf("the upstream got %s, want HTTP/2.0", p)
	}
	if body != "you sent Bearer "+strings.Repeat("*", len(canary))+"\n" {
		t.Errorf("body = %q", body)
	}
	all := body + fmtHeader(res.Header) + fmtHeader(res.Trailer)
	if strings.Contains(all, canary) {
		t.Fatalf("the credential reached the sandbox: %q", all)
	}
	if got := res.Trailer.Get("Grpc-Status"); got != "0" {
		t.Errorf("trailer Grpc-Status = %q, want 0 (trailers: %v)", got, res.Trailer)
	}
	if res.Header.Get("X-Echo") == "" || res.Trailer.Get("X-Echo-Trailer") == "" || res.Trailer.Get("X-Late") == "" {
		t.Errorf("the echoes were dropped rather than redacted: header %v trailer %v", res.Header, res.Trailer)
	}
	lines := h.logs.requests(t)
	if len(lines) != 2 || lines[1]["status"] != float64(200) || lines[1]["path"] != "/echo" || lines[1]["decision"] != "inject" {
		t.Errorf("request log = %v", lines)
	}
}

func TestH2TunnelToHTTP1Upstream(t *testing.T) {
	h := newHarnessConfig(t, h2Config)
	c := h.h2Client()
	res, err := c.Get("https://api.github.com/repos/acme/widgets")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, res)
	if res.ProtoMajor != 2 || res.StatusCode != http.StatusOK || !strings.Contains(body, "hello from api.github.com") {
		t.Fatalf("got %s %s %q", res.Proto, res.Status, body)
	}
	got := h.api.seen()
	if len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer "+canary {
		t.Fatalf("upstream saw %+v", got)
	}

	// A refusal is an HTTP/2 response, and the connection goes on.
	res, err = c.Get("https://api.github.com/orgs/acme")
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, res)
	if res.ProtoMajor != 2 || res.StatusCode != http.StatusForbidden || res.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) {
		t.Fatalf("refusal = %s %s %v", res.Proto, res.Status, res.Header)
	}
	res, err = c.Get("https://api.github.com/repos/acme/widgets/pulls")
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("after a refusal: %s", res.Status)
	}

	// gRPC cannot go over HTTP/1.1: refused, with a status a gRPC
	// client shows, and nothing reaches the upstream.
	req, _ := http.NewRequest(http.MethodPost, "https://api.github.com/grpc.health.v1.Health/Check", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body = readBody(t, res)
	if res.StatusCode != http.StatusOK || res.Header.Get("Grpc-Status") != "7" || res.Header.Get(policy.RefusedHeader) != string(policy.ReasonL7NotAllowed) || body != "" {
		t.Fatalf("gRPC to an HTTP/1.1 upstream = %s %v %q", res.Status, res.Header, body)
	}
	if msg := res.Header.Get("Grpc-Message"); !strings.Contains(msg, "does not speak HTTP/2") {
		t.Errorf("grpc-message = %q", msg)
	}
	if n := len(h.api.seen()); n != 2 {
		t.Errorf("upstream saw %d requests, want 2 (the gRPC one refused before it)", n)
	}
	lines := h.logs.requests(t)
	if last := lines[len(lines)-1]; last["status"] != float64(http.StatusForbidden) || last["reason"] != string(policy.ReasonL7NotAllowed) {
		t.Errorf("the refused gRPC request's log line = %v", last)
	}
}

func fmtHeader(h http.Header) string {
	var b strings.Builder
	h.Write(&b)
	return b.String()
}
