package proxy

import (
	"bytes"
	"io"
	"testing"

	"keyhole.dev/keyhole/internal/bulk"
)

// TestScrubReaderChoosesSearch: past the first 64 KiB of a body, the
// scrubber samples random bytes (a compressed download), where the
// anchored search stops every 256 bytes, and keeps text anchored, where
// sampling would look closer at many of the pairs it reads.
func TestScrubReaderChoosesSearch(t *testing.T) {
	const token = "ghp_0123456789abcdefghij0123456789abcdef"
	var in Injected
	in.addEncoded(token)
	in.add("Bearer " + token)
	text := bytes.Repeat([]byte(`{"id":1296269,"name":"widgets","full_name":"acme/widgets"},`), 1<<20/58+1)[:1<<20]
	for name, tc := range map[string]struct {
		body    []byte
		sampled bool
	}{
		"random bytes": {body: bulk.Bytes(1 << 20), sampled: true},
		"JSON text":    {body: text},
		"short random": {body: bulk.Bytes(decideAfter / 2)}, // never decided: too short to pay for it
	} {
		t.Run(name, func(t *testing.T) {
			r := in.ScrubReader(tlsReads(tc.body), make([]byte, 32<<10))
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, tc.body) {
				t.Fatalf("the body changed (%v)", err)
			}
			if s := r.(*scrubReader).s; (s.pairs != nil) != tc.sampled {
				t.Errorf("sampled %v, want %v", s.pairs != nil, tc.sampled)
			}
		})
	}
}
