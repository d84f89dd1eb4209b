package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServerAdminCaps: the admin port, which the sandbox can reach, has
// the proxy port's caps. Stalled headers of a megabyte each, one per
// connection, held a megabyte each for as long as they lasted (150 such
// raised the proxy's RSS by 255 MiB); now a header is cut at 64 KiB, a
// stalled one is dropped after the header timeout, and past
// Options.MaxAdminConns new connections wait to be accepted.
func TestServerAdminCaps(t *testing.T) {
	dial := func(t *testing.T, h *harness) net.Conn {
		c, err := net.DialTimeout("tcp", h.admin, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	healthz := func(c net.Conn, within time.Duration) (*http.Response, error) {
		c.SetDeadline(time.Now().Add(within))
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n")
		return http.ReadResponse(bufio.NewReader(c), nil)
	}
	t.Run("a header is cut at 64 KiB", func(t *testing.T) {
		h := newHarness(t)
		c := dial(t, h)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		go func() {
			io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: admin\r\nX-Pad: ")
			io.WriteString(c, strings.Repeat("a", 1<<20)) // fails once the server closes
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer to a 1 MiB header: %v", err)
		}
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("%s, want 431", resp.Status)
		}
	})
	t.Run("a stalled header is dropped after the header timeout", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.Timeouts.ReadHeader = 300 * time.Millisecond })
		c := dial(t, h)
		io.WriteString(c, "GET /metrics HTTP/1.1\r\nX-Pad: aaaa")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		io.Copy(io.Discard, c)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("the stalled connection stayed open %v", d)
		}
	})
	t.Run("stalled connections hold the slots, then free them", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.MaxAdminConns = 3 })
		var stalled []net.Conn
		for range 3 {
			c := dial(t, h)
			io.WriteString(c, "GET /metrics HTTP/1.1\r\nX-Pad: "+strings.Repeat("a", 60<<10))
			stalled = append(stalled, c)
		}
		time.Sleep(100 * time.Millisecond)
		c := dial(t, h)
		if _, err := healthz(c, 300*time.Millisecond); err == nil || !isTimeout(err) {
			t.Fatalf("a connection past the cap was served (%v)", err)
		}
		stalled[0].Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("once a slot was free: %v %v", resp, err)
		}
	})
}
