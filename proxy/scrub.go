package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// MinScrubLen is the shortest credential value the proxy scrubs from
// responses. Shorter values (a basic-auth user name such as "oauth2")
// are not secrets worth the damage of masking every short string that
// happens to match them.
const MinScrubLen = 8

// Injected is what one injection put on a request: the credential values
// the proxy must never hand back to the sandbox, scrubbed from every
// header of the response (interim, final, trailers) and, when the config
// asks, from its body. The values are the Secret keys the injection read
// and the credential as it went out where that is not simply one of
// them (the base64 of Authorization: Basic). Every printed form of an
// Injected is redacted. The zero value scrubs nothing.
type Injected struct {
	values []Secret // no value contains another
}

// String returns the redacted form.
func (in Injected) String() string { return redacted }

// GoString returns the redacted form, for %#v.
func (in Injected) GoString() string { return redacted }

// Format prints the redacted form for every verb.
func (in Injected) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// LogValue logs the redacted form.
func (in Injected) LogValue() slog.Value { return slog.StringValue(redacted) }

// add records v to be scrubbed, with the forms an upstream's echo may
// percent-encode it in (a cookie or a URL built from the header, with
// upper- or lower-case hex): base64 holds '+', '/' and '=', and with the
// substitute form the sandbox chooses the user of a basic credential, so
// it can make the base64 hold them.
func (in *Injected) add(v string) {
	for _, f := range formsOf(&escapedCache, v, escapedForms) {
		in.addOne(f)
	}
}

// escapedForms returns v and its percent-encoded forms, in the order add
// records them.
func escapedForms(v string) []string {
	forms := []string{v}
	for _, e := range [...]string{url.QueryEscape(v), url.PathEscape(v)} {
		if e != v {
			forms = append(forms, e, lowerHexEscapes(e))
		}
	}
	return forms
}

// addEncoded records, besides v itself (add), the encodings an upstream
// may hand a credential value back in: hex in either case, and base64,
// standard and URL-safe, at each of the three offsets v can start at in
// what is encoded. Of each base64 form only the characters that v's own
// bytes determine are recorded, so base64 of anything holding v (the
// bare value, "Bearer v", "user:v", a session cookie's document) holds
// one of them, padded or not, whatever comes before or after.
func (in *Injected) addEncoded(v string) {
	in.add(v)
	for _, f := range formsOf(&encodedCache, v, credentialEncodings) {
		in.addOne(f)
	}
}

// credentialEncodings returns the hex and base64 forms of v, in the order
// addEncoded records them.
func credentialEncodings(v string) []string {
	h := hex.EncodeToString([]byte(v))
	forms := []string{h, strings.ToUpper(h)}
	buf := make([]byte, 2, 2+len(v))
	buf = append(buf, v...)
	for off := range 3 {
		src := buf[2-off:] // off zero bytes, then v
		// Character i holds bits 6i to 6i+5 of src: it is v's alone
		// when it starts at or after v's first bit and ends within
		// its last.
		lo, hi := (8*off+5)/6, 8*len(src)/6
		for _, enc := range [...]*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if e := enc.EncodeToString(src); lo < hi {
				forms = append(forms, e[lo:hi])
			}
		}
	}
	return forms
}

// formsCache keeps the forms computed for the values injected lately:
// the same credential goes out on request after request, and encoding it
// a dozen ways each time was the largest cost the proxy adds to one. It
// holds at most maxCachedValues values and starts afresh when full, so a
// rotated value leaves it soon; the values are the ones the proxy holds
// anyway, and nothing reads the cache but add and addEncoded.
type formsCache struct {
	mu sync.Mutex
	m  map[string][]string
}

const maxCachedValues = 64

var escapedCache, encodedCache formsCache

// formsOf returns forms(v) from c, computing and keeping it on a miss.
// The slice returned is shared: callers only read it.
func formsOf(c *formsCache, v string, forms func(string) []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.m[v]; ok {
		return f
	}
	if c.m == nil || len(c.m) >= maxCachedValues {
		c.m = make(map[string][]string, maxCachedValues)
	}
	f := forms(v)
	c.m[v] = f
	return f
}

