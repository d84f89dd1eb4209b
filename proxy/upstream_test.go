package proxy

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// proxyCanary is the upstream proxy's password in these tests: it must
// reach the forward proxy and nothing else.
const proxyCanary = "PROXY-CANARY-4d2a91-do-not-leak"

// connectProxy is a forward proxy on loopback that answers CONNECT, as
// a corporate egress proxy does: it asks for basic credentials when
// wantAuth is set, records what it was asked for, and tunnels to the
// address routes maps a target to (or the target itself).
type connectProxy struct {
	ln       net.Listener
	wantAuth string            // the Proxy-Authorization it requires; "" requires none
	routes   map[string]string // target → address to dial
	answer   int               // when set, answers every CONNECT with this status
	hang     bool              // reads the CONNECT and never answers

	mu      sync.Mutex
	targets []string
	auths   []string
}

func newConnectProxy(t testing.TB, user, pass string) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{ln: ln, routes: map[string]string{}}
	if user != "" {
		p.wantAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.serve(c) }()
		}
	}()
	return p
}

// route makes the proxy tunnel a CONNECT to target to addr.
func (p *connectProxy) route(target, addr string) {
	p.mu.Lock()
	p.routes[target] = addr
	p.mu.Unlock()
}

func (p *connectProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *connectProxy) asked() (targets, auths []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...), append([]string(nil), p.auths...)
}

func (p *connectProxy) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.targets = append(p.targets, req.Host)
	p.auths = append(p.auths, req.Header.Get("Proxy-Authorization"))
	p.mu.Unlock()
	switch {
	case p.hang:
		io.Copy(io.Discard, br)
		return
	case req.Method != http.MethodConnect:
		io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return
	case p.wantAuth != "" && req.Header.Get("Proxy-Authorization") != p.wantAuth:
		io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 0\r\n\r\n")
		return
	case p.answer != 0:
		fmt.Fprintf(c, "HTTP/1.1 %d Refused\r\nContent-Length: 0\r\n\r\n", p.answer)
		return
	}
	to := req.Host
	p.mu.Lock()
	if r, ok := p.routes[to]; ok {
		to = r
	}
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", to, 5*time.Second)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	c.SetDeadline(time.Time{})
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{})
	go func() { io.Copy(up, br); up.(*net.TCPConn).CloseWrite(); close(done) }()
	io.Copy(c, up)
	<-done
}

// upstreamProxyConfig is testConfig's hosts behind an upstream proxy,
// plus extra fields of upstreamProxy.
func upstreamProxyConfig(proxyURL, extra string) string {
	const hosts = `"hosts": [
    {"name": "api.github.com", "connection": "github-acme",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}}},
    {"name": "git.corp.internal", "connection": "corp",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}}}
  ],
  "passthrough": ["pypi.org"],`
	return configHead + `
  ` + hosts + `
  "upstreamProxy": {"url": "` + proxyURL + `"` + extra + `}}`
}

// proxyAuthExtra is the auth of upstreamProxyConfig: Secret corp-proxy.
const proxyAuthExtra = `, "auth": {"secret": "corp-proxy", "usernameKey": "username", "passwordKey": "password"}`

// corpProxySecret mounts Secret corp-proxy beside the harness's.
func corpProxySecret(h *harness, pass string) {
	s := newKubeSecret(h.t, filepath.Join(h.dir, "secrets", "corp-proxy"))
	s.write(map[string]string{"username": "keyhole", "password": pass + "\n"})
}

// assertNoProxySecret fails when out holds the proxy's password or the
// header made of it.
func assertNoProxySecret(t testing.TB, what, out string) {
	t.Helper()
	for _, s := range []string{proxyCanary, base64.StdEncoding.EncodeToString([]byte("keyhole:" + proxyCanary))} {
		if strings.Contains(out, s) {
			t.Errorf("%s holds the upstream proxy's credential", what)
		}
	}
}

