// Package bulk makes the bodies of bulk transfers for the proxy's tests
// and bench/proxy: pseudo-random bytes, as a compressed archive holds,
// the same on every run, and a reader that repeats a block of them for as
// long as it is read, so a body of gigabytes holds only the block.
package bulk

import (
	"io"
	"math/rand/v2"
)

// Bytes returns n pseudo-random bytes, the same for every call: a proxy
// scanning a body for a credential sees bytes as varied as a tarball's.
func Bytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Repeat returns a reader that reads block over and over and never ends:
// io.LimitReader gives it a length.
func Repeat(block []byte) io.Reader {
	return &repeater{block: block}
}

type repeater struct {
	block []byte
	off   int
}

func (r *repeater) Read(p []byte) (int, error) {
	n := copy(p, r.block[r.off:])
	r.off = (r.off + n) % len(r.block)
	return n, nil
}
