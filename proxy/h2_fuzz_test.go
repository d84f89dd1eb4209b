package proxy

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Frames is a client's frames after the preface, as a seed.
func h2Frames(reqs ...h2Req) []byte {
	var out bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i, req := range reqs {
		id := uint32(2*i + 1)
		hb.Reset()
		for _, f := range req.fields {
			enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: len(req.data) == 0 && len(req.trail) == 0, EndHeaders: true})
		for j, d := range req.data {
			fr.WriteData(id, j == len(req.data)-1 && len(req.trail) == 0, []byte(d))
		}
		if len(req.trail) > 0 {
			hb.Reset()
			for _, f := range req.trail {
				enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value})
			}
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		}
	}
	return out.Bytes()
}

// FuzzH2Tunnel feeds frames to the sandbox leg of an intercepted tunnel
// to github.com (its rules allow a POST with a body, and every request
// they allow carries the credential) whose upstream echoes the credential back everywhere it
// can. Whatever the frames, the sandbox never reads the credential, and
// the upstream, which speaks HTTP/1.1, never reads a request the sandbox
// smuggled into a body.
func FuzzH2Tunnel(f *testing.F) {
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: github.com\r\n\r\n"
	post := func(more ...h2Field) []h2Field {
		return h2Get("POST", "github.com", "/acme/widgets/git-upload-pack", more...)
	}
	for _, seed := range [][]h2Req{
		{{fields: h2Get("GET", "github.com", "/acme/widgets/info/refs")}},
		{{fields: post(h2Field{"content-length", "0"}), data: []string{smuggled}}},
		{{fields: post(h2Field{"content-length", "5"}), data: []string{"hello", smuggled}}},
		{{fields: post(h2Field{"transfer-encoding", "chunked"}), data: []string{"0\r\n\r\n" + smuggled}}},
		{{fields: post(h2Field{"content-type", "application/grpc"}, h2Field{"te", "trailers"}), data: []string{"\x00\x00\x00\x00\x00"}}},
		{{fields: post(h2Field{"trailer", "x-a"}), data: []string{"a"}, trail: []h2Field{{"x-a", "b"}}}},
		{{fields: h2Get("GET", "github.com", "/acme/widgets/info/refs", h2Field{"host", "api.github.com"})}, {fields: h2Get("GET", "api.github.com", "/x")}},
		{{fields: []h2Field{{":method", "CONNECT"}, {":authority", "github.com:443"}}}},
	} {
		f.Add(h2Frames(seed...))
	}
	var mu sync.Mutex
	var paths []string
	echo := echoUpstream(&sync.Map{})
	ca := newTestCA(f, "fuzz upstream CA")
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		echo(w, r)
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(f, "api.github.com", "github.com")}}
	up.StartTLS()
	f.Cleanup(up.Close)
	h := newHarness(f, resolveTo(ca, up.Listener.Addr().String(), "api.github.com", "github.com"))
	f.Fuzz(func(t *testing.T, frames []byte) {
		sandbox, proxySide := net.Pipe()
		defer sandbox.Close()
		tc := &tunnelConn{Conn: proxySide, connect: "github.com", sni: "github.com", release: func() {}}
		if !h.srv.innerH2Ln.push(tc) {
			t.Fatal("the HTTP/2 tunnels' listener is closed")
		}
		var got bytes.Buffer
		read := make(chan struct{})
		go func() {
			defer close(read)
			buf := make([]byte, 32<<10)
			end := time.Now().Add(2 * time.Second)
			for {
				if time.Now().After(end) {
					return // a stream that never ends: what came is checked
				}
				sandbox.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				n, err := sandbox.Read(buf)
				got.Write(buf[:n])
				if err != nil {
					return
				}
			}
		}()
		sandbox.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(sandbox, http2.ClientPreface)
		sandbox.Write(frames)
		<-read
		sandbox.Close()
		// What the sandbox read is frames, its header blocks compressed:
		// decode them to look for the credential in every header, and
		// look in the raw bytes for it in DATA.
		if holdsSecret(got.String()) || holdsSecret(decodeHeaderBlocks(got.Bytes())) {
			t.Logf("the sandbox read %q", decodeHeaderBlocks(got.Bytes()))
			t.Fatalf("the credential reached the sandbox")
		}

		mu.Lock()
		defer mu.Unlock()
		for _, p := range paths {
			if strings.Contains(p, "smuggled") {
				t.Fatalf("the upstream read a smuggled request: %q", p)
			}
		}
	})
}

// decodeHeaderBlocks decodes the header blocks among frames, as far as
// they are well formed, and returns their fields as text.
func decodeHeaderBlocks(frames []byte) string {
	fr := http2.NewFramer(nil, bytes.NewReader(frames))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 1 << 20
	var b strings.Builder
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if _, ok := err.(http2.StreamError); ok {
				continue
			}
			return b.String()
		}
		if mh, ok := f.(*http2.MetaHeadersFrame); ok {
			for _, hf := range mh.Fields {
				b.WriteString(hf.Name + ": " + hf.Value + "\n")
			}
		}
	}
}
