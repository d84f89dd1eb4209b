package suggest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// edit is one insertion into a file's text.
type edit struct {
	file   string
	offset int
	text   string
}

// place is where a rule edit goes in a Connection's YAML, and what it
// says.
type place struct {
	edit
	line int    // the line of the rule (or the rules list) edited
	what string // "adds … to the rule …" or "adds a rule …"
}

// lineStarts are the byte offsets of each line's start.
func lineStarts(src []byte) []int {
	starts := []int{0}
	for i, c := range src {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

func offsetOf(starts []int, line, col int) (int, bool) {
	if line < 1 || line > len(starts) || col < 1 {
		return 0, false
	}
	return starts[line-1] + col - 1, true
}

// lineEnd is the offset just past line's newline (the file's end when
// the line has none).
func lineEnd(src []byte, starts []int, line int) int {
	if line < len(starts) {
		return starts[line]
	}
	return len(src)
}

func scalars(n *yaml.Node) []string {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, c.Value)
	}
	return out
}

// injectEntry finds the inject entry of a Connection that covers host.
func injectEntry(conn *yaml.Node, host string) *yaml.Node {
	inject := source.Lookup(source.Lookup(source.Lookup(conn, "spec"), "placement"), "inject")
	if inject == nil || inject.Kind != yaml.SequenceNode {
		return nil
	}
	for _, e := range inject.Content {
		if slices.ContainsFunc(scalars(source.Lookup(e, "hosts")), func(h string) bool { return strings.EqualFold(h, host) }) {
			return e
		}
	}
	return nil
}

var plainPath = regexp.MustCompile(`^/[A-Za-z0-9/._~%+@!$&'()*;=-]*$`)

