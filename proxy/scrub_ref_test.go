package proxy

import (
	"bytes"
	"io"
	"sort"
)

// This file keeps the body scrubber as it was before the scan became
// one pass for all values (a flattened copy of the text searched once per
// value), as the reference the differential test holds the scrubber to:
// the same bytes out for the same input, however it is split into reads.

// refScrubReader is ScrubReader as it was: it returns src with every injected value masked by as many
// '*' as it has bytes, so a Content-Length stays true. A value is found
// whole or wrapped into lines: one line break (LF, CRLF or CR) may come
// between any two of its bytes, as MIME (76 characters, CRLF), PEM (64,
// LF) and other encoders wrap base64 and hex, and the bytes of the value
// are masked while the line breaks stay. Two line breaks in a row (a
// blank line) end a value, since no wrapping encoder writes one.
//
// It holds back only while the data read so far ends with the start of a
// value, perhaps followed by one line break: at most the longest value
// less one byte, with the line breaks among those bytes (three times that
// at worst, for a break after each byte). So a value split across reads
// is caught, and a stream that pauses between events (Server-Sent
// Events, each ended by a blank line) is not delayed. The reader works in
// buf, half of it for what it reads and half for that text with its line
// breaks taken out, and buf must not be used elsewhere until it is done;
// one is allocated when buf is shorter than eight times the longest
// value.
func refScrubReader(in Injected, src io.Reader, buf []byte) io.Reader {
	if len(in.values) == 0 {
		return src
	}
	r := &refReader{src: src}
	longest := 0
	for _, v := range in.values {
		r.pats = append(r.pats, []byte(v.v))
		longest = max(longest, len(v.v))
	}
	if len(buf) < 8*longest {
		buf = make([]byte, max(32<<10, 8*longest))
	}
	half := len(buf) / 2
	r.buf, r.flat = buf[:half], buf[half:2*half]
	return r
}

// refReader is the reader ScrubReader returns. Occurrences are found
// in the bytes as read, never in bytes already masked, so values that
// overlap each other or themselves are masked whole, and the output does
// not depend on how the input was split into reads.
type refReader struct {
	src  io.Reader
	pats [][]byte
	buf  []byte // as read, unmasked
	// flat is buf[:end] without its line breaks, where values are
	// searched for; segs maps it back to buf. Where buf holds no line
	// break, the search is in buf itself.
	flat []byte
	segs []refSegment
	// masked are the ranges of buf, sorted and disjoint, that hold a
	// value.
	masked [][2]int
	// buf[start:safe] is scanned and ready; buf[safe:end] is held back,
	// the start of a value that the next read may complete.
	start, safe, end int
	err              error
}

// refSegment is a run of flat that is one run of buf: flat[f:f+n] is
// buf[b:b+n].
type refSegment struct{ f, b, n int }

// Read returns scanned bytes, masked, reading and scanning more when
// none are ready.
func (r *refReader) Read(p []byte) (int, error) {
	for r.start == r.safe {
		if r.err != nil {
			if r.safe == r.end {
				return 0, r.err
			}
			r.safe = r.end // the end of the stream: what was held back is not a value
			break
		}
		r.compact()
		m, err := r.src.Read(r.buf[r.end:])
		r.end += m
		r.err = err
		hold := r.scan()
		r.safe = r.end
		if r.err == nil {
			r.safe -= hold
		}
	}
	n := copy(p, r.buf[r.start:r.safe])
	for _, m := range r.masked {
		lo, hi := max(m[0], r.start), min(m[1], r.start+n)
		for i := lo; i < hi; i++ {
			p[i-r.start] = '*'
		}
	}
	r.start += n
	return n, nil
}

// compact moves what was held back to the front of buf, with its masks.
func (r *refReader) compact() {
	off := r.safe
	n := copy(r.buf, r.buf[off:r.end])
	keep := r.masked[:0]
	for _, m := range r.masked {
		if m[1] > off {
			keep = append(keep, [2]int{max(m[0], off) - off, m[1] - off})
		}
	}
	r.masked = keep
	r.start, r.safe, r.end = 0, 0, n
}

