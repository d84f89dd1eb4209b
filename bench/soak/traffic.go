package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Outcome classes. Everything but the ok ones is an error.
const (
	okExpected = "ok"       // the status and credential the scenario expects
	okVanished = "vanished" // a client that hung up on purpose

	errStatus     = "unexpected status"
	errTransport  = "transport error"
	errTimeout    = "timeout"
	errCredential = "wrong or stale credential"
	errLeak       = "secret in a response"
)

func isOK(class string) bool { return class == okExpected || class == okVanished }

// scenario is one kind of request the sandbox makes.
type scenario struct {
	name   string
	weight int
	do     func(t *traffic, c *http.Client) (class string, latency time.Duration)
}

// scenarios is the mix. Allowed, refused and vanishing clients, on every
// host kind.
func scenarios() []scenario {
	return []scenario{
		{"api GET allowed", 24, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expect(c, "GET", "https://"+apiHost+"/repos/acme/widgets/issues", nil, "", 200, "")
		}},
		{"api GET /user refused", 8, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expect(c, "GET", "https://"+apiHost+"/user", nil, "", 403, "l7-not-allowed")
		}},
		{"api DELETE refused", 5, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expect(c, "DELETE", "https://"+apiHost+"/repos/acme/widgets", nil, "", 403, "l7-not-allowed")
		}},
		{"api dot segment refused", 3, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expect(c, "GET", "https://"+apiHost+"/repos/acme/widgets/%2e%2e/%2e%2e/user", nil, "", 403, "l7-not-allowed")
		}},
		{"api POST body allowed", 8, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expect(c, "POST", "https://"+apiHost+"/repos/acme/widgets/pulls", []byte(`{"state":"open","title":"soak"}`), "application/json", 200, "")
		}},
		{"api POST body refused (U+017F)", 5, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expect(c, "POST", "https://"+apiHost+"/repos/acme/widgets/pulls", []byte(`{"state":"open","ſtate":"closed"}`), "application/json", 403, "l7-not-allowed")
		}},
		{"api POST form polyglot refused", 3, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expect(c, "POST", "https://"+apiHost+"/repos/acme/widgets/pulls", []byte(`{"state":"open","x":"&state=closed"}`), "application/x-www-form-urlencoded", 403, "l7-not-allowed")
		}},
		{"git info/refs basic", 8, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expect(c, "GET", "https://"+gitHost+"/acme/widgets.git/info/refs?service=git-upload-pack", nil, "", 200, "")
		}},
		{"git push refused", 3, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expect(c, "POST", "https://"+gitHost+"/acme/widgets.git/git-receive-pack", []byte("0000"), "application/x-git-receive-pack-request", 403, "l7-not-allowed")
		}},
		{"substitute placeholder", 6, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expectHeader(c, "GET", "https://"+upHost+"/uploads", http.Header{"Authorization": {"token " + upPlaceholder}}, 200, "")
		}},
		{"dotted key via index", 5, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expect(c, "GET", "https://"+gwHost+"/v1/things", nil, "", 200, "")
		}},
		{"passthrough tunnel", 8, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expectHeader(c, "GET", "https://"+passHost+"/simple/", http.Header{"Authorization": {"Bearer " + placeholder}}, 200, "")
		}},
		{"refused host", 5, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expectConnectRefused(c, "https://"+evilHost+"/")
		}},
		{"plain http to an injected host refused", 2, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.expect(c, "GET", "http://"+apiHost+"/repos/acme/widgets", nil, "", 403, "l7-not-allowed")
		}},
		{"path toggled by config reload", 4, func(t *traffic, c *http.Client) (string, time.Duration) {
			return t.toggle(c)
		}},
		{"client vanishes mid-body (body rule)", 3, func(t *traffic, _ *http.Client) (string, time.Duration) {
			return t.vanishMidBody(apiHost, "/repos/acme/widgets/pulls", "application/json")
		}},
		{"client vanishes mid-body (streamed)", 3, func(t *traffic, _ *http.Client) (string, time.Duration) {
			return t.vanishMidBody(gitHost, "/acme/widgets.git/git-upload-pack", "application/x-git-upload-pack-request")
		}},
		{"client vanishes mid-response", 2, func(t *traffic, _ *http.Client) (string, time.Duration) {
			return t.vanishMidResponse()
		}},
	}
}

// traffic runs the scenarios from -workers clients at -rate requests per
// second and counts what came back.
type traffic struct {
	e         *env
	proxyAddr string
	o         options
	mix       []scenario
	total     int
	roots     *x509.CertPool // sandbox CA and, for passthrough, the upstream's

	mu      sync.Mutex
	clients []*http.Client
	window  window
	all     map[string]map[string]int64 // scenario → class → count
	phaseB  bool
	flipped time.Time
}

// window is what one minute of traffic did.
type window struct {
	requests  int64
	classes   map[string]int64
	latencies []time.Duration
}