// lowerHexEscapes writes the hex digits of s's percent-escapes in lower
// case.
func lowerHexEscapes(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLower(b[i+1]), toLower(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func toLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// addOne records v to be scrubbed, unless it is too short or already
// covered by a value it contains (scrubbing "tok" also scrubs "Bearer
// tok"); a recorded value that contains v gives way to it.
func (in *Injected) addOne(v string) {
	if len(v) < MinScrubLen {
		return
	}
	if in.values == nil {
		// One credential and its forms are about a dozen values:
		// room for them at once, not five regrowths per request.
		in.values = make([]Secret, 0, 16)
	}
	keep := in.values[:0]
	for _, s := range in.values {
		switch {
		case strings.Contains(v, s.v):
			return // v is covered; nothing in values contains another
		case !strings.Contains(s.v, v):
			keep = append(keep, s)
		}
	}
	in.values = append(keep, Secret{v: v})
}

// merge records what o records too.
func (in *Injected) merge(o Injected) {
	for _, v := range o.values {
		in.addOne(v.v)
	}
}

// Empty reports whether there is nothing to scrub.
func (in Injected) Empty() bool { return len(in.values) == 0 }

// ScrubString replaces every injected value in s with [REDACTED] and
// reports whether it replaced any.
func (in Injected) ScrubString(s string) (string, bool) {
	changed := false
	for _, v := range in.values {
		if strings.Contains(s, v.v) {
			s = strings.ReplaceAll(s, v.v, redacted)
			changed = true
		}
	}
	return s, changed
}

// ScrubHeader replaces every injected value in h's values with
// [REDACTED], in place, and returns the names of the headers it changed.
func (in Injected) ScrubHeader(h http.Header) []string {
	if len(in.values) == 0 {
		return nil
	}
	var changed []string
	for k, vv := range h {
		hit := false
		for i, v := range vv {
			if out, ok := in.ScrubString(v); ok {
				vv[i] = out
				hit = true
			}
		}
		if hit {
			changed = append(changed, k)
		}
	}
	return changed
}

// ScrubHeaderNames deletes from h every header whose name holds an
// injected value in any letter case, and returns those names with the
// value redacted, for a log line. An upstream that echoes the credential
// as a header name hands it back whole but for the case of its letters,
// which Go's reader canonicalizes (x-abc-def becomes X-Abc-Def); such a
// name cannot be rewritten into a valid one, so the header goes.
func (in Injected) ScrubHeaderNames(h http.Header) []string {
	var dropped []string
	for k := range h {
		if out, ok := in.scrubFold(k); ok {
			delete(h, k)
			dropped = append(dropped, out)
		}
	}
	return dropped
}

// scrubFold is ScrubString matching the values in any ASCII letter case.
// A value longer than s is skipped at the cost of a length test, so the
// short header names of most responses cost next to nothing.
func (in Injected) scrubFold(s string) (string, bool) {
	changed := false
	for _, v := range in.values {
		for from := 0; from+len(v.v) <= len(s); {
			i := indexFold(s[from:], v.v)
			if i < 0 {
				break
			}
			i += from
			s = s[:i] + redacted + s[i+len(v.v):]
			from = i + len(redacted)
			changed = true
		}
	}
	return s, changed
}

// indexFold is strings.Index ignoring the case of ASCII letters.
func indexFold(s, sub string) int {
	first := toLower(sub[0])
	for i := 0; i+len(sub) <= len(s); i++ {
		if toLower(s[i]) == first && equalFoldASCII(s[i+1:i+len(sub)], sub[1:]) {
			return i
		}
	}
	return -1
}

// equalFoldASCII reports whether a and b, of equal length, are equal but
// for the case of ASCII letters.
func equalFoldASCII(a, b string) bool {
	for i := 0; i < len(a); i++ {
		if toLower(a[i]) != toLower(b[i]) {
			return false
		}
	}
	return true
}

// ScrubReader returns src with every injected value masked by as many
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
func (in Injected) ScrubReader(src io.Reader, buf []byte) io.Reader {
	if len(in.values) == 0 {
		return src
	}
	r := &scrubReader{src: src}
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

// scrubReader is the reader ScrubReader returns. Occurrences are found
// in the bytes as read, never in bytes already masked, so values that
// overlap each other or themselves are masked whole, and the output does
// not depend on how the input was split into reads.
type scrubReader struct {
	src  io.Reader
	pats [][]byte
	buf  []byte // as read, unmasked
	// flat is buf[:end] without its line breaks, where values are
	// searched for; segs maps it back to buf. Where buf holds no line
	// break, the search is in buf itself.
	flat []byte
	segs []segment
	// masked are the ranges of buf, sorted and disjoint, that hold a
	// value.
	masked [][2]int
	// buf[start:safe] is scanned and ready; buf[safe:end] is held back,
	// the start of a value that the next read may complete.
	start, safe, end int
	err              error
}

// segment is a run of flat that is one run of buf: flat[f:f+n] is
// buf[b:b+n].
type segment struct{ f, b, n int }

// Read returns scanned bytes, masked, reading and scanning more when
// none are ready.
func (r *scrubReader) Read(p []byte) (int, error) {
	for r.start == r.safe {
		if r.err != nil {
			if r.safe < r.end { // the end of the stream: what was held back is not a value
				r.safe = r.end
				break
			}
			return 0, r.err
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
func (r *scrubReader) compact() {
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
func (r *scrubReader) scan() int {
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
	hold := heldBack(b, r.pats)
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
func (r *scrubReader) flatten() []byte {
	b := r.buf[:r.end]
	r.segs = r.segs[:0]
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		r.segs = append(r.segs, segment{f: 0, b: 0, n: len(b)})
		return b
	}
	f := 0
	for i := 0; i < len(b); {
		j := i + nextBreak(b[i:])
		if j > i {
			r.segs = append(r.segs, segment{f: f, b: i, n: j - i})
			f += copy(r.flat[f:], b[i:j])
		}
		k := j
		for k < len(b) && (b[k] == '\n' || b[k] == '\r') {
			k++
		}
		if k > j && !lineBreak(b[j:k]) {
			r.segs = append(r.segs, segment{f: f, b: j, n: 1})
			r.flat[f] = '\n'
			f++
		}
		i = k
	}
	return r.flat[:f]
}

// nextBreak returns the index of the first CR or LF in b, or len(b).
func nextBreak(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	if n < 0 {
		n = len(b)
	}
	if c := bytes.IndexByte(b[:n], '\r'); c >= 0 {
		return c
	}
	return n
}

// lineBreak reports whether s is one line break: LF, CRLF or CR.
func lineBreak(s []byte) bool {
	switch len(s) {
	case 1:
		return true // s is a run of CR and LF
	case 2:
		return s[0] == '\r' && s[1] == '\n'
	}
	return false
}

// inBuf returns the offset in buf of flat's byte at f.
func (r *scrubReader) inBuf(f int) int {
	k := sort.Search(len(r.segs), func(k int) bool { return r.segs[k].f+r.segs[k].n > f })
	s := r.segs[k]
	return s.b + f - s.f
}

// maskFlat masks the bytes of buf that flat[lo:hi] was taken from.
func (r *scrubReader) maskFlat(lo, hi int) {
	k := sort.Search(len(r.segs), func(k int) bool { return r.segs[k].f+r.segs[k].n > lo })
	for ; k < len(r.segs) && r.segs[k].f < hi; k++ {
		s := r.segs[k]
		r.mask(s.b+max(lo, s.f)-s.f, s.b+min(hi, s.f+s.n)-s.f)
	}
}

// mask adds [lo, hi) to the masked ranges, merging overlaps.
func (r *scrubReader) mask(lo, hi int) {
	i := 0
	for i < len(r.masked) && r.masked[i][1] < lo {
		i++
	}
	j := i
	for j < len(r.masked) && r.masked[j][0] <= hi {
		lo, hi = min(lo, r.masked[j][0]), max(hi, r.masked[j][1])
		j++
	}
	r.masked = append(r.masked[:i], append([][2]int{{lo, hi}}, r.masked[j:]...)...)
}

// heldBack returns the length of the longest suffix of b that is a
// proper prefix of some pattern: bytes that may begin a value the next
// read completes.
func heldBack(b []byte, pats [][]byte) int {
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
