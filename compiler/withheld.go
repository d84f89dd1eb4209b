package compiler

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// A schema message never quotes a value the build set. What a kustomize
// generator read from a file (configMapGenerator files: or envs:) reaches
// keyhole's objects only through the build (a replacement, a var), and a
// replacement's delimiter and index cut any window of it, which a schema
// message would quote (`"..." is not allowed here`); no input file holds
// it as written. So a violation at a node whose value the build set (its
// position comes with a note naming who set it) says "the value" where it
// would quote that value or any part of it, and the note says where it
// was set. A value written in an input file is the author's own and is
// quoted as before.

// withheld is msg, about node n whose value the build set when note is
// not empty, with what it quotes of n's value (or, for a mapping or a
// list, of any value under it) said as "the value".
func withheld(msg, note string, n *yaml.Node) string {
	if note == "" || n == nil {
		return msg
	}
	values := scalars(n, nil)
	held := func(s string) bool {
		s = strings.TrimSuffix(s, "...")
		if s == "" {
			return false
		}
		for _, v := range values {
			if strings.Contains(v, s) {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	for rest := msg; rest != ""; {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		q, err := strconv.QuotedPrefix(rest[i:])
		if err != nil {
			b.WriteString(rest[i:])
			break
		}
		if s, err := strconv.Unquote(q); err == nil && held(s) {
			b.WriteString("the value")
		} else {
			b.WriteString(q)
		}
		rest = rest[i+len(q):]
	}
	return b.String()
}

// copied is msg, about node n whose value may be a copy of what a
// generator read from a file (source.Document.Copied), with every
// quotation of it said as "the value" (withheld) and the value itself,
// where the message repeats it unquoted, too: a check's message names a
// host, a Secret, an object as the document gives it. Values shorter than
// four bytes stay, as they would match the message's own words.
func copied(msg, note string, n *yaml.Node) string {
	msg = withheld(msg, note, n)
	for _, v := range scalars(n, nil) {
		if v = strings.TrimSpace(v); len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, "the value")
		}
	}
	return msg
}

// scalars appends the values of the scalars of n (keys included).
func scalars(n *yaml.Node, out []string) []string {
	if n.Kind == yaml.ScalarNode {
		return append(out, n.Value)
	}
	for _, c := range n.Content {
		out = scalars(c, out)
	}
	return out
}

// violationAt places a schema violation of doc and says it, what it
// quotes of a value the build set withheld (see withheld), with the note.
func violationAt(doc *source.Document, line, col int, path, msg string) (diag.Pos, string) {
	pos, note, n := doc.AtNode(line, col, path)
	return pos, withheld(msg, note, n) + note
}
