package render

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// emitYAML writes v as block YAML: maps with sorted keys, sequences
// indented under their key, two spaces a level. It handles exactly the
// values the renderer builds (obj, list, []string, strings, booleans and
// integers) and refuses anything else, so an unexpected type is an error
// rather than a silently odd manifest.
//
// It exists because the general YAML encoder cost more than checking the
// whole repository did: rendering 1,000 sandboxes spent most of its time
// in reflection and the encoder's event machinery. Its output is verified
// by decoding it back with go.yaml.in/yaml/v3 in the tests and fuzz
// target, so the two cannot disagree on what a manifest says.
func emitYAML(v any) ([]byte, error) {
	var e emitter
	return e.emit(v)
}

// rawScalar is a scalar written verbatim: a number or null carried
// unchanged from an input object by the omnia target. Only
// scalarOf builds one, from a value yaml.v3 decoded, so it is always one
// of YAML's own number or null forms.
type rawScalar string

// maxKey bounds a written map key: YAML limits implicit keys to 1024
// characters. The renderer's keys are field names and label keys.
const maxKey = 1000

// emitter writes YAML into buf, which it keeps from one object to the
// next: a render writes tens of thousands of objects of a few kilobytes,
// and growing a fresh buffer for each made most of the emitter's garbage.
// An emitter is not safe for concurrent use; each render worker has one.
type emitter struct {
	buf []byte
	// fixed holds what each fixed value was written as, by where.
	fixed map[fixedAt][]byte
	// err is the first error of the object being written with top.
	err error
}

// fixed is a map or sequence that is the same value, pointer for pointer,
// wherever it appears and is never changed once built: a part of the
// manifests every sandbox of a render shares. Its YAML depends only on
// where it is written, so an emitter writes it once for each place and
// copies those bytes after.
type fixed struct{ v any }

func fix(v any) *fixed { return &fixed{v: v} }

type fixedAt struct {
	f      *fixed
	depth  int
	inline bool
}

// writeFixed writes f as value would write f.v.
func (e *emitter) writeFixed(f *fixed, depth int, inline bool) error {
	at := fixedAt{f, depth, inline}
	if b, ok := e.fixed[at]; ok {
		e.buf = append(e.buf, b...)
		return nil
	}
	start := len(e.buf)
	if err := e.value(f.v, depth, inline); err != nil {
		return err
	}
	if e.fixed == nil {
		e.fixed = map[fixedAt][]byte{}
	}
	e.fixed[at] = slices.Clone(e.buf[start:])
	return nil
}

// emit writes v as emitYAML does and returns a copy of exactly its size.
func (e *emitter) emit(v any) ([]byte, error) {
	e.buf = e.buf[:0]
	if err := e.value(v, 0, false); err != nil {
		return nil, err
	}
	return slices.Clone(e.buf), nil
}

// spaces indents up to 32 levels in one append.
const spaces = "                                                                "

func (e *emitter) indent(n int) {
	for n > len(spaces)/2 {
		e.buf = append(e.buf, spaces...)
		n -= len(spaces) / 2
	}
	e.buf = append(e.buf, spaces[:2*n]...)
}

// value writes v at indentation level depth. inline is true when v
// follows a "key:" or "- " on the same line.
func (e *emitter) value(v any, depth int, inline bool) error {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			e.line("{}")
			return nil
		}
		// The renderer's maps have a handful of keys: sort them on the
		// stack.
		var small [16]string
		keys := small[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			// A map that starts on a "- " line puts its first key there.
			if !inline || i > 0 {
				e.indent(depth)
			}
			n := len(e.buf)
			e.buf = appendScalar(e.buf, k)
			if len(e.buf)-n > maxKey {
				return fmt.Errorf("a map key of %d bytes is longer than YAML's implicit keys may be", len(e.buf)-n)
			}
			e.buf = append(e.buf, ':')
			if err := e.child(v[k], depth); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		return nil
	case []any:
		if len(v) == 0 {
			e.line("[]")
			return nil
		}
		for i, item := range v {
			e.item(i, depth, inline)
			if err := e.seqItem(item, depth); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return nil
	case []string:
		if len(v) == 0 {
			e.line("[]")
			return nil
		}
		for i, item := range v {
			e.item(i, depth, inline)
			e.str(item, depth+1)
		}
		return nil
	case string:
		e.str(v, depth)
		return nil
	case rawScalar:
		e.line(string(v))
		return nil
	case *fixed:
		return e.writeFixed(v, depth, inline)
	case bool:
		e.buf = strconv.AppendBool(e.buf, v)
	case int:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case int64:
		e.buf = strconv.AppendInt(e.buf, v, 10)
	case int32:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case float64:
		if v != math.Trunc(v) || math.IsInf(v, 0) || math.Abs(v) > 1<<53 {
			return fmt.Errorf("the renderer writes no non-integer number (%v)", v)
		}
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	default:
		return fmt.Errorf("the renderer cannot write a %T", v)
	}
	e.buf = append(e.buf, '\n')
	return nil
}

