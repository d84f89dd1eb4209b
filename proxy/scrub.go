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
// Events, each ended by a blank line) is not delayed. The reader reads
// into the caller's buffer where it has room for what is held back and
// more, else into buf, which must not be used elsewhere until it is
// done; one is allocated when buf is shorter than eight times the
// longest value.
func (in Injected) ScrubReader(src io.Reader, buf []byte) io.Reader {
	if len(in.values) == 0 {
		return src
	}
	s := in.scanner()
	if len(buf) < 8*s.longest {
		buf = make([]byte, max(32<<10, 8*s.longest))
	}
	return &scrubReader{src: src, s: s, buf: buf}
}

// scrubReader is the reader ScrubReader returns. Occurrences are found
// in the bytes as read, never in bytes already masked, so values that
// overlap each other or themselves are masked whole, and the output does
// not depend on how the input was split into reads.
type scrubReader struct {
	src io.Reader
	s   *scanner
	buf []byte // as read, unmasked; s.masked holds the ranges to mask
	// buf[start:safe] is scanned and ready; buf[safe:end] is held back,
	// the start of a value that the next read may complete.
	start, safe, end int
	err              error
}

// Read returns scanned bytes, masked, reading and scanning more when
// none are ready.
func (r *scrubReader) Read(p []byte) (int, error) {
	if r.start == r.safe && len(p) >= 4*r.s.longest {
		return r.readInto(p)
	}
	for r.start == r.safe {
		if r.err != nil {
			if r.safe < r.end { // the end of the stream: what was held back is not a value
				r.safe = r.end
				break
			}
			return 0, r.err
		}
		r.s.shift(r.safe)
		r.end = copy(r.buf, r.buf[r.safe:r.end])
		r.start, r.safe = 0, 0
		m, err := r.src.Read(r.buf[r.end:])
		r.end += m
		r.err = err
		hold := r.s.scan(r.buf[:r.end])
		r.safe = r.end
		if r.err == nil {
			r.safe -= hold
		}
	}
	n := copy(p, r.buf[r.start:r.safe])
	r.s.maskOut(p[:n], r.start)
	r.start += n
	return n, nil
}

// readInto is Read with p as the window, which spares copying what is
// read once more: what was held back, then what src gives, are scanned
// in p, and what is held back now is kept in buf. p has room for what is
// held back (less than three times the longest value) and more.
func (r *scrubReader) readInto(p []byte) (int, error) {
	for {
		r.s.shift(r.safe)
		n := copy(p, r.buf[r.safe:r.end])
		r.start, r.safe, r.end = 0, 0, 0
		if r.err != nil {
			if n == 0 {
				return 0, r.err
			}
			// The end of the stream: what was held back is not a value.
			r.s.maskOut(p[:n], 0)
			r.s.shift(n)
			return n, nil
		}
		m, err := r.src.Read(p[n:])
		n += m
		r.err = err
		safe := n - r.s.scan(p[:n])
		if err != nil {
			safe = n
		}
		r.end = copy(r.buf, p[safe:n])
		r.s.maskOut(p[:safe], 0)
		r.s.shift(safe)
		if safe > 0 {
			return safe, nil
		}
	}
}

// scanner finds the injected values in a window of bytes, in one pass
// over it for all of them, in one of two ways: anchored, then, once 64
// KiB were scanned, whichever costs less on the next window (decide);
// neither changes what is found.
//
// Anchored: each value has an anchor, one of its bytes, chosen so that
// the anchors of all the values are few bytes, rare in the first bytes
// scanned, and the window is searched for each anchor byte
// (bytes.IndexByte, with vector instructions); only where one lies is a
// value compared. That suits text, where some bytes are rare.
//
// Sampled: one pair of adjacent bytes is looked at in every stride
// bytes, the shortest value's length less one. An occurrence of a value
// spans at least as many bytes as the value has (more when it is
// wrapped), so one of the pairs looked at lies wholly within it: two
// adjacent bytes of the value, or a line break beside a byte of it. Only
// a pair that is one of those (pairs, a bit per pair of byte values) is
// looked at closer. That suits random bytes (a compressed download),
// where every byte is as common as any other: for a token's forms it
// reads two bytes in every 30 or so, and looks closer at about one pair
// in fifty it reads.
//
// Either way a value is compared from a byte of it found in the window,
// backwards and forwards, one line break allowed between any two of its
// bytes. A value holds no line break or other control character (a
// header value cannot), so no anchor is one, nor any byte of a value.
type scanner struct {
	pats    [][]byte
	longest int
	// first marks the bytes some value starts with.
	first [256]bool
	// scanned counts the bytes scanned, up to decideAfter; decided is
	// set once the way of scanning is chosen for good. Until then the
	// scan is anchored, the anchors chosen on the first window.
	scanned int
	decided bool
	// anchors lists each anchor byte once, with the values it anchors.
	anchors []anchor
	// stride is the distance between the pairs looked at: the shortest
	// value's length less one.
	stride int
	// pairs is set when the scan is sampled; it is shared (indexCache)
	// and only read.
	pairs *pairIndex
	// masked are the ranges of the window, sorted and disjoint, that
	// hold a value; shift moves them when the window moves on.
	masked [][2]int
}

