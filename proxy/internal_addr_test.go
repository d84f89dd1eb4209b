package proxy

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// internalConfig has an injected and a passthrough host the config lets
// reach internal addresses, and one of each it does not.
const internalConfig = configHead + `
  "hosts": [
    {"name": "api.github.com", "connection": "github-acme",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}}},
    {"name": "git.corp.internal", "connection": "corp",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}}}
  ],
  "passthrough": ["mirror.corp.internal", "pypi.org"],
  "internalHosts": ["git.corp.internal", "mirror.corp.internal"]
}`

// TestServerInternalAddresses: every allowed host here resolves, by
// name, to a server on loopback, as a name an attacker controls could
// (DNS rebinding included: the proxy decides on the address it is about
// to connect to, after resolution). The proxy refuses to dial it,
// host-not-allowed, on every path (an injected request, a passthrough
// CONNECT, a plain request, a transparent connection), with the class in
// the log and the metrics, unless the config lists the host in
// internalHosts. An address --resolve gives literally is dialled as
// given: the operator chose it.
func TestServerInternalAddresses(t *testing.T) {
	ca := newTestCA(t, "internal upstream CA")
	names := []string{"api.github.com", "git.corp.internal", "mirror.corp.internal", "pypi.org"}
	up := ca.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "internal service %s\n", r.Host)
	}), names...)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "plain internal service") }))
	t.Cleanup(plain.Close)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	_, plainPort, _ := net.SplitHostPort(plain.Listener.Addr().String())
	h := newHarnessConfig(t, internalConfig, func(o *Options) {
		o.UpstreamRoots.AddCert(ca.cert)
		// By name: resolved, then checked.
		for _, n := range names {
			o.Resolve[n+":443"] = "localhost:" + port
		}
		o.Resolve["pypi.org:80"] = "localhost:" + plainPort
	})
	c := h.client()
	t.Cleanup(c.CloseIdleConnections) // the passthrough tunnel, which shutdown would wait for
	roots := c.Transport.(*http.Transport).TLSClientConfig.RootCAs
	roots.AddCert(ca.cert)
	get := func(url string) (*http.Response, string, error) {
		resp, err := c.Get(url)
		if err != nil {
			return nil, "", err
		}
		return resp, readBody(t, resp), nil
	}
	refused := func(t *testing.T, resp *http.Response, body string) {
		t.Helper()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonHostNotAllowed) {
			t.Fatalf("%s %s %q, want 403 host-not-allowed", resp.Status, policy.RefusedHeader, resp.Header.Get(policy.RefusedHeader))
		}
		if !strings.Contains(body, "loopback") || !strings.Contains(body, "internalHosts") {
			t.Errorf("the refusal does not say why: %q", body)
		}
	}
	t.Run("injected host", func(t *testing.T) {
		resp, body, err := get("https://api.github.com/user")
		if err != nil {
			t.Fatal(err)
		}
		refused(t, resp, body)
	})
	t.Run("injected host, a request with a body", func(t *testing.T) {
		// Through Go's Transport, not the pooled fast path.
		resp, err := c.Post("https://api.github.com/repos/acme/widgets/pulls", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		refused(t, resp, readBody(t, resp))
	})
	t.Run("injected host listed in internalHosts", func(t *testing.T) {
		resp, body, err := get("https://git.corp.internal/x")
		if err != nil || resp.StatusCode != 200 || !strings.Contains(body, "internal service") {
			t.Fatalf("%v %v %q", resp, err, body)
		}
	})
	t.Run("passthrough CONNECT", func(t *testing.T) {
		conn, _, resp := h.connect("pypi.org:443")
		defer conn.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonHostNotAllowed) {
			t.Fatalf("CONNECT pypi.org:443 = %s %q, want 403 host-not-allowed", resp.Status, resp.Header.Get(policy.RefusedHeader))
		}
	})
	t.Run("passthrough listed in internalHosts", func(t *testing.T) {
		resp, body, err := get("https://mirror.corp.internal/simple/")
		if err != nil || resp.StatusCode != 200 || !strings.Contains(body, "internal service") {
			t.Fatalf("%v %v %q", resp, err, body)
		}
	})
	t.Run("plain request to a passthrough host", func(t *testing.T) {
		resp, body, err := get("http://pypi.org/simple/")
		if err != nil {
			t.Fatal(err)
		}
		refused(t, resp, body)
	})
	t.Run("transparent connection", func(t *testing.T) {
		raw, err := net.DialTimeout("tcp", h.trans, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(5 * time.Second))
		tc := tls.Client(raw, &tls.Config{ServerName: "pypi.org", RootCAs: roots})
		if err := tc.Handshake(); err == nil || !strings.Contains(err.Error(), "access denied") {
			t.Fatalf("handshake through the transparent listener: %v, want an access_denied alert", err)
		}
	})
	t.Run("an address --resolve gives literally", func(t *testing.T) {
		h := newHarnessConfig(t, internalConfig, func(o *Options) {
			o.UpstreamRoots.AddCert(ca.cert)
			o.Resolve["api.github.com:443"] = "127.0.0.1:" + port
		})
		c := h.client()
		c.Transport.(*http.Transport).TLSClientConfig.RootCAs.AddCert(ca.cert)
		resp, err := c.Get("https://api.github.com/user")
		if err != nil {
			t.Fatal(err)
		}
		if body := readBody(t, resp); resp.StatusCode != 200 {
			t.Fatalf("%s %q", resp.Status, body)
		}
	})
	t.Run("logged and counted", func(t *testing.T) {
		eventually(t, "the request lines", func() bool { return len(h.logs.requests(t)) >= 9 })
		want := map[string]bool{"GET api.github.com": false, "CONNECT pypi.org": false, "GET pypi.org:80": false, "TLS pypi.org": false}
		for _, l := range h.logs.requests(t) {
			k := fmt.Sprint(l["method"], " ", l["host"])
			if _, ok := want[k]; ok && l["decision"] == "refuse" && l["reason"] == "host-not-allowed" && l["status"] == float64(403) {
				want[k] = true
			}
		}
		for k, ok := range want {
			if !ok {
				t.Errorf("no request line refusing %s host-not-allowed:\n%s", k, h.logs.String())
			}
		}
		if n := strings.Count(h.logs.String(), `"msg":"upstream address refused"`); n != 5 {
			t.Errorf("%d events naming the refused address, want 5", n)
		}
		m := h.get("/metrics")
		for _, line := range []string{
			`keyhole_proxy_dials_refused_total{host="api.github.com",class="loopback"} 2`,
			`keyhole_proxy_dials_refused_total{host="pypi.org",class="loopback"} 2`,
			`keyhole_proxy_dials_refused_total{host="pypi.org:80",class="loopback"} 1`,
			`keyhole_proxy_requests_total{host="api.github.com",decision="refuse",reason="host-not-allowed"} 2`,
		} {
			if !strings.Contains(m, line) {
				t.Errorf("metrics lack %s:\n%s", line, m)
			}
		}
		if holdsSecret(h.logs.String()) {
			t.Errorf("the log holds the credential")
		}
	})
}