// child writes the value of a map key, after its "key:".
func (e *emitter) child(v any, depth int) error {
	switch c := v.(type) {
	case *fixed:
		if seqLen(c.v) == 0 && mapLen(c.v) == 0 {
			return e.child(c.v, depth)
		}
		e.buf = append(e.buf, '\n')
		return e.writeFixed(c, depth+1, false)
	case map[string]any:
		if len(c) == 0 {
			e.buf = append(e.buf, " {}\n"...)
			return nil
		}
		e.buf = append(e.buf, '\n')
		return e.value(c, depth+1, false)
	case []any, []string:
		if seqLen(c) == 0 {
			e.buf = append(e.buf, " []\n"...)
			return nil
		}
		e.buf = append(e.buf, '\n')
		return e.value(c, depth+1, false)
	}
	e.buf = append(e.buf, ' ')
	return e.value(v, depth+1, true)
}

func mapLen(v any) int {
	if m, ok := v.(map[string]any); ok {
		return len(m)
	}
	return 0
}

func seqLen(v any) int {
	switch v := v.(type) {
	case []any:
		return len(v)
	case []string:
		return len(v)
	}
	return 0
}

// item starts the i-th item of a sequence at depth: "- ", on the line
// already started for the first item of an inline sequence.
func (e *emitter) item(i, depth int, inline bool) {
	if !inline || i > 0 {
		e.indent(depth)
	}
	e.buf = append(e.buf, '-', ' ')
}

// seqItem writes an item of a sequence at depth, after its "- ". A
// non-empty map or sequence starts on the "- " line.
func (e *emitter) seqItem(item any, depth int) error {
	switch c := item.(type) {
	case *fixed:
		if seqLen(c.v) == 0 && mapLen(c.v) == 0 {
			return e.seqItem(c.v, depth)
		}
		return e.writeFixed(c, depth+1, true)
	case map[string]any:
		if len(c) > 0 {
			return e.value(c, depth+1, true)
		}
	case []any, []string:
		if seqLen(c) > 0 {
			return e.value(c, depth+1, true)
		}
	}
	return e.value(item, depth+1, true)
}

// str writes a string that follows a "key: " or "- ": a literal block
// whose lines are indented at depth when it is one, a flow scalar
// otherwise.
func (e *emitter) str(s string, depth int) {
	if isLiteral(s) {
		e.literal(s, depth)
		return
	}
	e.buf = appendScalar(e.buf, s)
	e.buf = append(e.buf, '\n')
}

func (e *emitter) line(s string) {
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, '\n')
}

// plain reports whether s reads back as the same string when written
// without quotes: it starts with a letter, digit, '/' or '.', holds only
// characters that cannot start a comment, a flow collection, a tag, an
// anchor or a mapping (a space, ',' or ':' inside, but never ": " or
// " #"), and is not a word or number YAML reads as something else. It is
// written out by hand, in one pass: this runs for every scalar of every
// rendered object, and regular expressions made it most of the render's
// cost.
func plain(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '/', c == '.':
		case i == 0:
			return false
		case c == ' ':
			// Neither ": " nor a trailing space. ('#' is never
			// allowed, so " #" cannot occur.)
			if s[i-1] == ':' || i == len(s)-1 {
				return false
			}
		case c == ':':
			if i == len(s)-1 {
				return false
			}
		case c == '_' || c == '+' || c == '=' || c == '@' || c == ',' || c == '(' || c == ')' || c == '-':
		default:
			return false
		}
	}
	return !ambiguous(s)
}

// ambiguous reports whether a plain scalar would read, in YAML 1.1 or 1.2,
// as something other than a string: a boolean, a null, an infinity or
// not-a-number, or anything number-like. Number-like is judged broadly,
// any string of digits and the characters of number syntax, so that every
// integer, float, hex, octal, binary and sexagesimal form is quoted.
func ambiguous(s string) bool {
	// Every word starts with one of these, in either case; most
	// scalars do not, and skip the comparisons.
	if len(s) <= len("false") && strings.IndexByte("yYnNoOtTfF~.-+", s[0]) >= 0 {
		for _, w := range [...]string{"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~",
			".inf", "-.inf", "+.inf", ".nan"} {
			if strings.EqualFold(s, w) {
				return true
			}
		}
	}
	digit := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			digit = true
		case '_', '.', ':', '+', '-', 'e', 'E', 'x', 'X', 'o', 'O', 'b', 'B', 'a', 'A', 'c', 'C', 'd', 'D', 'f', 'F':
		default:
			return false
		}
	}
	return digit
}

// appendScalar appends s to b as a YAML flow scalar: plain when that
// reads back as the same string, double-quoted otherwise. Go's quoting is
// YAML's: both use \" \\ \n \t \uXXXX and the like for valid UTF-8.
func appendScalar(b []byte, s string) []byte {
	if plain(s) {
		return append(b, s...)
	}
	return strconv.AppendQuote(b, s)
}

