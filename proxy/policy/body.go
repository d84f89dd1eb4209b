package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrBody is wrapped when a request body cannot satisfy a rule's body
// condition. Its message says why, without quoting a value.
// MaxBodyCheck is how much of a request body the proxy reads to match a
// rule's Body condition; a longer body matches no such rule.
const MaxBodyCheck = 1 << 20

var ErrBody = errors.New("body refused")

// Body is what a rule's body condition looks at: the bytes the proxy read
// and the headers that say how the upstream will read them.
type Body struct {
	// Data is the body as sent, up to the proxy's read limit.
	Data []byte
	// Complete is false when Data was cut at the read limit.
	Complete bool
	// ContentType and ContentEncoding are every value of those headers
	// the request carried, as sent.
	ContentType     []string
	ContentEncoding []string
}

// CheckBody reports whether b satisfies want: a JSON body, declared as
// JSON, that every JSON reader parses to the same top-level fields, whose
// fields named in want each hold one of the listed strings. It returns nil
// when it does, and an error wrapping ErrBody saying why not.
//
// A body condition is only as good as the agreement between this reader
// and the upstream's, so anything two readers could take differently is
// refused rather than judged:
//
//   - the body must be declared application/json (or a +json type), in
//     UTF-8, uncompressed: a body sent as a form, or with no type at all,
//     is parsed as a form by some frameworks, and a JSON text can be a
//     form that sets the same field to another value;
//   - the bytes must be UTF-8, since readers differ on what invalid bytes
//     mean (replaced, refused, or decoded leniently into structure);
//   - the text must be exactly one JSON object: no byte order mark, no
//     comments, nothing after it;
//   - every top-level field name must be printable ASCII, since JSON
//     readers that match names without regard to case fold non-ASCII
//     letters into ASCII ones, each in its own way (Go's encoding/json
//     reads "ſtate", with U+017F, as "state"; .NET and Java fold other
//     letters), and C readers stop a name at an escaped NUL;
//   - no two top-level names may be equal once ASCII case, '_' and '-'
//     are ignored: readers that fold case, or map camelCase to
//     snake_case, take them as one field, and which copy wins differs;
//   - a wanted field must be spelled exactly, since a case-sensitive
//     reader would not see "State" as "state" and would apply its
//     default instead.
//
// Escaped spellings ("\u0073tate") are read as what they spell, as every
// JSON reader does. Nested objects are not looked into: no rule reads
// them.
func CheckBody(want map[string][]string, b Body) error {
	if err := checkJSONBody(b); err != nil {
		return err
	}
	return matchFields(want, b.Data)
}

// matchFields reports whether data, one JSON object read as CheckBody
// reads a body, has each top-level field named in want, spelled exactly,
// holding one of the listed strings. An MCP condition holds a tool's
// arguments object to it too.
func matchFields(want map[string][]string, data []byte) error {
	fields, err := topLevelFields(data)
	if err != nil {
		return err
	}
	// In order, so the failure reported is the same every time.
	for _, field := range slices.Sorted(maps.Keys(want)) {
		v, ok := fields[fieldKey(field)]
		switch {
		case !ok:
			return fmt.Errorf("%w: the body has no field %q", ErrBody, Clip(field))
		case v.name != field:
			return fmt.Errorf("%w: the body spells the field %q as %q; send it exactly as %q", ErrBody, Clip(field), Clip(v.name), Clip(field))
		case !v.isString:
			return fmt.Errorf("%w: the body's field %q is not a string", ErrBody, Clip(field))
		}
		found := false
		for _, w := range want[field] {
			if v.value == w {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%w: the body's field %q holds a value the rule does not allow", ErrBody, Clip(field))
		}
	}
	return nil
}

// checkJSONBody refuses a body the proxy cannot read whole as UTF-8 JSON:
// one cut at the read limit, one declared otherwise (checkBodyHeaders), or
// one whose bytes are not UTF-8.
func checkJSONBody(b Body) error {
	if !b.Complete {
		return fmt.Errorf("%w: the body is longer than the %d bytes the proxy reads to check it", ErrBody, MaxBodyCheck)
	}
	if err := checkBodyHeaders(b); err != nil {
		return err
	}
	if !utf8.Valid(b.Data) {
		return fmt.Errorf("%w: the body is not valid UTF-8", ErrBody)
	}
	return nil
}

// checkBodyHeaders refuses a body that is not declared as uncompressed
// UTF-8 JSON, exactly once.
func checkBodyHeaders(b Body) error {
	if len(b.ContentType) != 1 {
		if len(b.ContentType) == 0 {
			return fmt.Errorf("%w: a body rule needs Content-Type: application/json, and the request has none", ErrBody)
		}
		return fmt.Errorf("%w: the request has %d Content-Type headers", ErrBody, len(b.ContentType))
	}
	mt, params, err := mime.ParseMediaType(b.ContentType[0])
	if err != nil || !isJSONType(mt) {
		return fmt.Errorf("%w: a body rule needs Content-Type: application/json, not %q", ErrBody, Clip(b.ContentType[0]))
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return fmt.Errorf("%w: Content-Type %q has a parameter other than charset=utf-8", ErrBody, Clip(b.ContentType[0]))
		}
	}
	for _, ce := range b.ContentEncoding {
		if !strings.EqualFold(strings.TrimSpace(ce), "identity") {
			return fmt.Errorf("%w: a body rule cannot read a body with Content-Encoding %q", ErrBody, Clip(ce))
		}
	}
	return nil
}

// isJSONType reports whether a media type (lowercased by ParseMediaType)
// is JSON: application/json or application/<anything>+json, as Git LFS
// sends application/vnd.git-lfs+json.
func isJSONType(mt string) bool {
	sub, ok := strings.CutPrefix(mt, "application/")
	return ok && (sub == "json" || strings.HasSuffix(sub, "+json") && len(sub) > len("+json"))
}

// field is one top-level field of a body: its name as sent (unescaped)
// and, when it is a string, its value.
type field struct {
	name     string
	value    string
	isString bool
	// raw is the value as sent, JSON.
	raw json.RawMessage
}

// errNotObject is topLevelFields' answer for a text that is not one JSON
// object.
var errNotObject = fmt.Errorf("%w: the body is not one JSON object", ErrBody)

// topLevelFields reads one JSON object and returns its fields by
// fieldKey, refusing the ambiguities CheckBody lists.
func topLevelFields(data []byte) (map[string]field, error) {
	notObject := errNotObject
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, notObject
	}
	fields := map[string]field{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, notObject
		}
		name, ok := t.(string)
		if !ok {
			return nil, notObject
		}
		if !printableASCII(name) {
			return nil, fmt.Errorf("%w: the body has a top-level field name that is not printable ASCII, which some JSON readers fold into another name", ErrBody)
		}
		key := fieldKey(name)
		if prev, dup := fields[key]; dup {
			if prev.name == name {
				return nil, fmt.Errorf("%w: the body gives the field %q twice", ErrBody, Clip(name))
			}
			return nil, fmt.Errorf("%w: the body has the fields %q and %q, which some JSON readers take as one", ErrBody, Clip(prev.name), Clip(name))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, notObject
		}
		f := field{name: name, raw: raw}
		if len(raw) > 0 && raw[0] == '"' {
			f.isString = json.Unmarshal(raw, &f.value) == nil
		}
		fields[key] = f
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, notObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notObject
	}
	return fields, nil
}

// fieldKey is what a top-level name is compared by: ASCII letters in
// lower case, '_' and '-' dropped. Two names with one key are one field
// to some reader.
func fieldKey(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' || c == '-':
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
