package proxy

import (
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/bulk"
)

// Bulk transfers through an injected host with response bodies scrubbed:
// a download of any size (a release asset, a tarball) and an upload,
// each over real sockets, the upstream in this process. The benchmark
// bench/proxy measures the same against other proxies; this one is for
// profiling the proxy's side of it (go test -cpuprofile).

// bulkConfig is testConfig with response bodies scrubbed and a rule that
// allows uploads to api.github.com.
var bulkConfig = strings.Replace(strings.Replace(testConfig,
	`"rules": [{"methods": ["GET", "HEAD"], "pathPrefixes": ["/repos/acme/widgets"`,
	`"rules": [{"methods": ["PUT"], "pathPrefixes": ["/upload"]}, {"methods": ["GET", "HEAD"], "pathPrefixes": ["/repos/acme/widgets"`, 1),
	`"passthrough"`, `"scrubResponseBodies": true, "passthrough"`, 1)

// bulkUpstream answers GET /repos/acme/widgets/tarball?n=N with N bytes
// of block repeated, with a Content-Length, and PUT /upload with the
// length of the body it read, as JSON.
func bulkUpstream(block []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			json.NewEncoder(w).Encode(map[string]int64{"received": n})
			return
		}
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		io.Copy(w, io.LimitReader(bulk.Repeat(block), n))
	})
}

// newBulkHarness is a proxy scrubbing response bodies, with api.github.com
// served by h.
func newBulkHarness(t testing.TB, h http.Handler) *harness {
	t.Helper()
	ca := newTestCA(t, "bulk upstream CA")
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "api.github.com")}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return newHarnessConfig(t, bulkConfig, resolveToTB(ca, srv.Listener.Addr().String(), "api.github.com"))
}

// resolveToTB is resolveTo for benchmarks too.
func resolveToTB(ca *testCA, addr string, names ...string) harnessOpt {
	return func(o *Options) {
		o.UpstreamRoots.AddCert(ca.cert)
		for _, n := range names {
			o.Resolve[n+":443"] = addr
		}
	}
}

// BenchmarkServerBulk measures a 64 MiB download and a 64 MiB upload
// through the proxy, in MB/s of body (both ends and the upstream share
// the CPU with the proxy).
func BenchmarkServerBulk(b *testing.B) {
	const size = 64 << 20
	block := bulk.Bytes(64 << 10)
	h := newBulkHarness(b, bulkUpstream(block))
	c := h.client()
	c.Timeout = 0
	b.Run("download", func(b *testing.B) {
		b.SetBytes(size)
		buf := make([]byte, 64<<10)
		for b.Loop() {
			resp, err := c.Get("https://api.github.com/repos/acme/widgets/tarball?n=" + strconv.Itoa(size))
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
			resp.Body.Close()
			if err != nil || n != size {
				b.Fatalf("%d bytes of %d: %v", n, size, err)
			}
		}
	})
	b.Run("upload", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			req, err := http.NewRequest(http.MethodPut, "https://api.github.com/upload", io.LimitReader(bulk.Repeat(block), size))
			if err != nil {
				b.Fatal(err)
			}
			req.ContentLength = size
			req.Header.Set("Content-Type", "application/octet-stream")
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var got struct{ Received int64 }
			err = json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if err != nil || got.Received != size {
				b.Fatalf("%s: upstream received %d bytes of %d (%v)", resp.Status, got.Received, size, err)
			}
		}
	})
}

// TestServerBulkScrubbed downloads 1 MiB of random bytes, as a release
// asset holds, through the proxy with response bodies scrubbed, the
// credential planted in it as it is, wrapped by a CRLF and hex-encoded,
// about the edges of TLS records (16 KiB), of the forwarder's reads
// (32 KiB), before and after the point where the scrubber chooses how to
// search (64 KiB) and at the very end: every one is masked, byte for
// byte, and nothing else changes.
func TestServerBulkScrubbed(t *testing.T) {
	const size = 1 << 20
	data := bulk.Bytes(size)
	hexCanary := hex.EncodeToString([]byte(canary))
	wrapped := canary[:9] + "\r\n" + canary[9:]
	plants := []struct {
		at int
		v  string
	}{
		{0, canary},
		{16<<10 - 5, canary},
		{32<<10 - 11, wrapped},
		{48<<10 - 20, hexCanary},
		{64<<10 - 3, canary},
		{64<<10 + 100, wrapped},
		{96<<10 - 1, hexCanary},
		{500_000, canary},
		{size - len(canary), canary},
	}
	want := bytes.Clone(data)
	for _, p := range plants {
		copy(data[p.at:], p.v)
		for i := range len(p.v) {
			if c := p.v[i]; c != '\r' && c != '\n' {
				want[p.at+i] = '*'
			} else {
				want[p.at+i] = c
			}
		}
	}
	h := newBulkHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		// Writes of odd sizes, so records do not fall on round offsets.
		for b := data; len(b) > 0; {
			n := min(len(b), 7777)
			w.Write(b[:n])
			b = b[n:]
		}
	}))
	resp, err := h.client().Get("https://api.github.com/repos/acme/widgets/tarball")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(got) != size {
		t.Fatalf("%s, %d bytes; want 200, %d", resp.Status, len(got), size)
	}
	for _, p := range plants {
		if g, w := got[p.at:p.at+len(p.v)], want[p.at:p.at+len(p.v)]; !bytes.Equal(g, w) {
			t.Errorf("at %d: %q, want %q", p.at, g, w)
		}
	}
	if !bytes.Equal(got, want) {
		t.Error("the body differs from the upstream's elsewhere than where the credential lay")
	}
	if bytes.Contains(got, []byte(canary)) || bytes.Contains(got, []byte(hexCanary)) {
		t.Error("the credential reached the sandbox")
	}
}

// deadlineWriter is a ResponseWriter that counts the write deadlines set
// on it.
type deadlineWriter struct {
	httptest.ResponseRecorder
	deadlines int
	last      time.Time
}

func (w *deadlineWriter) SetWriteDeadline(t time.Time) error {
	w.deadlines++
	w.last = t
	return nil
}

// TestCopyBodyWriteDeadline: copying a long body moves the write
// deadline on once per sixteenth of the stall timeout, not before every
// write, and each write may still wait at least 15/16 of it.
func TestCopyBodyWriteDeadline(t *testing.T) {
	const stall = time.Minute
	f := newForwarder("https", nil, nil)
	f.stall = stall
	w := &deadlineWriter{ResponseRecorder: *httptest.NewRecorder()}
	body := bulk.Bytes(1 << 20)
	start := time.Now()
	if err := f.copyBody(w, http.NewResponseController(w), tlsReads(body), false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.Body.Bytes(), body) {
		t.Fatal("the body changed")
	}
	// 64 writes of 16 KiB, well within a sixteenth of a minute.
	if w.deadlines != 1 {
		t.Errorf("the write deadline was set %d times for 64 writes, want once", w.deadlines)
	}
	if d := w.last.Sub(start); d < stall*15/16 {
		t.Errorf("the last write could wait %v, want at least %v", d, stall*15/16)
	}
}
