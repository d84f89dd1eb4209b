package source

import "strings"

// breakLine is, for a block collection yaml.v3 reports as missing its
// next "-" or key, the line that breaks it. The library names the line of
// the collection's entry (its context), which may be lines above the
// line at fault: an entry's key indented one space less than its
// siblings is reported at the entry's "- ". breakLine follows the
// indentation from line on and returns the first line indented neither
// as a sibling nor as the child of a line that opens one; line itself
// when none is found.
func breakLine(data []byte, line int) int {
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) {
		return line
	}
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	// levels are the indentations open at the current line: a mapping's
	// keys, a sequence's "-", an entry's content after its "- ".
	var levels []int
	var opens bool
	var scalarAt = -1 // a block scalar's indentation: deeper lines are its text
	note := func(l string) {
		in := indent(l)
		t := strings.TrimSpace(l)
		levels = append(levels, in)
		if rest, ok := strings.CutPrefix(t, "- "); ok && strings.TrimSpace(rest) != "" {
			levels = append(levels, in+2+indent(rest))
			t = strings.TrimSpace(rest)
		}
		t = strings.TrimSpace(stripComment(t))
		opens = strings.HasSuffix(t, ":") || t == "-"
		scalarAt = -1
		if strings.HasSuffix(t, "|") || strings.HasSuffix(t, ">") || strings.HasSuffix(t, "|-") || strings.HasSuffix(t, ">-") {
			scalarAt = in
		}
	}
	note(lines[line-1])
	for i := line; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		in := indent(l)
		if scalarAt >= 0 && in > scalarAt {
			continue
		}
		for len(levels) > 0 && levels[len(levels)-1] > in {
			levels = levels[:len(levels)-1]
		}
		if len(levels) == 0 {
			return line
		}
		if top := levels[len(levels)-1]; top < in && !opens {
			return i + 1
		}
		if levels[len(levels)-1] == in {
			levels = levels[:len(levels)-1]
		}
		note(l)
	}
	return line
}

// stripComment removes a trailing " #" comment from a line outside
// quotes, roughly: enough to see whether the line opens a block.
func stripComment(t string) string {
	if i := strings.Index(t, " #"); i >= 0 && !strings.ContainsAny(t[:i], `"'`) {
		return t[:i]
	}
	return t
}
