package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// TestScrubReaderAsBefore holds the one-pass scan, anchored and
// sampled, to the scrubber it replaced (refScrubReader): the same bytes
// out for random inputs of a small alphabet (so values, their starts and
// line breaks meet often), random values and random reads, with buffers
// of several sizes.
func TestScrubReaderAsBefore(t *testing.T) {
	t.Run("anchored", func(t *testing.T) { scrubAsBefore(t, false) })
	t.Run("sampled", func(t *testing.T) { scrubAsBefore(t, true) })
}

func scrubAsBefore(t *testing.T, sampled bool) {
	r := rand.New(rand.NewPCG(7, 11))
	const alphabet = "abcab\r\n\nxyz*"
	pick := func(n int, from string) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = from[r.IntN(len(from))]
		}
		return b
	}
	for round := range 20000 {
		var in Injected
		for range 1 + r.IntN(3) {
			in.addOne(string(pick(MinScrubLen+r.IntN(6), "abcxyz")))
		}
		if in.Empty() {
			continue
		}
		var data []byte
		for range r.IntN(8) {
			switch r.IntN(3) {
			case 0: // a value, wrapped at random
				v := in.values[r.IntN(len(in.values))].v
				for i := range len(v) {
					data = append(data, v[i])
					if r.IntN(4) == 0 {
						data = append(data, []string{"\n", "\r\n", "\r", "\n\n"}[r.IntN(4)]...)
					}
				}
			case 1: // a value's start
				v := in.values[r.IntN(len(in.values))].v
				data = append(data, v[:r.IntN(len(v))]...)
			default:
				data = append(data, pick(r.IntN(20), alphabet)...)
			}
		}
		sizes := make([]int, 1+r.IntN(4))
		for i := range sizes {
			sizes[i] = 1 + r.IntN(40)
		}
		bufLen := []int{0, 64, 200}[r.IntN(3)]
		want, err := io.ReadAll(refScrubReader(in, &chunked{src: bytes.Clone(data)}, make([]byte, 2*bufLen)))
		if err != nil {
			t.Fatal(err)
		}
		// The scrubber read into buffers of random sizes: small ones go
		// through its own buffer, larger ones are the window.
		sr := in.ScrubReader(&chunked{src: bytes.Clone(data), sizes: sizes}, make([]byte, bufLen))
		if sampled {
			sr.(*scrubReader).s.sample()
		}
		got, err := io.ReadAll(&randomReads{r: sr, rnd: r})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			var vs []string
			for _, v := range in.values {
				vs = append(vs, v.v)
			}
			t.Fatalf("round %d: values %q, %q in reads of %v: %q, before %q", round, vs, data, sizes, got, want)
		}
	}
}

// randomReads passes each Read on with a buffer of a random size, from
// one byte to more than the window.
type randomReads struct {
	r   io.Reader
	rnd *rand.Rand
}

func (rr *randomReads) Read(p []byte) (int, error) {
	return rr.r.Read(p[:min(len(p), 1+rr.rnd.IntN(300))])
}
