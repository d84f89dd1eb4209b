package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// injectedOf builds an Injected holding values, as Inject would.
func injectedOf(values ...string) Injected {
	var in Injected
	for _, v := range values {
		in.add(v)
	}
	return in
}

// naiveMask is the reference: every byte of every occurrence of every
// value in the whole input, overlapping ones included, becomes '*'. An
// occurrence may hold one line break (LF, CRLF or CR) between any two of
// the value's bytes, which stays.
func naiveMask(in []byte, values []string) []byte {
	out := bytes.Clone(in)
	for _, v := range values {
		if len(v) < MinScrubLen {
			continue
		}
		for i := range in {
			if at := wrappedAt(in[i:], v); at != nil {
				for _, k := range at {
					out[i+k] = '*'
				}
			}
		}
	}
	return out
}

// wrappedAt returns where in b each byte of v lies if b starts with v,
// wrapped or not, else nil.
func wrappedAt(b []byte, v string) []int {
	at := make([]int, 0, len(v))
	k := 0
	for i := 0; i < len(v); i++ {
		if i > 0 {
			switch {
			case bytes.HasPrefix(b[k:], []byte("\r\n")):
				k += 2
			case k < len(b) && (b[k] == '\n' || b[k] == '\r'):
				k++
			}
		}
		if k >= len(b) || b[k] != v[i] {
			return nil
		}
		at = append(at, k)
		k++
	}
	return at
}

// chunked reads src in reads of the given sizes, cycling.
type chunked struct {
	src   []byte
	sizes []int
	i     int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = max(1, c.sizes[c.i%len(c.sizes)])
		c.i++
	}
	n = min(n, len(p), len(c.src))
	copy(p, c.src[:n])
	c.src = c.src[n:]
	return n, nil
}

