//go:build e2e

package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// metric scrapes /metrics and returns the value of the first series whose
// line starts with name and holds every label in labels, or -1.
func (w *world) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + w.proxy.admin + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	w.assertNoSecret(t, "/metrics", string(body))
next:
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return v
	}
	return -1
}

// TestMetrics checks that the Prometheus endpoint counts requests by host,
// decision and reason, injection failures and upstream latency.
func TestMetrics(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	w.curl(t, "https://api.github.com/repos/acme/widgets")
	w.curl(t, "https://api.github.com/user")
	w.curl(t, "https://api.github.com/user")
	w.curl(t, "https://nowhere.example/")
	w.secret.update(t, map[string]string{"user": "x-access-token"})
	w.curl(t, "https://api.github.com/repos/acme/widgets")

	tests := map[string]struct {
		name   string
		labels []string
		want   float64
	}{
		"forwarded": {name: "keyhole_proxy_requests_total",
			labels: []string{`host="api.github.com"`, `decision="inject"`, `reason="allowed"`}, want: 1},
		"refused by rules": {name: "keyhole_proxy_requests_total",
			labels: []string{`host="api.github.com"`, `reason="l7-not-allowed"`}, want: 2},
		"credential unavailable": {name: "keyhole_proxy_requests_total",
			labels: []string{`host="api.github.com"`, `reason="credential-unavailable"`}, want: 1},
		"injection failures": {name: "keyhole_proxy_injection_failures_total",
			labels: []string{`host="api.github.com"`}, want: 1},
		"one leaf minted":           {name: "keyhole_proxy_cert_mints_total", want: 1},
		"upstream latency observed": {name: "keyhole_proxy_upstream_latency_seconds_count", want: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := w.metric(t, tc.name, tc.labels...); got != tc.want {
				t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
			}
		})
	}
	t.Run("refused host counted without its name", func(t *testing.T) {
		// An unlisted host is chosen by the sandbox; a label per name
		// would let it grow the metrics without bound.
		if got := w.metric(t, "keyhole_proxy_requests_total", `host="nowhere.example"`); got != -1 {
			t.Errorf("an unlisted host has its own series")
		}
		if got := w.metric(t, "keyhole_proxy_requests_total", `reason="host-not-allowed"`); got != 1 {
			t.Errorf("host-not-allowed requests = %v, want 1", got)
		}
	})
}

// TestConcurrentFirstConnections opens many tunnels to one host at once
// on a fresh proxy: every handshake verifies and only one leaf is minted.
func TestConcurrentFirstConnections(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			conn, err := net.DialTimeout("tcp", w.proxy.addr, 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			fmt.Fprintf(conn, "CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
			if err != nil || resp.StatusCode != 200 {
				errs <- fmt.Errorf("CONNECT: %v %v", resp, err)
				return
			}
			tc := tls.Client(conn, &tls.Config{ServerName: "api.github.com", RootCAs: w.sandboxCA.Pool(), NextProtos: []string{"http/1.1"}})
			errs <- tc.Handshake()
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("tunnel: %v", err)
		}
	}
	if got := w.metric(t, "keyhole_proxy_cert_mints_total"); got != 1 {
		t.Errorf("%d concurrent first connections minted %v leaves, want 1", n, got)
	}
}