// TestServerUpstreamProxy: with upstreamProxy set, every upstream
// connection (an injected request on the pooled path and through the
// Transport, a passthrough CONNECT, a plain http:// request) is a CONNECT
// to the forward proxy carrying its basic credentials, with TLS to the
// real host inside, verified as without it; the credential is injected
// as usual. In resolve: local mode the forward proxy is asked for the
// address the proxy checked, never the name.
func TestServerUpstreamProxy(t *testing.T) {
	cp := newConnectProxy(t, "keyhole", proxyCanary)
	cfg := upstreamProxyConfig(cp.url(), proxyAuthExtra+`, "allowInternalAddress": true`)
	h := newHarnessConfig(t, cfg)
	corpProxySecret(h, proxyCanary)
	apiAddr := h.api.srv.Listener.Addr().String()
	c := h.client()
	t.Cleanup(c.CloseIdleConnections)

	resp, err := c.Get("https://api.github.com/repos/acme/widgets")
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); resp.StatusCode != 200 || !strings.Contains(body, "hello from api.github.com") {
		t.Fatalf("GET through the upstream proxy: %s %q", resp.Status, body)
	}
	resp, err = c.Post("https://api.github.com/repos/acme/widgets/issues", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if readBody(t, resp); resp.StatusCode != 200 {
		t.Fatalf("POST through the upstream proxy: %s", resp.Status)
	}
	seen := h.api.seen()
	if len(seen) != 2 || seen[0].Header.Get("Authorization") != "Bearer "+canary {
		t.Fatalf("the upstream did not get the injected credential: %+v", seen)
	}
	if got := seen[0].Header.Get("Proxy-Authorization"); got != "" {
		t.Errorf("the upstream got a Proxy-Authorization header")
	}
	// A passthrough tunnel, end to end TLS the upstream CA verifies.
	resp, err = c.Get("https://pypi.org/simple/")
	if err != nil {
		t.Fatal(err)
	}
	if readBody(t, resp); resp.StatusCode != 200 {
		t.Fatalf("passthrough through the upstream proxy: %s", resp.Status)
	}
	// A plain request to a passthrough host goes through a tunnel too.
	resp, err = c.Get("http://pypi.org/simple/")
	if err != nil {
		t.Fatal(err)
	}
	if readBody(t, resp); resp.StatusCode != 200 {
		t.Fatalf("plain request through the upstream proxy: %s", resp.Status)
	}
	targets, auths := cp.asked()
	want := map[string]bool{apiAddr: true, h.plain.srv.Listener.Addr().String(): true}
	for i, tg := range targets {
		if !want[tg] {
			t.Errorf("the upstream proxy was asked for %q; want only the checked addresses %v", tg, want)
		}
		if auths[i] != cp.wantAuth {
			t.Errorf("CONNECT %s carried the wrong Proxy-Authorization", tg)
		}
	}
	if len(targets) < 3 {
		t.Errorf("the upstream proxy was asked %d times, want one per upstream connection (3 or more): %v", len(targets), targets)
	}
	if m := h.get("/metrics"); !strings.Contains(m, `keyhole_proxy_upstream_proxy_connects_total{result="ok"}`) {
		t.Errorf("metrics lack the upstream proxy's connects:\n%s", m)
	}
	assertNoProxySecret(t, "the logs", h.logs.String())
}