func TestInjectedAdd(t *testing.T) {
	tests := map[string]struct {
		add  []string
		want []string
	}{
		"short values are not scrubbed": {add: []string{"oauth2", "tok"}, want: nil},
		"a value covering another goes": {add: []string{"ghp_token12345", "Bearer ghp_token12345"}, want: []string{"ghp_token12345"}},
		"the covered one replaces it":   {add: []string{"Bearer ghp_token12345", "ghp_token12345"}, want: []string{"ghp_token12345"}},
		"distinct values stay":          {add: []string{"x-access-token", "ghp_token12345", "eC1hY2Nlc3Mu"}, want: []string{"x-access-token", "ghp_token12345", "eC1hY2Nlc3Mu"}},
		// An echo may percent-encode what it hands back, in either
		// case of hex.
		"escaped forms of base64 too": {add: []string{"eC1hY2Nlc3M="}, want: []string{"eC1hY2Nlc3M=", "eC1hY2Nlc3M%3D", "eC1hY2Nlc3M%3d"}},
		"path and query escaping": {add: []string{"ab+cd/ef=="}, want: []string{
			"ab+cd/ef==", "ab%2Bcd%2Fef%3D%3D", "ab%2bcd%2fef%3d%3d", "ab+cd%2Fef==", "ab+cd%2fef==",
		}},
		"a space escapes as '+' or %20, covered by the bare value": {add: []string{"ghp_token12345", "Bearer ghp_token12345"}, want: []string{"ghp_token12345"}},
		"a repeat is kept once": {add: []string{"ghp_token12345", "ghp_token12345"}, want: []string{"ghp_token12345"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := injectedOf(tc.add...)
			var got []string
			for _, v := range in.values {
				got = append(got, v.Reveal())
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("values = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInjectedAddEncoded: whatever holds a credential value, at any
// offset, hex or base64 of it (standard or URL-safe, padded or not)
// holds one of the forms addEncoded records, so the scrub masks it.
func TestInjectedAddEncoded(t *testing.T) {
	encodings := map[string]func([]byte) string{
		"hex":           hex.EncodeToString,
		"HEX":           func(b []byte) string { return strings.ToUpper(hex.EncodeToString(b)) },
		"base64":        base64.StdEncoding.EncodeToString,
		"raw base64":    base64.RawStdEncoding.EncodeToString,
		"base64url":     base64.URLEncoding.EncodeToString,
		"raw base64url": base64.RawURLEncoding.EncodeToString,
	}
	values := map[string]string{
		"shortest scrubbed":                "12345678",
		"token":                            "ghp_0123456789abcdefghij0123456789abcdef",
		"bytes base64 spells with + and /": "\xfb\xff\xbf\xfb\xff\xbf\xfb\xff\xbf",
	}
	for vname, v := range values {
		var in Injected
		in.addEncoded(v)
		for _, val := range in.values {
			if len(val.v) < MinScrubLen {
				t.Errorf("%s: a form of %d bytes is recorded", vname, len(val.v))
			}
		}
		for ename, enc := range encodings {
			for _, around := range [][2]string{{"", ""}, {"x", ""}, {"xy", "z"}, {"Bearer ", ""}, {"x-access-token:", ""}, {`{"s":"`, `"}`}} {
				t.Run(fmt.Sprintf("%s/%s/%q", vname, ename, around[0]), func(t *testing.T) {
					e := enc([]byte(around[0] + v + around[1]))
					if _, ok := in.ScrubString(e); !ok {
						t.Errorf("%s of %q around the value is not scrubbed", ename, around)
					}
				})
			}
		}
	}
}

func TestScrubHeader(t *testing.T) {
	in := injectedOf("ghp_secret_value", "eC1hY2Nlc3M6Z2hw")
	h := http.Header{
		"X-Echo":       {"Bearer ghp_secret_value", "fine"},
		"Set-Cookie":   {"a=ghp_secret_valueghp_secret_value; Path=/"},
		"X-Basic":      {"Basic eC1hY2Nlc3M6Z2hw"},
		"X-Untouched":  {"ghp_secret_valu"},
		"Content-Type": {"text/plain"},
	}
	changed := in.ScrubHeader(h)
	want := http.Header{
		"X-Echo":       {"Bearer [REDACTED]", "fine"},
		"Set-Cookie":   {"a=[REDACTED][REDACTED]; Path=/"},
		"X-Basic":      {"Basic [REDACTED]"},
		"X-Untouched":  {"ghp_secret_valu"},
		"Content-Type": {"text/plain"},
	}
	if fmt.Sprint(h) != fmt.Sprint(want) {
		t.Fatalf("header = %v\nwant     %v", h, want)
	}
	if len(changed) != 3 {
		t.Errorf("changed = %q, want the three headers that held a value", changed)
	}
	if (Injected{}).ScrubHeader(h) != nil {
		t.Error("the zero Injected changed a header")
	}
}

func TestScrubHeaderNames(t *testing.T) {
	tests := map[string]struct {
		values  []string
		names   []string
		kept    []string
		dropped []string // as the log names them
	}{
		"canonical case, as Go reads an echo": {
			values: []string{"ghp_secret_value"}, names: []string{"X-Ghp_secret_value", "Content-Type"},
			kept: []string{"Content-Type"}, dropped: []string{"X-[REDACTED]"},
		},
		"every letter's case changed, twice in one name": {
			values: []string{"abcdefgh"}, names: []string{"Abcdefgh-ABCDEFGH", "Abcdefg"},
			kept: []string{"Abcdefg"}, dropped: []string{"[REDACTED]-[REDACTED]"},
		},
		"a value the redaction spells": {
			values: []string{"REDACTED"}, names: []string{"X-Redacted-Redacted"},
			dropped: []string{"X-[REDACTED]-[REDACTED]"},
		},
		"no value: nothing dropped": {
			names: []string{"X-Ghp_secret_value"}, kept: []string{"X-Ghp_secret_value"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := injectedOf(tc.values...)
			h := http.Header{}
			for _, n := range tc.names {
				h[n] = []string{"1"}
			}
			dropped := in.ScrubHeaderNames(h)
			slices.Sort(dropped)
			kept := slices.Sorted(maps.Keys(h))
			if fmt.Sprint(kept) != fmt.Sprint(tc.kept) || fmt.Sprint(dropped) != fmt.Sprint(tc.dropped) {
				t.Fatalf("kept %q, dropped %q; want %q and %q", kept, dropped, tc.kept, tc.dropped)
			}
		})
	}
}

func TestScrubReader(t *testing.T) {
	const v = "ghp_0123456789abcdef"
	tests := map[string]struct {
		values []string
		in     string
	}{
		"no value":              {values: []string{v}, in: "nothing to see here"},
		"value alone":           {values: []string{v}, in: v},
		"value in json":         {values: []string{v}, in: `{"token":"` + v + `","n":1}`},
		"value twice":           {values: []string{v}, in: v + v + " and " + v},
		"prefix only at end":    {values: []string{v}, in: "ends with ghp_0123"},
		"prefix then value":     {values: []string{v}, in: "ghp_0123 ghp_0123456789abcdef"},
		"self-overlapping":      {values: []string{"abababab"}, in: "xabababababababx"},
		"two overlapping":       {values: []string{"secret-one-xyz", "one-xyz-tail-2"}, in: "a secret-one-xyz-tail-2 b"},
		"event stream":          {values: []string{v}, in: "data: " + v + "\n\ndata: done\n\n"},
		"binary around a value": {values: []string{v}, in: "\x00\xff" + v + "\x00"},
		"wrapped by LF":         {values: []string{v}, in: "x ghp_0123\n456789abcdef y"},
		"wrapped by CRLF":       {values: []string{v}, in: "x ghp_0123\r\n456789abcdef y"},
		"wrapped by CR":         {values: []string{v}, in: "x ghp_0123\r456789abcdef y"},
		"wrapped twice":         {values: []string{v}, in: "ghp_\r\n0123456\r\n789abcdef\r\n"},
		"a break at each byte":  {values: []string{v}, in: "g\nh\np\n_\n0\n1\n2\n3\n4\n5\n6\n7\n8\n9\na\nb\nc\nd\ne\nf\n"},
		"a blank line inside":   {values: []string{v}, in: "ghp_0123\n\n456789abcdef"},
		"LF then CR inside":     {values: []string{v}, in: "ghp_0123\n\r456789abcdef"},
		"a space inside":        {values: []string{v}, in: "ghp_0123 456789abcdef"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want := naiveMask([]byte(tc.in), tc.values)
			in := injectedOf(tc.values...)
			// Every way of cutting the input into two reads, and one
			// byte per read.
			readers := map[string]io.Reader{"one byte at a time": iotest.OneByteReader(strings.NewReader(tc.in))}
			for cut := 0; cut <= len(tc.in); cut++ {
				readers[fmt.Sprintf("cut at %d", cut)] = &chunked{src: []byte(tc.in), sizes: []int{cut, len(tc.in)}}
			}
			for how, r := range readers {
				got, err := io.ReadAll(in.ScrubReader(r, nil))
				if err != nil {
					t.Fatalf("%s: %v", how, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: %q, want %q", how, got, want)
				}
			}
		})
	}
}

// TestScrubReaderHoldsNothingNeedlessly: a stream that pauses is passed
// on up to the pause unless what it ends with could begin a value, so
// Server-Sent Events are not delayed.
func TestScrubReaderHoldsNothingNeedlessly(t *testing.T) {
	const v = "ghp_0123456789abcdef"
	in := injectedOf(v)
	tests := map[string]struct {
		first string
		ready string // what Read returns before the second chunk exists
	}{
		"an event":                {first: "data: x\n\n", ready: "data: x\n\n"},
		"a value's first letters": {first: "data: ghp_01", ready: "data: "},
		"a whole value":           {first: "data: " + v + "\n", ready: "data: ********************\n"},
		"a value's first letters, then a line break": {first: "data: ghp_01\r\n", ready: "data: "},
		"a value's first letters, then a blank line": {first: "data: ghp_01\n\n", ready: "data: ghp_01\n\n"},
		"a wrapped value": {first: "data: ghp_01\n23456789abcdef\n\n", ready: "data: ******\n**************\n\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pr, pw := io.Pipe()
			go pw.Write([]byte(tc.first))
			r := in.ScrubReader(pr, make([]byte, 40))
			buf := make([]byte, 64)
			n, err := r.Read(buf)
			if err != nil || string(buf[:n]) != tc.ready {
				t.Fatalf("Read = %q, %v; want %q before the stream goes on", buf[:n], err, tc.ready)
			}
			pw.Close()
			rest, _ := io.ReadAll(r)
			if got := string(buf[:n]) + string(rest); got != string(naiveMask([]byte(tc.first), []string{v})) {
				t.Fatalf("whole output %q", got)
			}
		})
	}
}

func FuzzScrubReader(f *testing.F) {
	f.Add([]byte("data: ghp_0123456789abcdef\n\n"), "ghp_0123456789abcdef", "Basic eC1hY2Nlc3M=", []byte{3, 7, 1}, byte(0))
	f.Add([]byte("abababababab"), "abababab", "babababa", []byte{1}, byte(3))
	f.Add([]byte(""), "ghp_0123456789abcdef", "", []byte(nil), byte(0))
	f.Add([]byte("x ghp_0123\r\n456789\nabcdef\r\n\r\n"), "ghp_0123456789abcdef", "456789abcdef", []byte{9, 2}, byte(0))
	f.Add([]byte("X-Pad: ppp\r\nAuthorization: Bearer "+canary+"\r\n"), canary, "Bearer "+canary, []byte{40, 1}, byte(76))
	f.Add([]byte("-----BEGIN-----\n"+canary+canary), canary, "", []byte{64}, byte(64|0x80))
	// wrap, when not zero, cuts data into lines of wrap&0x7f bytes, each
	// ended by LF or, with the high bit, CRLF, as an encoder wraps
	// base64; either way any byte of data may be a line break too.
	f.Fuzz(func(t *testing.T, data []byte, v1, v2 string, cuts []byte, wrap byte) {
		if n := int(wrap & 0x7f); n > 0 {
			eol := "\n"
			if wrap&0x80 != 0 {
				eol = "\r\n"
			}
			data = []byte(wrapLines(string(data), n, eol))
		}
		// The proxy scrubs only values a header can carry: a Secret
		// holding a line break or another control character is never
		// injected (config.HeaderValue), so it is never scrubbed, and an
		// occurrence of one across a line break has no meaning.
		for _, v := range []string{v1, v2} {
			if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
				return
			}
		}
		values := []string{v1, v2}
		in := injectedOf(values...)
		var kept []string
		for _, s := range in.values {
			kept = append(kept, s.Reveal())
		}
		sizes := make([]int, len(cuts))
		for i, c := range cuts {
			sizes[i] = int(c)
		}
		got, err := io.ReadAll(in.ScrubReader(&chunked{src: bytes.Clone(data), sizes: sizes}, make([]byte, 64)))
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveMask(data, kept); !bytes.Equal(got, want) {
			t.Fatalf("scrubbed %q in reads of %v = %q, want %q", data, sizes, got, want)
		}
		// The same bytes as the scrubber the one-pass scan replaced.
		if before, _ := io.ReadAll(refScrubReader(in, bytes.NewReader(data), make([]byte, 128))); !bytes.Equal(got, before) {
			t.Fatalf("scrubbed %q in reads of %v = %q, before %q", data, sizes, got, before)
		}
		// The same bytes from the sampled scan.
		if !in.Empty() {
			sr := in.ScrubReader(&chunked{src: bytes.Clone(data), sizes: sizes}, make([]byte, 64))
			sr.(*scrubReader).s.sample()
			if sampled, err := io.ReadAll(sr); err != nil || !bytes.Equal(got, sampled) {
				t.Fatalf("scrubbed %q in reads of %v, sampled = %q, %v; anchored %q", data, sizes, sampled, err, got)
			}
		}
	})
}

// BenchmarkScrubReader measures what masking the credential in a
// response body costs against copying it untouched, for an API-sized
// body and a download-sized one, with the values a Basic injection
// leaves to scrub (three).
// basicInjected is what a basic injection leaves to scrub: the user
// name, the password with its encoded forms, the base64 that went out.
// plain is the same without the password's encoded forms.
func basicInjected() (plain, encoded Injected) {
	const user, pass = "x-access-token", "ghp_0123456789abcdefghij0123456789abcdef"
	enc := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	plain = injectedOf(user, pass, enc)
	encoded.add(user)
	encoded.addEncoded(pass)
	encoded.add(enc)
	return plain, encoded
}

func BenchmarkScrubReader(b *testing.B) { benchmarkScrubReader(b, false) }

// BenchmarkScrubReaderLines is BenchmarkScrubReader with one object a
// line, as NDJSON or pretty-printed JSON is: a value may be wrapped at
// any of them.
func BenchmarkScrubReaderLines(b *testing.B) { benchmarkScrubReader(b, true) }

func benchmarkScrubReader(b *testing.B, lines bool) {
	plain, encoded := basicInjected()
	// What a header template of one token leaves.
	const token = "ghp_0123456789abcdefghij0123456789abcdef"
	bearer := injectedOf(token, "Bearer "+token)
	var bearerEncoded Injected
	bearerEncoded.addEncoded(token)
	bearerEncoded.add("Bearer " + token)
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		// JSON-ish text with no value in it: the usual case, and the
		// one that must be cheap.
		body := bytes.Repeat([]byte(`{"id":1296269,"name":"widgets","full_name":"acme/widgets"},`), size/58+1)[:size]
		if lines {
			body = bytes.ReplaceAll(body, []byte("},"), []byte("}\n"))
		}
		buf, sbuf := make([]byte, 32<<10), make([]byte, 32<<10)
		// cpu-ns/op is the process's CPU time per operation: on a
		// shared machine it moves less than wall time.
		b.Run(fmt.Sprintf("copy/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			before := cpuTime()
			for b.Loop() {
				io.CopyBuffer(onlyWriter{io.Discard}, tlsReads(body), buf)
			}
			b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
		for name, in := range map[string]Injected{"scrub values": plain, "scrub values and encodings": encoded, "scrub token": bearer, "scrub token and encodings": bearerEncoded} {
			b.Run(fmt.Sprintf("%s/%dKiB", name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				before := cpuTime()
				for b.Loop() {
					io.CopyBuffer(onlyWriter{io.Discard}, in.ScrubReader(tlsReads(body), sbuf), buf)
				}
				b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkScrubReaderBinary scrubs 1 MiB of pseudo-random bytes, as a
// release asset or a compressed archive holds, of a bearer token and its
// encodings: a line break falls every 128 bytes on average, and every
// byte value is as common as any other.
func BenchmarkScrubReaderBinary(b *testing.B) {
	const token = "ghp_0123456789abcdefghij0123456789abcdef"
	var in Injected
	in.addEncoded(token)
	in.add("Bearer " + token)
	body := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	buf, sbuf := make([]byte, 32<<10), make([]byte, 32<<10)
	b.SetBytes(int64(len(body)))
	before := cpuTime()
	for b.Loop() {
		io.CopyBuffer(onlyWriter{io.Discard}, in.ScrubReader(tlsReads(body), sbuf), buf)
	}
	b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// onlyWriter hides ReaderFrom (io.Discard's reads 8 KiB at a time), so
// the copy reads into its 32 KiB buffer as the forwarder's does.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

// tlsReads reads body at most 16 KiB at a time, as a response body
// read from TLS records is.
func tlsReads(body []byte) io.Reader {
	return &chunked{src: body, sizes: []int{16 << 10}}
}

// BenchmarkScrubHeader measures the check every response header from an
// injected host goes through, names and values: ten fields, none holding
// the credential.
func BenchmarkScrubHeader(b *testing.B) {
	plain, encoded := basicInjected()
	h := http.Header{
		"Content-Type": {"application/json; charset=utf-8"}, "Date": {"Mon, 30 Nov 2026 14:00:00 GMT"},
		"Etag": {`W/"6d3f5a0e0b2c4d1e"`}, "Cache-Control": {"private, max-age=60, s-maxage=60"},
		"X-Github-Request-Id": {"C0DE:1234:5678AB:9ABCDE:656A1B2C"}, "X-Ratelimit-Limit": {"5000"},
		"X-Ratelimit-Remaining": {"4999"}, "Vary": {"Accept, Authorization, Cookie, X-GitHub-OTP"},
		"Content-Length": {"1024"}, "Server": {"github.com"},
	}
	for name, in := range map[string]Injected{"values": plain, "values and encodings": encoded} {
		b.Run(name, func(b *testing.B) {
			before := cpuTime()
			for b.Loop() {
				if in.ScrubHeaderNames(h) != nil || in.ScrubHeader(h) != nil {
					b.Fatal("scrubbed a clean header")
				}
			}
			b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// wrapLines cuts s into lines of n characters, each ended by eol, as MIME
// (76, CRLF) and PEM (64, LF) wrap base64.
func wrapLines(s string, n int, eol string) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + eol)
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

// wrapStyles are the ways encoders wrap base64 and hex into lines:
// MIME's 76 characters and PEM's 64, each ended by CRLF or by LF.
var wrapStyles = []struct {
	n   int
	eol string
}{{76, "\r\n"}, {76, "\n"}, {64, "\n"}, {64, "\r\n"}}

// wrapPads are the lengths of a header sent before the credential that
// put it at every position within a line of either width, at each of
// base64's three alignments: each byte of pad moves it 4/3 of a
// character, so 3n/4 bytes sweep a line of n, and 3 more every
// alignment at the line's end.
var wrapPads = 3*76/4 + 3

// TestScrubReaderWrappedBase64: an upstream echoes the request's header
// block in base64 wrapped into lines, with a header before
// Authorization whose length moves where the lines break and at which
// of base64's alignments the credential starts; for every such length
// the credential's characters are masked, line breaks inside them or
// not, and the body, unwrapped and decoded, holds no credential,
// whether the scrub reads it whole or one byte at a time.
func TestScrubReaderWrappedBase64(t *testing.T) {
	var in Injected
	in.addEncoded(canary)
	across := 0
	for _, wrap := range wrapStyles {
		for pad := range wrapPads + 1 {
			doc := "X-Pad: " + strings.Repeat("p", pad) + "\r\nAuthorization: Bearer " + canary + "\r\n"
			flat := base64.StdEncoding.EncodeToString([]byte(doc))
			// The credential's own characters in the flat base64: the
			// form addEncoded recorded that this alignment holds.
			var form string
			at := -1
			for _, v := range in.values {
				if i := strings.Index(flat, v.Reveal()); i >= 0 && len(v.Reveal()) > len(form) && isBase64(v.Reveal()) {
					form, at = v.Reveal(), i
				}
			}
			if at < 0 {
				t.Fatalf("pad %d: no recorded base64 form is in %q", pad, flat)
			}
			if at/wrap.n != (at+len(form)-1)/wrap.n {
				across++
			}
			body := wrapLines(flat, wrap.n, wrap.eol)
			for how, r := range map[string]io.Reader{"whole": strings.NewReader(body), "a byte at a time": iotest.OneByteReader(strings.NewReader(body))} {
				got, err := io.ReadAll(in.ScrubReader(r, nil))
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(body) || strings.Count(string(got), wrap.eol) != strings.Count(body, wrap.eol) {
					t.Fatalf("%d-character lines, pad %d, %s: the body's length or its lines changed", wrap.n, pad, how)
				}
				unwrapped := strings.NewReplacer("\r", "", "\n", "").Replace(string(got))
				if !strings.Contains(unwrapped, strings.Repeat("*", len(form))) {
					t.Errorf("%d-character lines %q, pad %d, %s: the credential's base64 was not masked", wrap.n, wrap.eol, pad, how)
				}
				if decodesTo(unwrapped, canary) {
					t.Errorf("%d-character lines %q, pad %d, %s: the body still decodes to the credential", wrap.n, wrap.eol, pad, how)
				}
			}
		}
	}
	if across == 0 {
		t.Fatal("no pad puts a line break inside the credential's characters")
	}
}

// decodesTo reports whether any run of base64 characters in s, read from
// any of its first four characters, decodes to something holding v.
func decodesTo(s, v string) bool {
	for run := range strings.FieldsFuncSeq(s, func(r rune) bool { return !isBase64(string(r)) && r != '=' }) {
		for off := range min(4, len(run)) {
			part := run[off:]
			part = part[:len(part)/4*4]
			if dec, err := base64.StdEncoding.DecodeString(part); err == nil && strings.Contains(string(dec), v) {
				return true
			}
		}
	}
	return false
}

// isBase64 reports whether s uses only the standard base64 alphabet.
func isBase64(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}
