package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// route is how a client reaches the upstream: through a proxy or not, by
// which name, trusting which CA, sending which credential.
type route struct {
	name  string
	proxy string // forward-proxy address; "" dials the upstream directly
	host  string
	roots *x509.CertPool
	auth  string
}

// direct is the baseline: the client holds the real token and talks TLS
// to the upstream itself.
func (e *env) direct() route {
	return route{name: "direct", host: benchHost, roots: e.upstreamCA.Pool(), auth: "Bearer " + token}
}

// injected goes through a proxy that terminates TLS with the sandbox CA
// and replaces the placeholder the client sends with the real token.
func (e *env) injected(name, proxyAddr string) route {
	return route{name: name, proxy: proxyAddr, host: benchHost, roots: e.sandboxCA.Pool(), auth: "Bearer omnia-injected-bench"}
}

// tunnelled goes through keyhole's passthrough: CONNECT, then TLS end to
// end with the upstream. It is the control that shows what one extra
// process hop costs on this machine, without termination or injection.
func (e *env) tunnelled(proxyAddr string) route {
	return route{name: "keyhole passthrough", proxy: proxyAddr, host: tunnelHost, roots: e.upstreamCA.Pool(), auth: "Bearer " + token}
}

// client is one HTTP/1.1 client with at most one connection.
type client struct {
	hc   *http.Client
	url  string
	auth string
}

func (e *env) client(rt route, keepAlive bool) *client {
	tr := &http.Transport{
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		DisableKeepAlives:   !keepAlive,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		TLSClientConfig:     &tls.Config{NextProtos: []string{"http/1.1"}, RootCAs: rt.roots},
	}
	if rt.proxy == "" {
		d := &net.Dialer{Timeout: 5 * time.Second}
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, e.upstream)
		}
	} else {
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: rt.proxy})
	}
	return &client{
		hc:   &http.Client{Transport: tr, Timeout: 10 * time.Second},
		url:  "https://" + rt.host + benchPath,
		auth: rt.auth,
	}
}

// get performs one request and drains the body; a non-200 is an error.
func (c *client) get() error {
	req, err := http.NewRequest(http.MethodGet, c.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", c.auth)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || n != bodySize {
		return fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
	return nil
}

// loadResult is what a load measurement gives: completed operations
// per second, failures, and the latency of each completed operation.
type loadResult struct {
	rate    float64
	failed  int64
	samples []time.Duration
}

// load runs workers concurrent loops of fn for d.
func load(workers int, d time.Duration, setup func() func() error) loadResult {
	var ok, failed atomic.Int64
	fns := make([]func() error, workers)
	for i := range fns {
		fns[i] = setup()
	}
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	start := time.Now()
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t0 := time.Now()
				if !t0.Before(stop) {
					return
				}
				if err := fn(); err != nil {
					failed.Add(1)
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	res := loadResult{rate: float64(ok.Load()) / time.Since(start).Seconds(), failed: failed.Load()}
	for _, l := range lat {
		res.samples = append(res.samples, l...)
	}
	return res
}

// keepAlive measures requests/s and their latencies over conns warm
// keep-alive connections.
// The connections are closed once it is done, so tunnels do not pile
// up in the proxies from one measurement to the next.
func (e *env) keepAlive(rt route, conns int, d time.Duration) loadResult {
	var clients []*client
	defer func() {
		for _, c := range clients {
			c.hc.CloseIdleConnections()
		}
	}()
	return load(conns, d, func() func() error {
		c := e.client(rt, true)
		clients = append(clients, c)
		c.get() // warm: tunnel, handshake and leaf minted before timing
		return c.get
	})
}

// newTunnels measures requests/s when every request opens a new tunnel.
func (e *env) newTunnels(rt route, workers int, d time.Duration) loadResult {
	return load(workers, d, func() func() error {
		return func() error {
			c := e.client(rt, false)
			defer c.hc.CloseIdleConnections()
			return c.get()
		}
	})
}

// latency is the median of sequential requests on one warm connection.
func (e *env) latency(rt route, d time.Duration) (time.Duration, error) {
	c := e.client(rt, true)
	defer c.hc.CloseIdleConnections()
	if err := c.get(); err != nil {
		return 0, err
	}
	var samples []time.Duration
	stop := time.Now().Add(d)
	for time.Now().Before(stop) {
		t0 := time.Now()
		if err := c.get(); err != nil {
			return 0, err
		}
		samples = append(samples, time.Since(t0))
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	return samples[len(samples)/2], nil
}

// idleTunnels opens n tunnels through the proxy, each with one completed
// request, holds them idle and returns the proxy's VmHWM and VmRSS in KiB.
func (e *env) idleTunnels(p *process, n, workers int) (hwm, rss int64, opened int, err error) {
	conns := make([]net.Conn, 0, n)
	var mu sync.Mutex
	var firstErr error
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				c, err := e.openTunnel(p.addr)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
				} else {
					conns = append(conns, c)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(time.Second)
	hwm, rss, err = procStatus(p.cmd.Process.Pid)
	if err == nil && firstErr != nil {
		err = fmt.Errorf("%d of %d tunnels opened; first failure: %w", len(conns), n, firstErr)
	}
	return hwm, rss, len(conns), err
}

// openTunnel does CONNECT, the TLS handshake and one request, and leaves
// the tunnel open and idle.
func (e *env) openTunnel(proxyAddr string) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", proxyAddr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", benchHost, benchHost)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		conn.Close()
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		conn.Close()
		return nil, fmt.Errorf("CONNECT: %s", resp.Status)
	}
	tc := tls.Client(conn, &tls.Config{ServerName: benchHost, RootCAs: e.sandboxCA.Pool(), NextProtos: []string{"http/1.1"}})
	fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer omnia-injected-bench\r\n\r\n", benchPath, benchHost)
	tbr := bufio.NewReader(tc)
	resp, err = http.ReadResponse(tbr, &http.Request{Method: http.MethodGet})
	if err != nil {
		conn.Close()
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		conn.Close()
		return nil, fmt.Errorf("GET through the tunnel: %s", resp.Status)
	}
	conn.SetDeadline(time.Time{})
	return tc, nil
}

// busyTunnels runs conns keep-alive connections through p for d and
// returns the largest VmRSS p reached meanwhile, in KiB.
func (e *env) busyTunnels(p *process, conns int, d time.Duration) (int64, loadResult) {
	s := sampleRSS(p.cmd.Process.Pid)
	res := e.keepAlive(e.injected(p.name, p.addr), conns, d)
	return s.stop(), res
}
