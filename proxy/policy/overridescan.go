package policy

import (
	"errors"
	"io"
	"strings"
)

// OverrideScanner looks for override fields in a body too long to read
// whole before deciding (over MaxBodyCheck: an LLM prompt with images, a
// large upload), as the body streams to the upstream. It holds a bounded
// amount of state whatever the body's size: the name being read, the
// nesting of JSON, a multipart reader's buffer. Its verdict comes when
// the body has ended (Close); the caller holds the body's last byte back
// until then, so that an upstream never has the whole of a body that
// holds one, and no server runs a request whose body it has not
// received whole (method-override middlewares parse the whole form or
// JSON body before routing).
//
// It reads the body as overrideInBody does (form, JSON, multipart, by
// Content-Type) and is at least as strict: FuzzOverrideScanner holds it
// to that on every body overrideInBody can judge.
type OverrideScanner struct {
	form, isJSON, strictJSON bool
	f                        formScan
	j                        jsonScan
	multi                    []*multipartScan
	err                      error
	found                    string
}

// NewOverrideScanner starts a scan of a body with these Content-Type and
// Content-Encoding values; nil when no server reads fields from such a
// body (OverrideBodyType is false).
func NewOverrideScanner(contentType, contentEncoding []string) *OverrideScanner {
	form, multi, isJSON, strict, boundaries := bodyKinds(contentType)
	if !form && !multi && !isJSON {
		return nil
	}
	s := &OverrideScanner{form: form, isJSON: isJSON, strictJSON: strict}
	for _, ce := range contentEncoding {
		if !strings.EqualFold(strings.TrimSpace(ce), "identity") {
			s.err = errors.New("a form or JSON body in a content coding cannot be checked for method override fields")
		}
	}
	if multi {
		for _, b := range boundaries {
			s.multi = append(s.multi, newMultipartScan(b))
		}
	}
	return s
}

// Write scans p. It never fails: the verdict is Close's.
func (s *OverrideScanner) Write(p []byte) (int, error) {
	if s.err != nil || s.found != "" {
		return len(p), nil
	}
	if s.form {
		s.f.write(p)
	}
	if s.isJSON {
		s.j.write(p)
	}
	for _, m := range s.multi {
		m.write(p)
	}
	return len(p), nil
}

// Close ends the scan and returns the refused name the body holds, or
// an error when it cannot tell; "", nil when the body may go.
func (s *OverrideScanner) Close() (string, error) {
	if s.found == "" && s.err == nil {
		if s.form {
			s.found = s.f.end()
		}
		if s.found == "" && s.isJSON {
			name, valid := s.j.end()
			switch {
			case name != "": // found, whether or not the rest was JSON
				s.found = name
			case !valid && s.strictJSON:
				s.err = errors.New("a body declared as JSON that is not valid JSON cannot be checked for method override fields")
			}
		}
	}
	for _, m := range s.multi {
		name, err := m.end()
		if s.found == "" && s.err == nil {
			s.found, s.err = name, err
		}
	}
	return s.found, s.err
}

// maxScanName is how much of a parameter or field name a scan keeps:
// every refused name is far shorter, so a longer name can match only
// through what its start holds (a NUL that ends it, PHP's "[").
const maxScanName = 256

// nameMatch checks a name a scan kept, cut when longer than maxScanName.
func nameMatch(name string, cut bool, in Where, decode bool) string {
	if cut {
		// A partial escape at the cut would make the whole name
		// undecodable.
		if i := strings.LastIndexByte(name, '%'); decode && i >= len(name)-2 && i >= 0 {
			name = name[:i]
		}
		// The rest of the name may close PHP's array brackets.
		name += "]"
	}
	n, _ := overrideName(name, in, decode)
	return n
}

// formScan finds refused names in a form-encoded stream: names end at
// '=', '&' or ';'; values are skipped.
type formScan struct {
	name    []byte
	inValue bool
	cut     bool
	found   string
}

func (f *formScan) write(p []byte) {
	for _, c := range p {
		if f.found != "" {
			return
		}
		switch {
		case c == '&' || c == ';':
			f.endName()
			f.inValue = false
		case f.inValue:
		case c == '=':
			f.endName()
			f.inValue = true
		case len(f.name) == 0 && isFormSpace(c):
			// PHP drops leading spaces: keep none, so that a long run
			// of them cannot push the name past what is kept.
		case len(f.name) >= 3*maxScanName:
			f.cut = true
		default:
			f.name = append(f.name, c)
		}
	}
}

// isFormSpace is a byte that decodes to a space at the start of a name
// ('%20' is kept, and trimmed after decoding).
func isFormSpace(c byte) bool { return c == ' ' || c == '+' }

func (f *formScan) endName() {
	if f.found == "" && len(f.name) > 0 {
		f.found = nameMatch(string(f.name), f.cut, InForm, true)
	}
	f.name, f.cut = f.name[:0], false
}

func (f *formScan) end() string {
	if !f.inValue {
		f.endName()
	}
	return f.found
}

// jsonScan reads a JSON stream as far as the override check needs: the
// nesting, the strings, and the names of the top-level object's fields
// (a string at depth one followed by ':' is a name, whatever came
// before it, so lenient readers' extra or missing commas do not hide
// one). It also tells whether the stream looked like one JSON text:
// outside strings only structure, whitespace, numbers and true, false
// and null; brackets balanced; one value.
type jsonScan struct {
	depth    int
	stack    []byte // '{' or '[' per level, up to maxJSONDepth
	inString bool
	esc      int // 0; 1 after '\'; 2..5 reading \u's four digits
	u        rune
	str      []byte // the decoded string, when it may be a name
	strCut   bool
	strNUL   bool
	keep     bool // this string is at depth one of an object
	pending  string
	pendCut  bool
	havePend bool // a depth-one string ended; ':' next makes it a name
	word     []byte
	values   int // top-level values seen
	invalid  bool
	found    string
}