func newTraffic(e *env, proxyAddr string, o options) *traffic {
	t := &traffic{e: e, proxyAddr: proxyAddr, o: o, mix: scenarios(), all: map[string]map[string]int64{}}
	for _, s := range t.mix {
		t.total += s.weight
	}
	t.roots = x509.NewCertPool()
	t.roots.AddCert(e.sandboxCA.Cert)
	t.roots.AddCert(e.upstreamCA.Cert)
	t.window.classes = map[string]int64{}
	return t
}

func (t *traffic) client() *http.Client {
	proxyURL := &url.URL{Scheme: "http", Host: t.proxyAddr}
	c := &http.Client{
		Transport: &http.Transport{
			Proxy:               http.ProxyURL(proxyURL),
			TLSClientConfig:     &tls.Config{RootCAs: t.roots},
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       30 * time.Second,
	}
	t.mu.Lock()
	t.clients = append(t.clients, c)
	t.mu.Unlock()
	return c
}

// run starts requests at the rate until ctx ends, then waits for those in
// flight.
func (t *traffic) run(ctx context.Context) {
	starts := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < t.o.workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := t.client()
			for range starts {
				s := t.pick()
				class, lat := s.do(t, c)
				t.record(s.name, class, lat)
			}
		}()
	}
	tick := time.NewTicker(time.Second / time.Duration(t.o.rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			close(starts)
			wg.Wait()
			return
		case <-tick.C:
			select {
			case starts <- struct{}{}:
			default: // every worker busy: the start is skipped, not queued
			}
		}
	}
}

func (t *traffic) pick() scenario {
	n := rand.IntN(t.total)
	for _, s := range t.mix {
		if n < s.weight {
			return s
		}
		n -= s.weight
	}
	return t.mix[0]
}

func (t *traffic) record(name, class string, lat time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.window.requests++
	t.window.classes[class]++
	if class == okExpected {
		t.window.latencies = append(t.window.latencies, lat)
	}
	if t.all[name] == nil {
		t.all[name] = map[string]int64{}
	}
	t.all[name][class]++
}

// takeWindow returns the minute's counts and starts the next.
func (t *traffic) takeWindow() window {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.window
	t.window = window{classes: map[string]int64{}}
	return w
}

func (t *traffic) totals() map[string]map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]map[string]int64{}
	for s, m := range t.all {
		out[s] = map[string]int64{}
		for c, n := range m {
			out[s][c] = n
		}
	}
	return out
}

func (t *traffic) closeIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.clients {
		c.CloseIdleConnections()
	}
}

func (t *traffic) setPhase(b bool) {
	t.mu.Lock()
	t.phaseB, t.flipped = b, time.Now()
	t.mu.Unlock()
}

// expect sends a request and checks its status, the refusal reason, the
// credential the upstream saw, and that no secret came back.
func (t *traffic) expect(c *http.Client, method, rawURL string, body []byte, contentType string, status int, refused string) (string, time.Duration) {
	var h http.Header
	if contentType != "" {
		h = http.Header{"Content-Type": {contentType}}
	}
	return t.send(c, method, rawURL, body, h, status, refused)
}

func (t *traffic) expectHeader(c *http.Client, method, rawURL string, h http.Header, status int, refused string) (string, time.Duration) {
	return t.send(c, method, rawURL, nil, h, status, refused)
}

func (t *traffic) send(c *http.Client, method, rawURL string, body []byte, h http.Header, status int, refused string) (string, time.Duration) {
	start := time.Now()
	resp, got, err := t.do(c, method, rawURL, body, h)
	lat := time.Since(start)
	if err != nil {
		return transportClass(err), lat
	}
	return t.judge(resp, got, status, refused), lat
}

func (t *traffic) do(c *http.Client, method, rawURL string, body []byte, h http.Header) (*http.Response, []byte, error) {
	var r io.Reader
	if body != nil {
		r = strings.NewReader(string(body))
	}
	req, err := http.NewRequest(method, rawURL, r)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return resp, got, err
}

// judge classes a response against what the scenario expects.
func (t *traffic) judge(resp *http.Response, body []byte, status int, refused string) string {
	if t.leaks(resp, body) {
		return errLeak
	}
	if resp.StatusCode != status || resp.Header.Get("X-Omnia-Egress-Refused") != refused {
		if cred := resp.Header.Get("X-Soak-Cred"); cred == credStale || cred == credWrong {
			return errCredential
		}
		return errStatus
	}
	if status == http.StatusOK {
		switch resp.Header.Get("X-Soak-Cred") {
		case credCurrent, credPrevious, "untouched":
		default:
			return errCredential
		}
	}
	return okExpected
}