// anchor is one byte searched for, and where it stands in the values it
// anchors: pats[p][k] is c.
type anchor struct {
	c  byte
	at []struct{ p, k int }
}

// valueByte is byte k of value p.
type valueByte struct{ p, k int }

// pairIndex is what a sampled scan looks pairs up in: bit a<<8|b of
// bits is set when a then b are adjacent bytes of a value, or when
// either is a line break; at[start[c]:start[c+1]] lists where byte c
// stands in the values.
type pairIndex struct {
	bits  [1 << 16 / 64]uint64
	start [257]int32
	at    []valueByte
}

// scanner returns a scanner for in's values.
func (in Injected) scanner() *scanner {
	s := &scanner{}
	shortest := 0
	for _, v := range in.values {
		s.pats = append(s.pats, []byte(v.v))
		s.longest = max(s.longest, len(v.v))
		if shortest == 0 || len(v.v) < shortest {
			shortest = len(v.v)
		}
		s.first[v.v[0]] = true
	}
	s.stride = max(1, shortest-1)
	return s
}

// chooseAnchors gives every value an anchor, weighing each byte by how
// often it occurs in sample's first 4 KiB, the first bytes scanned (a
// larger sample costs more than it tells): a greedy cover,
// taking the byte that anchors the most values not yet anchored for
// what it costs, a pass over the window (about as much as the
// candidates of one byte in 64) and the candidates it brings. It only
// changes the speed of the scan, never its result.
func (s *scanner) chooseAnchors(sample []byte) {
	sample = sample[:min(len(sample), 4<<10)]
	var count [256]int
	for _, c := range sample {
		count[c]++
	}
	pass := len(sample)/64 + 1
	done := make([]bool, len(s.pats))
	for left := len(s.pats); left > 0; {
		var holders [256]int
		for i, p := range s.pats {
			if done[i] {
				continue
			}
			var seen [256]bool
			for _, c := range p {
				if !seen[c] {
					seen[c] = true
					holders[c]++
				}
			}
		}
		best := -1
		for c := range 256 {
			if holders[c] > 0 && (best < 0 || holders[c]*(pass+count[best]) > holders[best]*(pass+count[c])) {
				best = c
			}
		}
		a := anchor{c: byte(best)}
		for i, p := range s.pats {
			if k := bytes.IndexByte(p, a.c); !done[i] && k >= 0 {
				a.at = append(a.at, struct{ p, k int }{i, k})
				done[i] = true
				left--
			}
		}
		s.anchors = append(s.anchors, a)
	}
}

// The way of scanning is chosen once decideAfter bytes were scanned
// anchored, on a window of decideLen bytes or more: a body shorter than
// that costs little either way, less than building what a sampled scan
// looks pairs up in, and a smaller window tells too little of what
// follows.
const (
	decideAfter = 64 << 10
	decideLen   = 4 << 10
)

// scan records every occurrence of every value in b, overlapping ones
// included, and returns how many bytes at its end to hold back: those
// that may begin a value the next bytes complete. An occurrence already
// recorded (it lay in what was held back, or two of the pairs looked at
// lie in it) is recorded again, harmlessly.
func (s *scanner) scan(b []byte) int {
	if s.anchors == nil {
		s.chooseAnchors(b)
	}
	if !s.decided {
		if s.scanned >= decideAfter && len(b) >= decideLen {
			s.decide(b)
		}
		s.scanned += len(b)
	}
	if s.pairs != nil {
		s.scanSampled(b)
	} else {
		s.scanAnchors(b)
	}
	return s.heldBack(b)
}

// decide samples the scan when that costs less on the window b than the
// anchored one, by a model of both in nanoseconds, rough but of the
// right sizes (measured by BenchmarkScrubReader and
// BenchmarkScrubReaderBinary): an anchored scan passes over the window
// once per anchor (some 32 bytes a nanosecond) and stops at each anchor
// byte (some 20 ns); a sampled one reads a pair in every stride bytes
// (some 2.5 ns) and, for a pair it looks at closer, compares the values
// holding a byte of it (some 5 ns, and 3 a value byte). The pairs a
// sampled scan of b would read are looked up to tell.
func (s *scanner) decide(b []byte) {
	anchored := 0
	for _, a := range s.anchors {
		anchored += len(b)/32 + 20*bytes.Count(b, []byte{a.c})
	}
	x := s.index()
	sampled := 0
	for j := 0; j+1 < len(b); j += s.stride {
		sampled += 5 // twice 2.5
		if x.pair(b[j], b[j+1]) {
			sampled += 2 * (5 + 3*len(x.of(b[j])))
		}
	}
	s.decided = true
	if sampled/2 < anchored {
		s.pairs = x
	}
}