// TestCARenewal replaces the sandbox CA's files while the proxy runs, as
// cert-manager renews <claim>-egress-ca. Through --ca-switch-delay new
// tunnels keep leaves of the previous CA, which a sandbox whose bundle
// still holds only that CA verifies; after it they get leaves signed by
// the new CA, which a sandbox holding only the new bundle verifies.
func TestCARenewal(t *testing.T) {
	const delay = 3 * time.Second
	w := newWorld(t, "github-acme.json", "--ca-switch-delay", delay.String(), "--reload-interval", "100ms")
	if _, _, err := w.tunnel(t, "api.github.com:443", "api.github.com"); err != nil {
		t.Fatalf("before renewal: %v", err)
	}
	renewed := newCA(t, t.TempDir(), "keyhole-e2e-sandbox-ca-renewed")
	for _, f := range []struct{ from, to string }{
		{from: renewed.KeyFile, to: w.sandboxCA.KeyFile},
		{from: renewed.CertFile, to: w.sandboxCA.CertFile},
	} {
		data, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(filepath.Dir(f.to), ".renew.tmp")
		writeFile(t, tmp, data)
		if err := os.Rename(tmp, f.to); err != nil {
			t.Fatal(err)
		}
	}
	renewedAt := time.Now()
	// Within the delay: the previous CA still signs.
	for time.Since(renewedAt) < delay/2 {
		if _, _, err := w.tunnel(t, "api.github.com:443", "api.github.com"); err != nil {
			t.Fatalf("%v after the renewal, within the delay: %v", time.Since(renewedAt), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, br, err := w.tunnelTLS(t, "api.github.com:443", &tls.Config{
			ServerName: "api.github.com", RootCAs: renewed.Pool(), NextProtos: []string{"http/1.1"},
		})
		if err == nil {
			if since := time.Since(renewedAt); since < delay {
				t.Errorf("the renewed CA signed %v after the renewal, before the %v delay", since, delay)
			}
			resp := roundTrip(t, c, br, "GET", "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
			if resp.StatusCode != 200 {
				t.Errorf("after renewal: %s", resp.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy still mints from the old CA 30s after renewal: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if _, _, err := w.tunnel(t, "api.github.com:443", "api.github.com"); err == nil {
		t.Errorf("a new leaf still verifies against the old CA")
	}
}

// TestTunnelCap holds the proxy's maximum of open tunnels; one more
// CONNECT is turned away, and a slot frees when a tunnel closes.
func TestTunnelCap(t *testing.T) {
	w := newWorld(t, "github-acme.json", "--max-tunnels", "2")
	first, _ := w.mustTunnel(t, "api.github.com")
	if _, _, err := w.tunnel(t, "api.github.com:443", "api.github.com"); err != nil {
		t.Fatal(err)
	}
	connect := func() int {
		conn := w.sendConnect(t, "api.github.com:443", 10*time.Second)
		defer conn.Close()
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	if got := connect(); got != http.StatusServiceUnavailable {
		t.Errorf("CONNECT beyond the cap: %d, want 503", got)
	}
	first.Close()
	deadline := time.Now().Add(5 * time.Second)
	for connect() != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("closing a tunnel did not free a slot")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestGracefulShutdown stops the proxy with SIGTERM while a request is in
// flight: the request completes, the proxy exits 0 and takes no new work.
func TestGracefulShutdown(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	done := make(chan curlResult, 1)
	go func() { done <- w.curl(t, "https://api.github.com/repos/acme/widgets/slow") }()
	deadline := time.Now().Add(10 * time.Second)
	for len(w.api.find("GET", "/repos/acme/widgets/slow")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the slow request never reached the upstream")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := w.proxy.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.code != 200 {
		t.Errorf("in-flight request: status %d, want 200 (%v)", res.code, res.exit)
	}
	select {
	case <-w.proxy.exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the proxy did not exit after draining")
	}
	if code := w.proxy.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if _, err := net.DialTimeout("tcp", w.proxy.addr, time.Second); err == nil {
		t.Errorf("the proxy still accepts connections after exiting")
	}
}

// TestSlowClients holds connections open at each stage without finishing
// it; the proxy's default 10 s header and handshake timeouts must close
// every one, so a stalled or hostile sandbox cannot pin tunnels forever.
func TestSlowClients(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	stages := map[string]func(t *testing.T) net.Conn{
		"no CONNECT line": func(t *testing.T) net.Conn {
			conn, err := net.DialTimeout("tcp", w.proxy.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "CONNECT api.github.com:443 HTTP/1.1\r\n") // and never the blank line
			return conn
		},
		"no TLS ClientHello": func(t *testing.T) net.Conn {
			conn, err := net.DialTimeout("tcp", w.proxy.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %v %v", resp, err)
			}
			return conn
		},
		"no request in the tunnel": func(t *testing.T) net.Conn {
			c, _ := w.mustTunnel(t, "api.github.com")
			return c
		},
		"request headers never finish": func(t *testing.T) net.Conn {
			c, _ := w.mustTunnel(t, "api.github.com")
			fmt.Fprintf(c, "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n")
			return c
		},
	}
	for name, open := range stages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn := open(t)
			defer conn.Close()
			start := time.Now()
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, err := io.Copy(io.Discard, conn)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the proxy kept the stalled connection open for 30s")
			}
			t.Logf("closed after %s", time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// TestUpstreamFailures points api.github.com at upstreams that cannot
// serve it: the sandbox gets a 502 that is not a policy refusal (no
// X-Omnia-Egress-Refused), and no output holds the token.
func TestUpstreamFailures(t *testing.T) {
	tests := map[string]struct {
		// resolve returns the address api.github.com resolves to.
		resolve func(w *world) string
	}{
		"nothing listening": {resolve: func(*world) string { return "127.0.0.1:1" }},
		// github.com's certificate does not name api.github.com.
		"certificate for another name": {resolve: func(w *world) string { return w.git.addr }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "github-acme.json")
			w.proxy.stop()
			w.proxy = w.startProxy(t, filepath.Join("testdata", "github-acme.json"), "--resolve", "api.github.com:443:"+tc.resolve(w))
			res := w.curl(t, "https://api.github.com/repos/acme/widgets")
			if res.code != http.StatusBadGateway && res.code != http.StatusGatewayTimeout {
				t.Errorf("status %d, want 502 or 504", res.code)
			}
			if got := res.header.Get(refusal); got != "" {
				t.Errorf("an upstream failure carries %s: %q", refusal, got)
			}
		})
	}
}
