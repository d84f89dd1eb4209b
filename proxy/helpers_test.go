package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/proxylog"
	"keyhole.dev/keyhole/internal/testpki"

	"keyhole.dev/keyhole/proxy/policy"
)

// testCA is a CA made for a test, with its PEM files.
type testCA struct {
	*testpki.CA
	cert            *x509.Certificate
	certPEM, keyPEM []byte
	pool            *x509.CertPool
}

func newTestCA(t testing.TB, cn string) *testCA {
	t.Helper()
	c, err := testpki.NewCA(cn)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{CA: c, cert: c.Cert, certPEM: c.CertPEM, keyPEM: c.KeyPEM, pool: c.Pool()}
}

func (ca *testCA) leaf(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	leaf, err := ca.Leaf(names...)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// serve serves h over TLS on loopback with a leaf of ca for names, until
// t ends.
func (ca *testCA) serve(t testing.TB, h http.Handler, names ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, names...)}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func (ca *testCA) writeFiles(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeAtomic(t, certFile, ca.certPEM)
	writeAtomic(t, keyFile, ca.keyPEM)
	return certFile, keyFile
}

// writeAtomic replaces path by rename, as kubelet and editors do, so a
// polling reader never sees half a file.
func writeAtomic(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct{ proxylog.Buffer }

// requests returns the JSON log lines with msg "request".
func (s *syncBuffer) requests(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

// seen is one request an upstream received.
type seen struct {
	Host   string
	Method string
	URI    string
	Header http.Header
	Body   string
	// Trailer is the request's trailer, read after its body.
	Trailer http.Header
}

// upstream is a TLS server standing in for the real APIs.
type upstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func (u *upstream) seen() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.reqs...)
}

func newUpstream(t testing.TB, ca *testCA, names ...string) *upstream {
	u := &upstream{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{Host: r.Host, Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: string(body), Trailer: r.Trailer.Clone()})
		u.mu.Unlock()
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "https://evil.example/steal", http.StatusFound)
			return
		case "/refuses":
			w.Header().Set(policy.RefusedHeader, "l7-not-allowed")
		case "/slow":
			time.Sleep(300 * time.Millisecond)
		}
		fmt.Fprintf(w, "hello from %s %s\n", r.Host, r.URL.Path)
	})
	u.srv = httptest.NewUnstartedServer(h)
	if ca != nil {
		u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, names...)}}
		u.srv.StartTLS()
	} else {
		u.srv.Start()
	}
	t.Cleanup(u.srv.Close)
	return u
}

// harness is a running proxy wired to local upstreams.
type harness struct {
	t       testing.TB
	dir     string
	cfgPath string
	secrets *kubeSecret
	sandbox *testCA
	upCA    *testCA
	api     *upstream // api.github.com, github.com, uploads.github.com
	plain   *upstream // http pypi.org
	addr    string
	admin   string
	trans   string       // the transparent listener
	dnsUDP  string       // the DNS listener, UDP
	dnsTCP  string       // the DNS listener, TCP
	dstPort atomic.Int32 // the original port its connections report
	dstSelf atomic.Bool  // its connections report the listener itself: not redirected
	logs    *syncBuffer
	srv     *Server
	stop    context.CancelFunc
	done    chan error
}

// configHead opens a proxy config of the harness's sandbox,
// agents/support; each test's config goes on with its own fields and
// hosts.
const configHead = `{
  "apiVersion": "proxy.keyhole.dev/v1alpha1", "kind": "ProxyConfig",
  "sandbox": {"namespace": "agents", "name": "support"},`

const testConfig = configHead + `
  "hosts": [
    {"name": "api.github.com", "connection": "github-acme",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["GET", "HEAD"], "pathPrefixes": ["/repos/acme/widgets", "/redirect", "/refuses", "/slow"]}]},
    {"name": "github.com", "connection": "github-acme",
     "inject": {"secret": "acme-github-token", "basic": {"usernameKey": "user", "passwordKey": "token"}},
     "rules": [{"methods": ["GET"], "pathPatterns": ["/*/*/info/refs"]},
               {"methods": ["POST"], "pathPatterns": ["/*/*/git-upload-pack"]},
               {"methods": ["POST"], "pathPatterns": ["/*/*/info/lfs/objects/batch"], "body": {"operation": ["download"]}}]},
    {"name": "uploads.github.com", "connection": "github",
     "inject": {"secret": "acme-github-token", "substitute": {"placeholder": "omnia-injected-github", "key": "token"}}}
  ],
  "passthrough": ["pypi.org", "files.example"]
}`

type harnessOpt func(*Options)

func newHarness(t testing.TB, opts ...harnessOpt) *harness {
	t.Helper()
	return newHarnessConfig(t, testConfig, opts...)
}

