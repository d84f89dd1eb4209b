package source

import (
	"bytes"
	"slices"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// JSON allows "\/" for "/" in a string, and serializers that guard
// against "</script>" write it; YAML 1.2 does too, but yaml.v3 refuses it
// ("found unknown escape character"). kubectl reads a .json file with a
// JSON decoder, so keyhole reads such a file as JSON would: in a file that
// is JSON (its first character other than white space is '{' or '['),
// each "\/" inside a string is read as "/", and each node keeps the line
// and column it has in the file.

// slashShifts records, line by line, where jsonSlashes removed a
// backslash: the column, in the rewritten text, of the '/' that followed
// it. nil when nothing was removed.
type slashShifts map[int][]int

// jsonSlashes returns data with each "\/" inside a JSON string written
// "/", and where it did so; data itself, and nil, when data is not JSON
// or holds no such escape.
func jsonSlashes(data []byte) ([]byte, slashShifts) {
	first := bytes.TrimLeft(data, " \t\r\n\uFEFF")
	if len(first) == 0 || first[0] != '{' && first[0] != '[' || !bytes.Contains(data, []byte(`\/`)) {
		return data, nil
	}
	out := make([]byte, 0, len(data))
	shifts := slashShifts{}
	line, col, removed := 1, 1, 0 // col is the rune column in data
	inString := false
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '\n':
			line, col, removed = line+1, 1, 0
			out = append(out, c)
			i++
			continue
		case inString && c == '\\' && i+1 < len(data) && data[i+1] == '/':
			removed++
			shifts[line] = append(shifts[line], col+1-removed)
			out = append(out, '/')
			i, col = i+2, col+2
			continue
		case inString && c == '\\' && i+1 < len(data) && data[i+1] != '\n':
			// An escape of its own, such as "\\" or "\"": both characters.
			_, w := utf8.DecodeRune(data[i+1:])
			out = append(out, data[i:i+1+w]...)
			i, col = i+1+w, col+2
			continue
		case c == '"':
			inString = !inString
		}
		_, w := utf8.DecodeRune(data[i:])
		out = append(out, data[i:i+w]...)
		i, col = i+w, col+1
	}
	if len(shifts) == 0 {
		return data, nil
	}
	return out, shifts
}

// restore gives each node of n the column it has in the file, before
// jsonSlashes removed the backslashes before it on its line.
func (s slashShifts) restore(n *yaml.Node) {
	if s == nil || n == nil {
		return
	}
	if at := s[n.Line]; len(at) > 0 {
		// Each removal left of the node moved it one column left.
		i, _ := slices.BinarySearch(at, n.Column)
		n.Column += i
	}
	for _, c := range n.Content {
		s.restore(c)
	}
}
