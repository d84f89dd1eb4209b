package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkServerKeepAlive measures the whole hot path — decide, read
// the Secret, inject, forward over a pooled upstream connection — on
// loopback, beside the same request made directly to the upstream.
func BenchmarkServerKeepAlive(b *testing.B) {
	h := newHarness(b)
	h.ageSecrets()
	direct := &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: h.upCA.pool, ServerName: "api.github.com"},
		MaxIdleConnsPerHost: 64,
	}}
	run := func(b *testing.B, c *http.Client, url string) {
		b.SetParallelism(8) // 16 concurrent connections on 2 CPUs
		before := cpuTime()
		defer func() { b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op") }()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := c.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatal(resp.Status)
				}
			}
		})
	}
	b.Run("proxy", func(b *testing.B) {
		c := h.client()
		c.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
		run(b, c, "https://api.github.com/repos/acme/widgets")
	})
	b.Run("direct", func(b *testing.B) {
		run(b, direct, "https://"+h.api.srv.Listener.Addr().String()+"/repos/acme/widgets")
	})
	// The same with scrubResponseBodies on: each response body is
	// scanned for the credential.
	b.Run("proxy scrubbing bodies", func(b *testing.B) {
		writeAtomic(b, h.cfgPath, []byte(strings.Replace(testConfig, `"passthrough"`, `"scrubResponseBodies": true, "passthrough"`, 1)))
		eventually(b, "the config with scrubResponseBodies", func() bool { return h.srv.state.Load().cfg.ScrubResponseBodies })
		c := h.client()
		c.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
		run(b, c, "https://api.github.com/repos/acme/widgets")
	})
}

// cpuTime is the process's user+system CPU time: on a shared machine it
// is a steadier cost measure than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkServerNewTunnel measures a CONNECT, a TLS handshake with the
// cached leaf and one injected request per operation: the cost of a
// client that opens a new connection for every request (no resumption).
func BenchmarkServerNewTunnel(b *testing.B) {
	h := newHarness(b)
	before := cpuTime()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
			resp := roundTrip(b, c, br, "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nConnection: close\r\n\r\n")
			c.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	})
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkServerNewConnection compares the cost of one new connection
// (handshake with the cached leaf, one injected request, close) reaching
// the proxy as a CONNECT tunnel and as a redirected connection on the
// transparent listener, which reads the ClientHello twice (once to learn
// the name, once to terminate). The original destination comes from a
// stub here: the real SO_ORIGINAL_DST is one getsockopt.
func BenchmarkServerNewConnection(b *testing.B) {
	h := newHarness(b)
	h.ageSecrets()
	const req = "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nConnection: close\r\n\r\n"
	run := func(b *testing.B, open func() (*tls.Conn, *bufio.Reader)) {
		before := cpuTime()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c, br := open()
				resp := roundTrip(b, c, br, req)
				c.Close()
				if resp.StatusCode != 200 {
					b.Fatal(resp.Status)
				}
			}
		})
		b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
	}
	b.Run("connect", func(b *testing.B) {
		run(b, func() (*tls.Conn, *bufio.Reader) { return h.tlsTunnel("api.github.com", "api.github.com", false) })
	})
	b.Run("transparent", func(b *testing.B) {
		run(b, func() (*tls.Conn, *bufio.Reader) {
			raw, err := net.DialTimeout("tcp", h.trans, 5*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			c := tls.Client(raw, &tls.Config{ServerName: "api.github.com", RootCAs: h.sandbox.pool, NextProtos: []string{"http/1.1"}})
			if err := c.Handshake(); err != nil {
				b.Fatal(err)
			}
			return c, bufio.NewReader(c)
		})
	})
}

// BenchmarkServerManyHeaders measures what a sandbox can make one
// request cost the proxy by filling the 64 KiB header limit with empty
// headers (about 12,000 distinct names), against a plain request, on a
// path the rules refuse (no upstream) and on an allowed one (forwarded,
// the upstream parsing them too, in this process). CPU per operation is
// the whole process's.
func BenchmarkServerManyHeaders(b *testing.B) {
	h := newHarness(b)
	h.ageSecrets()
	var many strings.Builder
	for i := 0; many.Len() < 60<<10; i++ {
		fmt.Fprintf(&many, "%x:\r\n", i)
	}
	for _, headers := range []struct{ name, raw string }{{"plain", ""}, {"12k headers", many.String()}} {
		for _, path := range []string{"/user", "/repos/acme/widgets"} {
			b.Run(headers.name+" "+path, func(b *testing.B) {
				c, br := h.tlsTunnel("api.github.com", "api.github.com", false)
				defer c.Close()
				raw := "GET " + path + " HTTP/1.1\r\nHost: api.github.com\r\n" + headers.raw + "\r\n"
				before := cpuTime()
				for b.Loop() {
					c.SetDeadline(time.Now().Add(10 * time.Second))
					roundTrip(b, c, br, raw)
				}
				b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