// leaks reports whether any value the Secrets ever held is in the
// response's headers or body.
func (t *traffic) leaks(resp *http.Response, body []byte) bool {
	for _, s := range t.e.secrets.everValue() {
		b64 := base64.StdEncoding.EncodeToString([]byte(s))
		if strings.Contains(string(body), s) || strings.Contains(string(body), b64) {
			return true
		}
		for _, vs := range resp.Header {
			for _, v := range vs {
				if strings.Contains(v, s) || strings.Contains(v, b64) {
					return true
				}
			}
		}
	}
	return false
}

func transportClass(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errTimeout
	}
	return errTransport
}

// expectConnectRefused expects the CONNECT itself to be refused with 403,
// which Go's client reports as an error naming the status.
func (t *traffic) expectConnectRefused(c *http.Client, rawURL string) (string, time.Duration) {
	start := time.Now()
	resp, _, err := t.do(c, "GET", rawURL, nil, nil)
	lat := time.Since(start)
	if err == nil {
		resp.Body.Close()
		return errStatus, lat
	}
	if strings.Contains(err.Error(), "Forbidden") {
		return okExpected, lat
	}
	return transportClass(err), lat
}

// toggle requests the path only config B allows. Within 10 s of a swap
// either answer is right; after that, the config's.
func (t *traffic) toggle(c *http.Client) (string, time.Duration) {
	t.mu.Lock()
	b, flipped := t.phaseB, t.flipped
	t.mu.Unlock()
	start := time.Now()
	resp, got, err := t.do(c, "GET", "https://"+apiHost+togglePath, nil, nil)
	lat := time.Since(start)
	if err != nil {
		return transportClass(err), lat
	}
	settled := time.Since(flipped) > 10*time.Second
	okB := t.judge(resp, got, 200, "")
	okA := t.judge(resp, got, 403, "l7-not-allowed")
	switch {
	case okB == errLeak || okA == errLeak:
		return errLeak, lat
	case settled && b:
		return okB, lat
	case settled:
		return okA, lat
	case okA == okExpected || okB == okExpected:
		return okExpected, lat
	}
	return errStatus, lat
}

// rawTunnel opens a CONNECT tunnel to host:443 and a TLS session in it,
// as a sandbox client does by hand.
func (t *traffic) rawTunnel(host string) (*tls.Conn, error) {
	c, err := net.DialTimeout("tcp", t.proxyAddr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", host, host)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return nil, fmt.Errorf("CONNECT %s: %s", host, resp.Status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: t.roots, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// vanishMidBody announces a 64 KiB body, sends 2 KiB of it and hangs up.
func (t *traffic) vanishMidBody(host, path, contentType string) (string, time.Duration) {
	start := time.Now()
	tc, err := t.rawTunnel(host)
	if err != nil {
		return transportClass(err), time.Since(start)
	}
	fmt.Fprintf(tc, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: 65536\r\n\r\n%s", path, host, contentType, `{"state":"open","pad":"`+strings.Repeat("x", 2048))
	time.Sleep(20 * time.Millisecond)
	tc.NetConn().Close()
	return okVanished, time.Since(start)
}

// vanishMidResponse asks for a 256 KiB body, reads 8 KiB and hangs up.
func (t *traffic) vanishMidResponse() (string, time.Duration) {
	start := time.Now()
	tc, err := t.rawTunnel(apiHost)
	if err != nil {
		return transportClass(err), time.Since(start)
	}
	fmt.Fprintf(tc, "GET /repos/acme/widgets/big HTTP/1.1\r\nHost: %s\r\n\r\n", apiHost)
	buf := make([]byte, 8<<10)
	_, err = io.ReadFull(tc, buf)
	tc.NetConn().Close()
	if err != nil {
		return transportClass(err), time.Since(start)
	}
	for _, s := range t.e.secrets.everValue() {
		if strings.Contains(string(buf), s) {
			return errLeak, time.Since(start)
		}
	}
	return okVanished, time.Since(start)
}

// probe is the change loop's own client: it checks that each change took.
type probe struct {
	t *traffic
	c *http.Client
}

func newProbe(e *env, proxyAddr string) *probe {
	t := newTraffic(e, proxyAddr, options{})
	return &probe{t: t, c: t.client()}
}

func (p *probe) close() { p.c.CloseIdleConnections() }

// cred sends one allowed request and returns how the upstream classed its
// credential.
func (p *probe) cred() (string, error) {
	resp, _, err := p.t.do(p.c, "GET", "https://"+apiHost+"/repos/acme/widgets", nil, nil)
	if err != nil {
		return "", err
	}
	return resp.Header.Get("X-Soak-Cred"), nil
}

// toggleAllowed reports whether the proxy now allows the toggled path.
func (p *probe) toggleAllowed() (bool, error) {
	resp, _, err := p.t.do(p.c, "GET", "https://"+apiHost+togglePath, nil, nil)
	if err != nil {
		return false, err
	}
	return resp.StatusCode == http.StatusOK, nil
}