// TestServerUpstreamProxyFailures: a forward proxy that asks for
// credentials, refuses a CONNECT, never answers or cannot be reached
// gets the sandbox a refusal upstream-proxy-failed (502) whose message
// says why, a log line with the cause and a count in the metrics, and
// neither the response nor the log holds the proxy's password.
func TestServerUpstreamProxyFailures(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String()
	closed.Close()
	tests := map[string]struct {
		setup     func(t *testing.T) (url, extra, pass string)
		cause     string
		inMessage string
	}{
		"wrong password (407)": {
			setup: func(t *testing.T) (string, string, string) {
				cp := newConnectProxy(t, "keyhole", "the-right-one")
				return cp.url(), proxyAuthExtra, proxyCanary
			},
			cause: upCauseAuth, inMessage: "refused the credentials of Secret corp-proxy (407)",
		},
		"no credentials configured (407)": {
			setup: func(t *testing.T) (string, string, string) {
				cp := newConnectProxy(t, "keyhole", proxyCanary)
				return cp.url(), "", proxyCanary
			},
			cause: upCauseAuth, inMessage: "names no auth",
		},
		"CONNECT refused": {
			setup: func(t *testing.T) (string, string, string) {
				cp := newConnectProxy(t, "", "")
				cp.answer = http.StatusForbidden
				return cp.url(), proxyAuthExtra, proxyCanary
			},
			cause: upCauseRefused, inMessage: "refused to CONNECT",
		},
		"never answers": {
			setup: func(t *testing.T) (string, string, string) {
				cp := newConnectProxy(t, "", "")
				cp.hang = true
				return cp.url(), proxyAuthExtra, proxyCanary
			},
			cause: upCauseTimeout, inMessage: "did not answer",
		},
		"unreachable": {
			setup: func(t *testing.T) (string, string, string) {
				return closedURL, "", ""
			},
			cause: upCauseUnreachable, inMessage: "cannot be reached",
		},
		"credentials unreadable": {
			setup: func(t *testing.T) (string, string, string) {
				cp := newConnectProxy(t, "keyhole", proxyCanary)
				return cp.url(), `, "auth": {"secret": "corp-proxy", "usernameKey": "username", "passwordKey": "no-such-key"}`, proxyCanary
			},
			cause: upCauseCredential, inMessage: "cannot read",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			url, extra, pass := tc.setup(t)
			h := newHarnessConfig(t, upstreamProxyConfig(url, extra+`, "allowInternalAddress": true`), func(o *Options) {
				o.Timeouts.Dial = 300 * time.Millisecond
			})
			if pass != "" {
				corpProxySecret(h, pass)
			}
			c := h.client()
			t.Cleanup(c.CloseIdleConnections)
			for _, u := range []string{"https://api.github.com/user", "https://pypi.org/simple/"} {
				resp, err := c.Get(u)
				if strings.HasPrefix(u, "https://pypi.org") {
					// A refused passthrough CONNECT fails the client.
					if err == nil || !strings.Contains(err.Error(), "Bad Gateway") {
						t.Errorf("GET %s through a failing upstream proxy: %v, want the CONNECT answered 502", u, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				body := readBody(t, resp)
				if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonUpstreamProxyFailed) {
					t.Fatalf("GET %s = %s %s %q, want 502 upstream-proxy-failed", u, resp.Status, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
				}
				if !strings.Contains(body, tc.inMessage) {
					t.Errorf("the refusal %q does not say %q", body, tc.inMessage)
				}
				assertNoProxySecret(t, "the refusal", body)
			}
			logs := h.logs.String()
			if !strings.Contains(logs, `"cause":"`+tc.cause+`"`) || !strings.Contains(logs, `"reason":"upstream-proxy-failed"`) {
				t.Errorf("the log lacks cause %s and reason upstream-proxy-failed:\n%s", tc.cause, logs)
			}
			if m := h.get("/metrics"); !strings.Contains(m, `keyhole_proxy_upstream_proxy_connects_total{result="`+tc.cause+`"}`) {
				t.Errorf("metrics lack result %s", tc.cause)
			}
			assertNoProxySecret(t, "the logs", logs)
		})
	}
}

// TestServerUpstreamProxyGuard: the SSRF guard holds for what the
// forward proxy is asked for. In resolve: local mode a name that
// resolves to an internal address is refused before the forward proxy
// hears of it; in resolve: upstream mode the name goes to the forward
// proxy, an internal name is refused by rule unless the config lists it
// in internalHosts, and a forward proxy at an internal address is used
// only with allowInternalAddress. noProxy hosts are dialled directly.
func TestServerUpstreamProxyGuard(t *testing.T) {
	t.Run("local mode, a name resolving to loopback", func(t *testing.T) {
		cp := newConnectProxy(t, "", "")
		h := newHarnessConfig(t, upstreamProxyConfig(cp.url(), `, "allowInternalAddress": true`), func(o *Options) {
			_, port, _ := net.SplitHostPort(o.Resolve["api.github.com:443"])
			o.Resolve["api.github.com:443"] = "localhost:" + port // by name: resolved, then checked
		})
		resp, body := h.fetch(t, "https://api.github.com/user")
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonHostNotAllowed) || !strings.Contains(body, "loopback") {
			t.Fatalf("%s %q %q, want 403 host-not-allowed naming loopback", resp.Status, resp.Header.Get(policy.RefusedHeader), body)
		}
		if targets, _ := cp.asked(); len(targets) != 0 {
			t.Errorf("the upstream proxy was asked for %v; the guard refuses first", targets)
		}
	})
	t.Run("upstream mode asks by name", func(t *testing.T) {
		cp := newConnectProxy(t, "", "")
		h := newHarnessConfig(t, upstreamProxyConfig(cp.url(), `, "resolve": "upstream", "allowInternalAddress": true`), func(o *Options) {
			cp.route("api.github.com:443", o.Resolve["api.github.com:443"])
			delete(o.Resolve, "api.github.com:443")
		})
		if resp, body := h.fetch(t, "https://api.github.com/user"); resp.StatusCode != 200 {
			t.Fatalf("%s %q", resp.Status, body)
		}
		if targets, _ := cp.asked(); len(targets) != 1 || targets[0] != "api.github.com:443" {
			t.Errorf("the upstream proxy was asked for %v, want [api.github.com:443]", targets)
		}
	})
	t.Run("upstream mode refuses an internal name", func(t *testing.T) {
		cp := newConnectProxy(t, "", "")
		h := newHarnessConfig(t, upstreamProxyConfig(cp.url(), `, "resolve": "upstream", "allowInternalAddress": true`))
		resp, body := h.fetch(t, "https://git.corp.internal/x")
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonHostNotAllowed) || !strings.Contains(body, "internalHosts") {
			t.Fatalf("%s %q %q, want 403 host-not-allowed", resp.Status, resp.Header.Get(policy.RefusedHeader), body)
		}
		if targets, _ := cp.asked(); len(targets) != 0 {
			t.Errorf("the upstream proxy was asked for %v", targets)
		}
		if m := h.get("/metrics"); !strings.Contains(m, `keyhole_proxy_dials_refused_total{host="git.corp.internal",class="internal-name"} 1`) {
			t.Errorf("metrics lack the refused internal name")
		}
	})
	t.Run("upstream mode, an internal name the config lists", func(t *testing.T) {
		cp := newConnectProxy(t, "", "")
		cfg := strings.Replace(upstreamProxyConfig(cp.url(), `, "resolve": "upstream", "allowInternalAddress": true`),
			`"passthrough": ["pypi.org"],`, `"passthrough": ["pypi.org"], "internalHosts": ["git.corp.internal"],`, 1)
		h := newHarnessConfig(t, cfg)
		corp := newUpstream(t, h.upCA, "git.corp.internal")
		cp.route("git.corp.internal:443", corp.srv.Listener.Addr().String())
		if resp, body := h.fetch(t, "https://git.corp.internal/x"); resp.StatusCode != 200 {
			t.Fatalf("%s %q", resp.Status, body)
		}
	})
	t.Run("a forward proxy at an internal address needs allowInternalAddress", func(t *testing.T) {
		cp := newConnectProxy(t, "", "")
		h := newHarnessConfig(t, upstreamProxyConfig(cp.url(), ""))
		resp, body := h.fetch(t, "https://api.github.com/user")
		if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonUpstreamProxyFailed) || !strings.Contains(body, "allowInternalAddress") {
			t.Fatalf("%s %q %q, want 502 upstream-proxy-failed naming allowInternalAddress", resp.Status, resp.Header.Get(policy.RefusedHeader), body)
		}
		if targets, _ := cp.asked(); len(targets) != 0 {
			t.Errorf("the upstream proxy was reached: %v", targets)
		}
	})
	t.Run("noProxy hosts are dialled directly", func(t *testing.T) {
		cp := newConnectProxy(t, "", "")
		h := newHarnessConfig(t, upstreamProxyConfig(cp.url(), `, "allowInternalAddress": true, "noProxy": ["api.github.com", "127.0.0.0/8"]`))
		c := h.client()
		t.Cleanup(c.CloseIdleConnections)
		for _, u := range []string{"https://api.github.com/user", "https://pypi.org/simple/"} {
			resp, err := c.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			if body := readBody(t, resp); resp.StatusCode != 200 {
				t.Fatalf("GET %s: %s %q", u, resp.Status, body)
			}
		}
		if targets, _ := cp.asked(); len(targets) != 0 {
			t.Errorf("the upstream proxy was asked for %v; noProxy names them", targets)
		}
	})
}

// TestInternalName: the names resolve: upstream mode refuses by rule.
func TestInternalName(t *testing.T) {
	tests := map[string]bool{
		"api.github.com": false, "registry.npmjs.org": false, "example.org": false, "corp.example": false,
		"localhost": true, "db": true, "x.localhost": true, "metadata.google.internal": true,
		"kubernetes.default.svc": true, "api.default.svc.cluster.local": true, "printer.local": true,
		"router.home.arpa": true, "1.0.0.127.in-addr.arpa": true, "127.0.0.1": true, "2130706433": true,
		"0x7f.1": true, "a.0x7f000001.example": true, "host.lan": true,
	}
	for name, want := range tests {
		if got := internalName(name); got != want {
			t.Errorf("internalName(%q) = %v, want %v", name, got, want)
		}
	}
}