// yamlString writes a path as a YAML scalar: plain when it can be,
// double-quoted (JSON's quoting, which YAML reads) otherwise.
func yamlString(p string) string {
	if plainPath.MatchString(p) && !strings.Contains(p, " #") {
		return p
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// flowEnd finds the offset of the "]" (or "}") closing the flow
// collection that opens at off, skipping quoted text.
func flowEnd(src []byte, off int) (int, bool) {
	depth := 0
	for i := off; i < len(src); i++ {
		switch c := src[i]; c {
		case '"', '\'':
			for i++; i < len(src) && src[i] != c; i++ {
				if c == '"' && src[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				return i, true
			}
		}
	}
	return 0, false
}

// lastLine is the last line a node's text takes.
func lastLine(src []byte, starts []int, n *yaml.Node) int {
	last := n.Line
	if n.Style&yaml.FlowStyle != 0 && (n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode) {
		if off, ok := offsetOf(starts, n.Line, n.Column); ok {
			if end, ok := flowEnd(src, off); ok {
				i, _ := slices.BinarySearch(starts, end+1)
				return max(last, i)
			}
		}
		return last
	}
	for _, c := range n.Content {
		last = max(last, lastLine(src, starts, c))
	}
	return last
}

// indentBefore is the text before the "-" of a block sequence item
// whose value starts at (line, col): the item's indentation.
func indentBefore(src []byte, starts []int, line, col int) (string, bool) {
	off, ok := offsetOf(starts, line, col)
	if !ok {
		return "", false
	}
	i := off - 1
	for i >= starts[line-1] && src[i] == ' ' {
		i--
	}
	if i < starts[line-1] || src[i] != '-' {
		return "", false
	}
	ind := string(src[starts[line-1]:i])
	if strings.Trim(ind, " ") != "" {
		return "", false
	}
	return ind, true
}

// addToSeq inserts items at the end of a sequence of scalars.
func addToSeq(src []byte, starts []int, seq *yaml.Node, items []string) (int, string, bool) {
	if seq.Style&yaml.FlowStyle != 0 {
		off, ok := offsetOf(starts, seq.Line, seq.Column)
		if !ok {
			return 0, "", false
		}
		end, ok := flowEnd(src, off)
		if !ok {
			return 0, "", false
		}
		sep := ", "
		if len(seq.Content) == 0 {
			sep = ""
		}
		return end, sep + strings.Join(items, ", "), true
	}
	if len(seq.Content) == 0 {
		return 0, "", false
	}
	last := seq.Content[len(seq.Content)-1]
	ind, ok := indentBefore(src, starts, last.Line, last.Column)
	if !ok {
		return 0, "", false
	}
	var b strings.Builder
	end := lineEnd(src, starts, lastLine(src, starts, last))
	if end == len(src) && (len(src) == 0 || src[len(src)-1] != '\n') {
		b.WriteString("\n")
	}
	for _, it := range items {
		fmt.Fprintf(&b, "%s- %s\n", ind, it)
	}
	return end, b.String(), true
}

// ruleEdit places the edit that lets method reach prefixes on host in
// the Connection conn (a file's text src): the prefixes added to the
// entry's rule whose methods are exactly [method], that checks no body
// and that lets no WebSocket upgrade (a refused GET added to a rule with
// websocket: true would let handshakes to its path upgrade too), else a
// new rule with just that method and those prefixes.
func ruleEdit(file string, src []byte, conn *yaml.Node, host, method string, prefixes []string) (place, error) {
	starts := lineStarts(src)
	entry := injectEntry(conn, host)
	if entry == nil {
		return place{}, fmt.Errorf("no inject entry of the Connection names %s", host)
	}
	rules := source.Lookup(entry, "rules")
	if rules == nil || rules.Kind != yaml.SequenceNode {
		return place{}, fmt.Errorf("the inject entry for %s has no rules list to add to", host)
	}
	var items []string
	for _, p := range prefixes {
		items = append(items, yamlString(p))
	}
	for _, r := range rules.Content {
		if !slices.Equal(scalars(source.Lookup(r, "methods")), []string{method}) ||
			source.Lookup(r, "body") != nil || source.Lookup(r, "graphql") != nil || source.Lookup(r, "websocket") != nil {
			continue
		}
		pp := source.Lookup(r, "pathPrefixes")
		if pp == nil || pp.Kind != yaml.SequenceNode {
			continue
		}
		if off, text, ok := addToSeq(src, starts, pp, items); ok {
			return place{edit: edit{file, off, text}, line: r.Line,
				what: fmt.Sprintf("adds %s to the pathPrefixes of the rule for [%s]", strings.Join(prefixes, ", "), method)}, nil
		}
	}
	newRule := fmt.Sprintf("{methods: [%s], pathPrefixes: [%s]}", method, strings.Join(items, ", "))
	what := fmt.Sprintf("adds a rule: methods [%s], pathPrefixes [%s]", method, strings.Join(prefixes, ", "))
	if rules.Style&yaml.FlowStyle != 0 || len(rules.Content) == 0 {
		off, text, ok := addToSeq(src, starts, rules, []string{newRule})
		if !ok {
			return place{}, fmt.Errorf("cannot place a new rule in the rules list at line %d", rules.Line)
		}
		return place{edit: edit{file, off, text}, line: rules.Line, what: what}, nil
	}
	last := rules.Content[len(rules.Content)-1]
	ind, ok := indentBefore(src, starts, last.Line, last.Column)
	if !ok {
		return place{}, fmt.Errorf("cannot place a new rule in the rules list at line %d", rules.Line)
	}
	end := lineEnd(src, starts, lastLine(src, starts, last))
	var b strings.Builder
	if end == len(src) && (len(src) == 0 || src[len(src)-1] != '\n') {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%s- methods: [%s]\n%s  pathPrefixes: [%s]\n", ind, method, ind, strings.Join(items, ", "))
	i, _ := slices.BinarySearch(starts, end)
	return place{edit: edit{file, end, b.String()}, line: i + 1, what: what}, nil
}

// apply inserts the edits (all of one file) into src. Edits at one
// offset go in the order given.
func apply(src []byte, edits []edit) []byte {
	es := slices.Clone(edits)
	slices.SortStableFunc(es, func(a, b edit) int { return a.offset - b.offset })
	var out []byte
	prev := 0
	for _, e := range es {
		out = append(out, src[prev:e.offset]...)
		out = append(out, e.text...)
		prev = e.offset
	}
	return append(out, src[prev:]...)
}
