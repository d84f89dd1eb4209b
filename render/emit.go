package render

import (
	"bytes"
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
	if err := e.value(v, 0, false); err != nil {
		return nil, err
	}
	return e.buf.Bytes(), nil
}

// rawScalar is a scalar written verbatim: a number or null carried
// unchanged from an input object by the omnia target. Only
// scalarOf builds one, from a value yaml.v3 decoded, so it is always one
// of YAML's own number or null forms.
type rawScalar string

// maxKey bounds a written map key: YAML limits implicit keys to 1024
// characters. The renderer's keys are field names and label keys.
const maxKey = 1000

type emitter struct {
	buf bytes.Buffer
}

func (e *emitter) indent(n int) {
	for range n {
		e.buf.WriteString("  ")
	}
}

// value writes v at indentation level depth. inline is true when v
// follows a "key:" or "- " on the same line.
func (e *emitter) value(v any, depth int, inline bool) error {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			return e.scalarLine("{}", inline)
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			// A map that starts on a "- " line puts its first key there.
			if !inline || i > 0 {
				e.indent(depth)
			}
			key := scalar(k)
			if len(key) > maxKey {
				return fmt.Errorf("a map key of %d bytes is longer than YAML's implicit keys may be", len(key))
			}
			e.buf.WriteString(key)
			e.buf.WriteByte(':')
			if err := e.child(v[k], depth); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		return nil
	case []any:
		return e.seq(len(v), func(i int) any { return v[i] }, depth, inline)
	case []string:
		return e.seq(len(v), func(i int) any { return v[i] }, depth, inline)
	case string:
		if block, ok := literal(v, depth); ok {
			e.buf.WriteString(block)
			return nil
		}
		return e.scalarLine(scalar(v), inline)
	case rawScalar:
		return e.scalarLine(string(v), inline)
	case bool:
		return e.scalarLine(strconv.FormatBool(v), inline)
	case int:
		return e.scalarLine(strconv.Itoa(v), inline)
	case int64:
		return e.scalarLine(strconv.FormatInt(v, 10), inline)
	case int32:
		return e.scalarLine(strconv.FormatInt(int64(v), 10), inline)
	case float64:
		if v != math.Trunc(v) || math.IsInf(v, 0) || math.Abs(v) > 1<<53 {
			return fmt.Errorf("the renderer writes no non-integer number (%v)", v)
		}
		return e.scalarLine(strconv.FormatInt(int64(v), 10), inline)
	}
	return fmt.Errorf("the renderer cannot write a %T", v)
}

// child writes the value of a map key, after its "key:".
func (e *emitter) child(v any, depth int) error {
	switch c := v.(type) {
	case map[string]any:
		if len(c) == 0 {
			e.buf.WriteString(" {}\n")
			return nil
		}
		e.buf.WriteByte('\n')
		return e.value(c, depth+1, false)
	case []any, []string:
		if seqLen(c) == 0 {
			e.buf.WriteString(" []\n")
			return nil
		}
		e.buf.WriteByte('\n')
		return e.value(c, depth+1, false)
	case string:
		if block, ok := literal(c, depth+1); ok {
			e.buf.WriteByte(' ')
			e.buf.WriteString(block)
			return nil
		}
	}
	e.buf.WriteByte(' ')
	return e.value(v, depth+1, true)
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

func (e *emitter) seq(n int, at func(int) any, depth int, inline bool) error {
	if n == 0 {
		return e.scalarLine("[]", inline)
	}
	for i := range n {
		if !inline || i > 0 {
			e.indent(depth)
		}
		e.buf.WriteString("- ")
		item := at(i)
		switch c := item.(type) {
		case map[string]any:
			if len(c) > 0 {
				if err := e.value(c, depth+1, true); err != nil {
					return fmt.Errorf("[%d]: %w", i, err)
				}
				continue
			}
		case []any, []string:
			if seqLen(c) > 0 {
				if err := e.value(c, depth+1, true); err != nil {
					return fmt.Errorf("[%d]: %w", i, err)
				}
				continue
			}
		case string:
			if block, ok := literal(c, depth+1); ok {
				e.buf.WriteString(block)
				continue
			}
		}
		if err := e.value(item, depth+1, true); err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
	}
	return nil
}

func (e *emitter) scalarLine(s string, _ bool) error {
	e.buf.WriteString(s)
	e.buf.WriteByte('\n')
	return nil
}

// plain reports whether s reads back as the same string when written
// without quotes: it starts with a letter, digit, '/' or '.', holds only
// characters that cannot start a comment, a flow collection, a tag, an
// anchor or a mapping (a space, ',' or ':' inside, but never ": " or
// " #"), and is not a word or number YAML reads as something else. It is
// written out by hand: this runs for every scalar of every rendered
// object, and regular expressions made it most of the render's cost.
func plain(s string) bool {
	if s == "" || strings.HasSuffix(s, ":") || strings.HasSuffix(s, " ") ||
		strings.Contains(s, ": ") || strings.Contains(s, " #") || ambiguous(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '/', c == '.':
		case i > 0 && strings.IndexByte("_+=@, :()-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ambiguous reports whether a plain scalar would read, in YAML 1.1 or 1.2,
// as something other than a string: a boolean, a null, an infinity or
// not-a-number, or anything number-like. Number-like is judged broadly,
// any string of digits and the characters of number syntax, so that every
// integer, float, hex, octal, binary and sexagesimal form is quoted.
func ambiguous(s string) bool {
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~",
		".inf", "-.inf", "+.inf", ".nan":
		return true
	}
	digit := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			digit = true
		case strings.IndexByte("_.:+-eExXoObBaAcCdDfF", c) >= 0:
		default:
			return false
		}
	}
	return digit
}

// scalar returns s as a YAML flow scalar: plain when that reads back as
// the same string, double-quoted otherwise. Go's quoting is YAML's: both
// use \" \\ \n \t \uXXXX and the like for valid UTF-8.
func scalar(s string) string {
	if plain(s) {
		return s
	}
	return strconv.Quote(s)
}

// literal returns s as a literal block scalar ("|" or "|-") when it is a
// multi-line text that reads back exactly that way at the given depth: no
// carriage returns or other control characters, a first line that is
// there and starts with no white space, at most one trailing newline and
// no trailing spaces. ok is
// false otherwise, and the string is quoted instead.
func literal(s string, depth int) (string, bool) {
	if !strings.Contains(strings.TrimSuffix(s, "\n"), "\n") || !utf8.ValidString(s) {
		return "", false
	}
	body, chomp := strings.TrimSuffix(s, "\n"), "|"
	if body == s {
		chomp = "|-"
	}
	// The block's indentation is read from its first line, which must
	// therefore be there and not start with white space.
	if strings.HasSuffix(body, "\n") || body == "" || strings.ContainsAny(body[:1], " \t\n") {
		return "", false
	}
	for _, r := range body {
		if r != '\n' && r != '\t' && (!unicode.IsPrint(r) || r == '\ufeff') {
			return "", false
		}
	}
	var b strings.Builder
	b.WriteString(chomp)
	b.WriteByte('\n')
	pad := strings.Repeat("  ", depth)
	for _, line := range strings.Split(body, "\n") {
		if strings.HasSuffix(line, " ") || strings.HasSuffix(line, "\t") {
			return "", false
		}
		if line != "" {
			b.WriteString(pad)
			b.WriteString(line)
		}
		b.WriteByte('\n')
	}
	return b.String(), true
}