// maxJSONDepth bounds the nesting a scan tracks.
const maxJSONDepth = 10000

func (j *jsonScan) write(p []byte) {
	for _, c := range p {
		if j.found != "" {
			return
		}
		if j.inString {
			j.stringByte(c)
			continue
		}
		if isWordByte(c) {
			if len(j.word) < 64 {
				j.word = append(j.word, c)
			} else {
				j.invalid = true
			}
			continue
		}
		j.endWord()
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case ':':
			if j.havePend {
				j.found = nameMatch(j.pending, j.pendCut, InJSON, false)
			}
		case '"':
			j.startValue()
			j.inString = true
			j.keep = j.depth == 1 && j.stack[0] == '{'
			j.str, j.strCut, j.strNUL = j.str[:0], false, false
		case '{', '[':
			j.startValue()
			if j.depth >= maxJSONDepth {
				j.invalid = true
			} else {
				j.stack = append(j.stack, c)
			}
			j.depth++
		case '}', ']':
			if j.depth == 0 || j.depth <= maxJSONDepth && j.stack[len(j.stack)-1] != c-2 { // '{'+2 == '}', '['+2 == ']'
				j.invalid = true
			}
			if j.depth > 0 {
				if j.depth <= maxJSONDepth {
					j.stack = j.stack[:len(j.stack)-1]
				}
				j.depth--
			}
		case ',':
		default:
			j.invalid = true
		}
		j.havePend = false
	}
}

// startValue counts a value that begins at the top level.
func (j *jsonScan) startValue() {
	if j.depth == 0 {
		j.values++
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.'
}

// endWord checks a run of word bytes outside strings: a number, true,
// false or null.
func (j *jsonScan) endWord() {
	if len(j.word) == 0 {
		return
	}
	j.startValue()
	w := string(j.word)
	j.word = j.word[:0]
	j.havePend = false
	switch {
	case w == "true" || w == "false" || w == "null":
	case w[0] == '-' || w[0] >= '0' && w[0] <= '9':
		for i := 0; i < len(w); i++ {
			if c := w[i]; !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
				j.invalid = true
			}
		}
	default:
		j.invalid = true
	}
}

// stringByte reads one byte inside a string.
func (j *jsonScan) stringByte(c byte) {
	switch {
	case j.esc == 1:
		j.esc = 0
		switch c {
		case '"', '\\', '/':
			j.strRune(rune(c))
		case 'b':
			j.strRune('\b')
		case 'f':
			j.strRune('\f')
		case 'n':
			j.strRune('\n')
		case 'r':
			j.strRune('\r')
		case 't':
			j.strRune('\t')
		case 'u':
			j.esc, j.u = 2, 0
		default:
			j.invalid = true
		}
	case j.esc >= 2:
		v, ok := hexVal(c)
		if !ok {
			j.invalid = true
			j.esc = 0
			return
		}
		j.u = j.u<<4 | rune(v)
		if j.esc++; j.esc == 6 {
			j.esc = 0
			j.strRune(j.u)
		}
	case c == '\\':
		j.esc = 1
	case c == '"':
		j.inString = false
		if j.keep {
			j.pending, j.pendCut, j.havePend = string(j.str), j.strCut, true
		}
	case c < 0x20:
		j.invalid = true
	default:
		j.strRune(rune(c)) // a byte of UTF-8: names that matter are ASCII
	}
}

// strRune adds a decoded character to a string that may be a name: NUL
// ends the name (C readers stop there), leading spaces are dropped, as
// overrideName drops them, and past maxScanName the rest is cut.
func (j *jsonScan) strRune(r rune) {
	if !j.keep || j.strNUL {
		return
	}
	switch {
	case r == 0:
		j.strNUL = true
	case r == ' ' && len(j.str) == 0:
	case len(j.str) >= maxScanName:
		j.strCut = true
	case r < 0x80:
		j.str = append(j.str, byte(r))
	default:
		// Not ASCII (a byte of UTF-8, a \u escape, half of a
		// surrogate pair): no refused name holds it; keep a
		// placeholder byte so that the name does not read as a
		// shorter one.
		j.str = append(j.str, 0x7f)
	}
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// end returns the refused name found, and whether the stream looked like
// one JSON text.
func (j *jsonScan) end() (string, bool) {
	j.endWord()
	valid := !j.invalid && !j.inString && j.depth == 0 && j.values == 1
	return j.found, valid
}

// multipartScan runs the standard multipart reader over the stream in a
// goroutine, part headers checked as overrideInMultipart checks them,
// part bodies discarded: its memory is the reader's buffer.
type multipartScan struct {
	pw   *io.PipeWriter
	done chan struct{}
	name string
	err  error
}

func newMultipartScan(boundary string) *multipartScan {
	pr, pw := io.Pipe()
	m := &multipartScan{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		data := streamReader{pr}
		m.name, m.err = scanMultipart(data, boundary)
		// Drain, so that writes never block on a reader that stopped.
		io.Copy(io.Discard, pr)
	}()
	return m
}

// streamReader hides the pipe's other methods from the multipart reader.
type streamReader struct{ r io.Reader }

func (s streamReader) Read(p []byte) (int, error) { return s.r.Read(p) }

func (m *multipartScan) write(p []byte) { m.pw.Write(p) }

func (m *multipartScan) end() (string, error) {
	m.pw.Close()
	<-m.done
	return m.name, m.err
}