// newHarnessConfig is newHarness with another proxy config; its hosts
// resolve to the same upstreams.
func newHarnessConfig(t testing.TB, cfg string, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), logs: &syncBuffer{}}
	h.sandbox = newTestCA(t, "sandbox egress CA")
	h.upCA = newTestCA(t, "upstream CA")
	h.api = newUpstream(t, h.upCA, "api.github.com", "github.com", "uploads.github.com", "pypi.org")
	h.plain = newUpstream(t, nil)
	h.cfgPath = filepath.Join(h.dir, "proxy.json")
	writeAtomic(t, h.cfgPath, []byte(cfg))
	caDir := filepath.Join(h.dir, "ca")
	os.Mkdir(caDir, 0o700)
	certFile, keyFile := h.sandbox.writeFiles(t, caDir)
	secretsDir := filepath.Join(h.dir, "secrets")
	h.secrets = newKubeSecret(t, filepath.Join(secretsDir, "acme-github-token"))
	h.secrets.write(map[string]string{"token": canary + "\n", "user": "x-access-token"})
	apiAddr := h.api.srv.Listener.Addr().String()
	o := Options{
		ConfigPath: h.cfgPath, SecretsDir: secretsDir, CACert: certFile, CAKey: keyFile,
		Resolve: map[string]string{
			"api.github.com:443": apiAddr, "github.com:443": apiAddr, "uploads.github.com:443": apiAddr,
			"pypi.org:443": apiAddr, "pypi.org:80": h.plain.srv.Listener.Addr().String(),
		},
		UpstreamRoots:  h.upCA.pool,
		ReloadInterval: 20 * time.Millisecond,
		Timeouts:       Timeouts{Shutdown: 5 * time.Second},
		Logger:         slog.New(slog.NewJSONHandler(h.logs, nil)),
		RequestLog:     h.logs,
	}
	for _, f := range opts {
		f(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	trans, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dnsUDP, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dnsTCP, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr, h.admin, h.trans = ln.Addr().String(), admin.Addr().String(), trans.Addr().String()
	h.dnsUDP, h.dnsTCP = dnsUDP.LocalAddr().String(), dnsTCP.Addr().String()
	// Only a real nat redirect gives an original destination: report
	// an address the proxy must never dial (TEST-NET-1) and the port
	// the test sets.
	h.dstPort.Store(443)
	srv.origDst = func(c net.Conn) (netip.AddrPort, error) {
		if h.dstSelf.Load() {
			return c.LocalAddr().(*net.TCPAddr).AddrPort(), nil
		}
		return netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), uint16(h.dstPort.Load())), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan error, 1)
	go func() {
		h.done <- srv.Serve(ctx, Listeners{Proxy: ln, Transparent: trans, Admin: admin, DNS: dnsUDP, DNSTCP: dnsTCP})
	}()
	t.Cleanup(func() { h.shutdown() })
	return h
}

func (h *harness) shutdown() error {
	h.stop()
	select {
	case err, ok := <-h.done:
		if ok {
			close(h.done)
		}
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("proxy did not shut down")
	}
	return nil
}

// client is an HTTP client that goes through the proxy and trusts only
// the sandbox CA (plus the upstream CA for passthrough hosts), as a
// sandbox does.
func (h *harness) client() *http.Client {
	roots := h.sandbox.pool.Clone()
	roots.AddCert(h.upCA.cert)
	return &http.Client{
		Transport: &http.Transport{
			Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: h.addr}),
			TLSClientConfig: &tls.Config{RootCAs: roots},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

// tunnel opens a CONNECT tunnel by hand and returns the raw connection
// and the proxy's response to the CONNECT.
func (h *harness) connect(target string) (net.Conn, *bufio.Reader, *http.Response) {
	h.t.Helper()
	c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
	if err != nil {
		h.t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		h.t.Fatal(err)
	}
	return c, br, resp
}

// tlsTunnel opens a CONNECT tunnel to host:443 and a TLS session in it
// with the given SNI, trusting the sandbox CA.
func (h *harness) tlsTunnel(host, sni string, insecure bool) (*tls.Conn, *bufio.Reader) {
	h.t.Helper()
	c, _, resp := h.connect(host + ":443")
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("CONNECT %s = %s", host, resp.Status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: h.sandbox.pool, InsecureSkipVerify: insecure, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		h.t.Fatalf("handshake in tunnel to %s: %v", host, err)
	}
	return tc, bufio.NewReader(tc)
}

// roundTrip writes a raw request on a tunnel and reads the response.
func roundTrip(t testing.TB, c net.Conn, br *bufio.Reader, raw string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp
}

func readBody(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fetch GETs url through the proxy with the harness's client and returns
// the response and its body.
func (h *harness) fetch(t testing.TB, url string) (*http.Response, string) {
	t.Helper()
	resp, err := h.client().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readBody(t, resp)
}

func (h *harness) get(path string) string {
	h.t.Helper()
	resp, err := http.Get("http://" + h.admin + path)
	if err != nil {
		h.t.Fatal(err)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, readBody(h.t, resp))
}

// eventually polls cond for up to 5s: for effects of file polling.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	// A liveness condition, not a timing one: the deadline only ends a
	// test that would otherwise wait for ever, so it is generous enough
	// for a loaded 2-core CI machine (a stalled-reader test there once
	// needed more than 5 s for eight tunnels to fill their buffers).
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func x509VerifyOpts(ca *testCA, name string) x509.VerifyOptions {
	return x509.VerifyOptions{Roots: ca.pool, DNSName: name}
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// ageSecrets backdates the mounted key files, as a proxy running for a
// while sees them, so the secret cache is in play.
func (h *harness) ageSecrets() {
	old := time.Now().Add(-time.Hour)
	for _, key := range []string{"token", "user"} {
		p, err := filepath.EvalSymlinks(filepath.Join(h.secrets.dir, key))
		if err != nil {
			h.t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			h.t.Fatal(err)
		}
	}
}
