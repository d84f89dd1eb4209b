package proxy

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
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

// bulkBytes is n pseudo-random bytes, as a compressed archive holds.
func bulkBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// repeatReader reads block over and over.
type repeatReader struct {
	block []byte
	off   int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.block[r.off:])
	r.off = (r.off + n) % len(r.block)
	return n, nil
}

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
		io.Copy(w, io.LimitReader(&repeatReader{block: block}, n))
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
	block := bulkBytes(64 << 10)
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
			req, err := http.NewRequest(http.MethodPut, "https://api.github.com/upload", io.LimitReader(&repeatReader{block: block}, size))
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
