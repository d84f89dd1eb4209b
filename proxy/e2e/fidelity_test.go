//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strings"
	"testing"
)

// TestContentNegotiationUntouched checks that the proxy forwards the
// sandbox's own Accept-Encoding, adds none, and passes a compressed body
// back as the upstream sent it: a proxy that asks for gzip itself and
// decodes it changes what the client receives and spends its own CPU on
// whatever the upstream compresses.
func TestContentNegotiationUntouched(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	plain := bytes.Repeat([]byte("widgets "), 128)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	up := startUpstream(t, w.upstreamCA, []string{"api.github.com"}, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			rw.Header().Set("Content-Encoding", "gzip")
			rw.Write(gz.Bytes())
			return
		}
		rw.Write(plain)
	}))
	w.api = up
	w.proxy.stop()
	w.proxy = w.startProxy(t, "testdata/github-acme.json")

	tests := map[string]struct {
		args         []string
		wantAccept   bool // the upstream sees an Accept-Encoding
		wantEncoding string
	}{
		"client asks for no compression": {wantEncoding: ""},
		"client asks for gzip":           {args: []string{"-H", "Accept-Encoding: gzip"}, wantAccept: true, wantEncoding: "gzip"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(up.requests())
			res := w.curl(t, "https://api.github.com/repos/acme/widgets", tc.args...)
			if res.code != 200 {
				t.Fatalf("status %d", res.code)
			}
			seen := up.requests()[before:]
			if len(seen) != 1 {
				t.Fatalf("the upstream saw %d requests", len(seen))
			}
			if got := seen[0].Header.Values("Accept-Encoding"); (len(got) > 0) != tc.wantAccept {
				t.Errorf("the upstream saw Accept-Encoding %q; the sandbox sent %v", got, tc.args)
			}
			if got := res.header.Get("Content-Encoding"); got != tc.wantEncoding {
				t.Errorf("the client got Content-Encoding %q, want %q", got, tc.wantEncoding)
			}
			if tc.wantEncoding == "gzip" && res.body != gz.String() {
				t.Errorf("the compressed body was altered")
			}
		})
	}
}