// sample makes the scan sampled from now on, whatever it costs.
func (s *scanner) sample() {
	s.decided = true
	s.pairs = s.index()
}

// indexCache keeps the pairIndex of the value sets scanned lately, by
// their values, each ended by a line break (which no value holds): a
// download after another carries the same credential, and building the
// index (10 KiB and more) cost more than a scan of 64 KiB of text. It
// holds at most maxCachedValues sets and starts afresh when full, as
// formsCache does.
var indexCache struct {
	mu sync.Mutex
	m  map[string]*pairIndex
}

// index returns the pairIndex of s's values, from indexCache or built
// and kept there. The index returned is shared: callers only read it.
func (s *scanner) index() *pairIndex {
	var key strings.Builder
	for _, v := range s.pats {
		key.Write(v)
		key.WriteByte('\n')
	}
	indexCache.mu.Lock()
	defer indexCache.mu.Unlock()
	if x, ok := indexCache.m[key.String()]; ok {
		return x
	}
	if indexCache.m == nil || len(indexCache.m) >= maxCachedValues {
		indexCache.m = make(map[string]*pairIndex, maxCachedValues)
	}
	x := s.buildIndex()
	indexCache.m[key.String()] = x
	return x
}

// buildIndex builds the pairIndex of s's values.
func (s *scanner) buildIndex() *pairIndex {
	x := &pairIndex{}
	n := 0
	for _, v := range s.pats {
		n += len(v)
		for _, c := range v {
			x.start[int(c)+1]++
		}
	}
	for c := range 256 {
		x.start[c+1] += x.start[c]
	}
	x.at = make([]valueByte, n)
	next := x.start
	for p, v := range s.pats {
		for k, c := range v {
			x.at[next[c]] = valueByte{p, k}
			next[c]++
			if k+1 < len(v) {
				i := uint16(c)<<8 | uint16(v[k+1])
				x.bits[i>>6] |= 1 << (i & 63)
			}
		}
	}
	// Any byte then a line break (CR is 13, LF 10: bits of the same
	// word of each row), and a line break then any byte (two rows).
	for c := range 256 {
		x.bits[c<<2] |= 1<<'\r' | 1<<'\n'
	}
	for _, row := range [...]int{'\r', '\n'} {
		for w := range 4 {
			x.bits[row<<2+w] = ^uint64(0)
		}
	}
	return x
}

// pair reports whether a then b are looked at closer.
func (x *pairIndex) pair(a, b byte) bool {
	i := uint16(a)<<8 | uint16(b)
	return x.bits[i>>6]&(1<<(i&63)) != 0
}

// of lists where c stands in the values.
func (x *pairIndex) of(c byte) []valueByte { return x.at[x.start[c]:x.start[int(c)+1]] }

// scanSampled records the occurrences in b, looking at one pair of bytes
// in every stride.
func (s *scanner) scanSampled(b []byte) {
	bits, stride := &s.pairs.bits, s.stride
	for j := 1; j < len(b); j += stride {
		if i := uint16(b[j-1])<<8 | uint16(b[j]); bits[i>>6]&(1<<(i&63)) != 0 {
			s.scanAt(b, j-1)
		}
	}
}

// scanAt records the occurrences of values that b[j] and b[j+1] may both
// lie in. Such an occurrence holds a byte of a value at j, at j+1 or, when
// both are a line break (a CRLF within it), at j-1; at that byte every
// value holding it is compared, and where both b[j] and b[j+1] are bytes
// of a value, only those where the next byte follows.
func (s *scanner) scanAt(b []byte, j int) {
	a := j
	switch {
	case !isBreak(b[j]):
	case !isBreak(b[j+1]):
		a = j + 1
	case j > 0 && !isBreak(b[j-1]):
		a = j - 1
	default:
		return // three line breaks in a row: no value spans them
	}
	next := -1
	if a == j && !isBreak(b[j+1]) {
		next = int(b[j+1])
	}
	for _, at := range s.pairs.of(b[a]) {
		p := s.pats[at.p]
		if next >= 0 && (at.k+1 == len(p) || int(p[at.k+1]) != next) {
			continue
		}
		if lo, hi, ok := s.matchAt(b, a, p, at.k); ok {
			s.maskValue(b, lo, hi)
		}
	}
}