// isLiteral reports whether s is written as a literal block scalar ("|"
// or "|-"): a multi-line text that reads back exactly that way, with no
// carriage returns or other control characters, a first line that is
// there and starts with no white space, at most one trailing newline and
// no trailing spaces. Other strings are quoted instead.
func isLiteral(s string) bool {
	body := strings.TrimSuffix(s, "\n")
	if strings.IndexByte(body, '\n') < 0 {
		return false
	}
	// The block's indentation is read from its first line, which must
	// therefore be there and not start with white space.
	if strings.HasSuffix(body, "\n") || body[0] == ' ' || body[0] == '\t' || body[0] == '\n' {
		return false
	}
	last := byte('\n')
	for i := 0; i < len(body); {
		c := body[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n':
				if last == ' ' || last == '\t' {
					return false
				}
			case c == '\t':
			case c < 0x20 || c == 0x7f:
				return false
			}
			last = c
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(body[i:])
		if r == utf8.RuneError && size == 1 || !unicode.IsPrint(r) || r == '\ufeff' {
			return false
		}
		last = 0
		i += size
	}
	return last != ' ' && last != '\t'
}

// literal writes s, which isLiteral accepts, as a literal block scalar
// whose lines are indented at depth.
func (e *emitter) literal(s string, depth int) {
	body := strings.TrimSuffix(s, "\n")
	if body == s {
		e.buf = append(e.buf, "|-\n"...)
	} else {
		e.buf = append(e.buf, "|\n"...)
	}
	for line := range strings.SplitSeq(body, "\n") {
		if line != "" {
			e.indent(depth)
			e.buf = append(e.buf, line...)
		}
		e.buf = append(e.buf, '\n')
	}
}

// ymap writes one block mapping straight into an emitter's buffer, for
// objects written without building them as maps first (writeManifests).
// Its keys must come in the order emitYAML sorts them, and a key out of
// order sets the emitter's error, so that a slip fails every render and
// test rather than writing a manifest that reads unlike the others. A
// mapping or sequence started with mapping or seq must get at least one
// key or item; an empty one is written with empty.
type ymap struct {
	e     *emitter
	depth int
	// first: the first key goes on the line already started by "- ".
	first bool
	last  string
}

// top starts an object: a mapping at depth 0 in an empty buffer.
func (e *emitter) top() ymap {
	e.buf = e.buf[:0]
	e.err = nil
	return ymap{e: e}
}

func (m *ymap) key(k string) {
	if k <= m.last && m.e.err == nil {
		m.e.err = fmt.Errorf("key %q written after %q", k, m.last)
	}
	m.last = k
	if m.first {
		m.first = false
	} else {
		m.e.indent(m.depth)
	}
	m.e.buf = appendScalar(m.e.buf, k)
	m.e.buf = append(m.e.buf, ':')
}

func (m *ymap) str(k, v string) {
	m.key(k)
	m.e.buf = append(m.e.buf, ' ')
	m.e.str(v, m.depth+1)
}

func (m *ymap) int(k string, v int) {
	m.key(k)
	m.e.buf = append(m.e.buf, ' ')
	m.e.buf = strconv.AppendInt(m.e.buf, int64(v), 10)
	m.e.buf = append(m.e.buf, '\n')
}

func (m *ymap) bool(k string, v bool) {
	m.key(k)
	m.e.buf = append(m.e.buf, ' ')
	m.e.buf = strconv.AppendBool(m.e.buf, v)
	m.e.buf = append(m.e.buf, '\n')
}

// empty writes k with an empty mapping ("{}") or sequence ("[]").
func (m *ymap) empty(k, v string) {
	m.key(k)
	m.e.buf = append(m.e.buf, ' ')
	m.e.line(v)
}

// fixed writes k with a shared part, as emitYAML writes it.
func (m *ymap) fixed(k string, f *fixed) {
	m.key(k)
	if err := m.e.child(f, m.depth); err != nil && m.e.err == nil {
		m.e.err = fmt.Errorf("%s: %w", k, err)
	}
}

func (m *ymap) mapping(k string) ymap {
	m.key(k)
	m.e.buf = append(m.e.buf, '\n')
	return ymap{e: m.e, depth: m.depth + 1}
}

func (m *ymap) seq(k string) yseq {
	m.key(k)
	m.e.buf = append(m.e.buf, '\n')
	return yseq{e: m.e, depth: m.depth + 1}
}

// strs writes k with a sequence of strings, [] for none.
func (m *ymap) strs(k string, ss ...string) {
	if len(ss) == 0 {
		m.empty(k, "[]")
		return
	}
	s := m.seq(k)
	for _, v := range ss {
		s.str(v)
	}
}

// yseq writes the items of one block sequence, each on its own "- " line.
type yseq struct {
	e     *emitter
	depth int
}

func (s yseq) mapping() ymap {
	s.e.indent(s.depth)
	s.e.buf = append(s.e.buf, '-', ' ')
	return ymap{e: s.e, depth: s.depth + 1, first: true}
}

func (s yseq) str(v string) {
	s.e.indent(s.depth)
	s.e.buf = append(s.e.buf, '-', ' ')
	s.e.str(v, s.depth+1)
}

func (s yseq) fixed(f *fixed) {
	s.e.indent(s.depth)
	s.e.buf = append(s.e.buf, '-', ' ')
	if err := s.e.seqItem(f, s.depth); err != nil && s.e.err == nil {
		s.e.err = err
	}
}