// scan records every occurrence of every pattern in buf[:end],
// overlapping ones included, and returns how many bytes at its end to
// hold back: those that may begin a value the next read completes. An
// occurrence already recorded (it lay in what was held back) is
// recorded again, harmlessly.
func (r *refReader) scan() int {
	b := r.flatten()
	for _, p := range r.pats {
		// Search for the value's first 32 bytes, which bytes.Index
		// finds with vector instructions, then check the rest: a
		// longer needle (the base64 of basic credentials) falls back to
		// Rabin-Karp, several times slower.
		anchor := p[:min(len(p), 32)]
		for i := 0; ; {
			j := bytes.Index(b[i:], anchor)
			if j < 0 {
				break
			}
			if bytes.HasPrefix(b[i+j:], p) {
				r.maskFlat(i+j, i+j+len(p))
			}
			i += j + 1
		}
	}
	hold := refHeldBack(b, r.pats)
	if hold == 0 {
		return 0
	}
	return r.end - r.inBuf(len(b)-hold)
}

// flatten returns the text values are searched in: buf[:end] itself if
// it holds no line break, else flat, filled with it less each single
// line break and with every other run of line breaks (a blank line)
// written as one '\n', which no value holds, so no occurrence spans it.
// A run at the end is judged as it stands: held back with the start of a
// value before it, it is judged again with what the next read adds.
func (r *refReader) flatten() []byte {
	b := r.buf[:r.end]
	r.segs = r.segs[:0]
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		r.segs = append(r.segs, refSegment{f: 0, b: 0, n: len(b)})
		return b
	}
	f := 0
	for i := 0; i < len(b); {
		j := i + refNextBreak(b[i:])
		if j > i {
			r.segs = append(r.segs, refSegment{f: f, b: i, n: j - i})
			f += copy(r.flat[f:], b[i:j])
		}
		k := j
		for k < len(b) && (b[k] == '\n' || b[k] == '\r') {
			k++
		}
		if k > j && !refLineBreak(b[j:k]) {
			r.segs = append(r.segs, refSegment{f: f, b: j, n: 1})
			r.flat[f] = '\n'
			f++
		}
		i = k
	}
	return r.flat[:f]
}

// nextBreak returns the index of the first CR or LF in b, or len(b).
func refNextBreak(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	if n < 0 {
		n = len(b)
	}
	if c := bytes.IndexByte(b[:n], '\r'); c >= 0 {
		return c
	}
	return n
}

// refLineBreak reports whether s, a run of CR and LF, is one line
// break: LF, CRLF or CR.
func refLineBreak(s []byte) bool { return len(s) == 1 || string(s) == "\r\n" }

// inBuf returns the offset in buf of flat's byte at f.
func (r *refReader) inBuf(f int) int {
	k := sort.Search(len(r.segs), func(k int) bool { return r.segs[k].f+r.segs[k].n > f })
	s := r.segs[k]
	return s.b + f - s.f
}

// maskFlat masks the bytes of buf that flat[lo:hi] was taken from.
func (r *refReader) maskFlat(lo, hi int) {
	k := sort.Search(len(r.segs), func(k int) bool { return r.segs[k].f+r.segs[k].n > lo })
	for ; k < len(r.segs) && r.segs[k].f < hi; k++ {
		s := r.segs[k]
		r.mask(s.b+max(lo, s.f)-s.f, s.b+min(hi, s.f+s.n)-s.f)
	}
}

// mask adds [lo, hi) to the masked ranges: it sorts them by start and
// merges those that overlap or touch, a plainer way than the scrubber's
// search for the ranges the new one meets.
func (r *refReader) mask(lo, hi int) {
	all := append(r.masked, [2]int{lo, hi})
	sort.Slice(all, func(a, b int) bool { return all[a][0] < all[b][0] })
	merged := all[:1]
	for _, m := range all[1:] {
		if last := &merged[len(merged)-1]; m[0] <= last[1] {
			last[1] = max(last[1], m[1])
		} else {
			merged = append(merged, m)
		}
	}
	r.masked = merged
}

// heldBack returns the length of the longest suffix of b that is a
// proper prefix of some pattern: bytes that may begin a value the next
// read completes.
func refHeldBack(b []byte, pats [][]byte) int {
	hold := 0
	for _, p := range pats {
		// Only a suffix longer than the one already found matters, and
		// only a proper prefix of p: it starts after len(b)-len(p).
		end := len(b) - hold
		for i := max(len(b)-len(p)+1, 0); i < end; {
			j := bytes.IndexByte(b[i:end], p[0])
			if j < 0 {
				break
			}
			i += j
			if bytes.HasPrefix(p, b[i:]) {
				hold = len(b) - i
				break
			}
			i++
		}
	}
	return hold
}