// scanAnchors records the occurrences in b, searching it for each
// anchor byte.
func (s *scanner) scanAnchors(b []byte) {
	for _, a := range s.anchors {
		for j := 0; ; j++ {
			x := bytes.IndexByte(b[j:], a.c)
			if x < 0 {
				break
			}
			j += x
			for _, at := range a.at {
				// Most candidates differ from the value in the byte
				// after the anchor (or before, for a last byte): a
				// look at it spares the whole comparison.
				p := s.pats[at.p]
				if n := at.k + 1; n < len(p) && j+1 < len(b) {
					if c := b[j+1]; c != p[n] && !isBreak(c) {
						continue
					}
				} else if n := at.k - 1; n >= 0 && j > 0 {
					if c := b[j-1]; c != p[n] && !isBreak(c) {
						continue
					}
				}
				if lo, hi, ok := s.matchAt(b, j, p, at.k); ok {
					s.maskValue(b, lo, hi)
				}
			}
		}
	}
}

func isBreak(c byte) bool { return c == '\n' || c == '\r' }

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

// matchAt reports whether p lies in b with its byte k at j, one line
// break allowed between any two of its bytes, and returns the bytes of b
// it spans: b[lo:hi].
func (s *scanner) matchAt(b []byte, j int, p []byte, k int) (lo, hi int, ok bool) {
	i := j
	for m := k - 1; m >= 0; m-- {
		i--
		if i >= 0 && isBreak(b[i]) {
			run := i
			for run > 0 && isBreak(b[run-1]) {
				run--
			}
			if !lineBreak(b[run : i+1]) {
				return 0, 0, false
			}
			i = run - 1
		}
		if i < 0 || b[i] != p[m] {
			return 0, 0, false
		}
	}
	lo, i = i, j
	for m := k + 1; m < len(p); m++ {
		i++
		if i < len(b) && isBreak(b[i]) {
			run := i
			for run < len(b) && isBreak(b[run]) {
				run++
			}
			if !lineBreak(b[i:run]) {
				return 0, 0, false
			}
			i = run
		}
		if i >= len(b) || b[i] != p[m] {
			return 0, 0, false
		}
	}
	return lo, i + 1, true
}

// heldBack returns the length of the longest end of b that is a proper
// start of some value, perhaps wrapped, perhaps followed by one line
// break: bytes that may begin a value the next bytes complete. It starts
// within the longest value less one byte, each byte followed by at most
// two of a line break.
func (s *scanner) heldBack(b []byte) int {
	for i := max(0, len(b)-3*(s.longest-1)); i < len(b); i++ {
		if !s.first[b[i]] {
			continue
		}
		for _, p := range s.pats {
			if p[0] == b[i] && startsValue(b[i:], p) {
				return len(b) - i
			}
		}
	}
	return 0
}

// startsValue reports whether all of b is a proper start of p, perhaps
// wrapped, perhaps followed by one line break.
func startsValue(b, p []byte) bool {
	i := 0
	for m := range p {
		if i < len(b) && m > 0 && isBreak(b[i]) {
			run := i
			for run < len(b) && isBreak(b[run]) {
				run++
			}
			if !lineBreak(b[i:run]) {
				return false
			}
			i = run
		}
		if i == len(b) {
			return true
		}
		if b[i] != p[m] {
			return false
		}
		i++
	}
	return false // all of p: b holds a whole value, or more
}

// maskValue masks the bytes of the occurrence b[lo:hi], leaving the
// line breaks within it.
func (s *scanner) maskValue(b []byte, lo, hi int) {
	from := lo
	for i := lo; i < hi; i++ {
		if isBreak(b[i]) {
			if from < i {
				s.mask(from, i)
			}
			from = i + 1
		}
	}
	s.mask(from, hi)
}

// mask adds [lo, hi) to the masked ranges, merging overlaps.
func (s *scanner) mask(lo, hi int) {
	i := 0
	for i < len(s.masked) && s.masked[i][1] < lo {
		i++
	}
	j := i
	for j < len(s.masked) && s.masked[j][0] <= hi {
		lo, hi = min(lo, s.masked[j][0]), max(hi, s.masked[j][1])
		j++
	}
	s.masked = append(s.masked[:i], append([][2]int{{lo, hi}}, s.masked[j:]...)...)
}

// shift moves the window off bytes on: the masks before it go, the
// others are moved with it.
func (s *scanner) shift(off int) {
	keep := s.masked[:0]
	for _, m := range s.masked {
		if m[1] > off {
			keep = append(keep, [2]int{max(m[0], off) - off, m[1] - off})
		}
	}
	s.masked = keep
}

// maskOut writes '*' over the bytes of p that are masked, p being the
// window's bytes from off on.
func (s *scanner) maskOut(p []byte, off int) {
	for _, m := range s.masked {
		lo, hi := max(m[0], off), min(m[1], off+len(p))
		for i := lo; i < hi; i++ {
			p[i-off] = '*'
		}
	}
}
