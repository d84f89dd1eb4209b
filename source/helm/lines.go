package helm

import (
	"strings"
	"unicode/utf8"

	"keyhole.dev/keyhole/source"
)

// Mapping a template's output back to the template, so that what keyhole
// says of a rendered object points at the template's own line: the lines
// of a template that hold no action come out of Helm as written, so an
// alignment of the output's lines with the template's (the most lines in
// common, in order, a range block's lines taken again for each pass of
// the loop) anchors them; a line of the output between two anchors is
// the work of an action between them, and takes the line of the template
// between them it is most like (the action's own line, an include's or a
// toYaml's whatever it writes). See docs/inputs.md, "Helm charts".

// maxAlignCells bounds one alignment: the lines of the output times the
// lines of the template, less those they begin and end with in common.
// A cell costs five bytes, so the bound is 5 MiB; past it the output's
// lines are placed without one (unaligned).
const maxAlignCells = 1 << 20

// maxLikeWork bounds the characters compared when placing the lines
// actions wrote among the template lines between two anchors; past it a
// line goes to the first of them that holds an action writing text.
const maxLikeWork = 1 << 24

// tmplLine is one line of a template.
type tmplLine struct {
	text string // without its line break
	// plain says no action touches the line and no define holds it:
	// when Helm writes it, it writes it as it is.
	plain bool
	// hidden says a define holds the line: it is never written here.
	hidden bool
	// output says an action that may write text starts on the line;
	// control says one that writes none does (if, end, a comment).
	output, control bool
	// starts are the columns (1-based, in characters) where the line's
	// actions start.
	starts []int
}

// span is a block of template lines, first and last (0-based): a range
// and its end, or a define and its end; col is the column (1-based, in
// characters) of the action opening it.
type span struct{ first, last, col int }

// templateLines maps each line of out, a template's output, to where the
// template tmpl wrote it, never past the template's last line. Where the
// alignment would cost more than maxAlignCells, each line is placed as
// unaligned says.
func templateLines(tmpl, out string) []source.TemplateLine {
	t, loops := scanTemplate(tmpl)
	o := splitLines(out)
	lines := make([]source.TemplateLine, len(o))
	loop := firstLoop(loops)
	copyOf, ok := align(t, o, loops)
	if !ok {
		for i := range o {
			lines[i] = unaligned(t, o[i], i, loop)
		}
		return lines
	}
	at := place(t, o, copyOf, loops)
	last := lastLine(t)
	for i, j := range at {
		if j < 0 {
			// No template line to give (a define holds every one).
			lines[i] = unaligned(t, o[i], i, loop)
			continue
		}
		j = min(j, last)
		same := utf8.RuneCountInString(o[i])
		if copyOf[i] != j {
			same = commonPrefixRunes(o[i], t[j].text)
		}
		lines[i] = source.TemplateLine{Line: int32(j + 1), Same: int32(same), Column: int32(actionColumn(t[j].starts, same))}
	}
	return lines
}

// lastLine is the index of t's last line: the empty text after a line
// break that ends the template is no line of it (an editor, or a CI
// annotation, has none there).
func lastLine(t []tmplLine) int {
	if n := len(t); n > 1 && t[n-1].text == "" {
		return n - 2
	}
	return len(t) - 1
}

// firstLoop is the range block of loops that starts first, nil for none.
func firstLoop(loops []span) *span {
	var first *span
	for k := range loops {
		if first == nil || loops[k].first < first.first {
			first = &loops[k]
		}
	}
	return first
}

// unaligned places line i (0-based) of a template's output, text, where
// no alignment does: at the template's line i as long as that comes
// before loop, the first range block, if any (the lines above a loop come
// out once, in their order), else at the loop's {{ range }} line, since
// from its first pass on the output's lines no longer follow the
// template's; never past the template's last line.
func unaligned(t []tmplLine, text string, i int, loop *span) source.TemplateLine {
	switch {
	case loop != nil && i >= loop.first:
		return source.TemplateLine{Line: int32(loop.first + 1), Column: int32(loop.col)}
	case i > lastLine(t):
		return source.TemplateLine{Line: int32(lastLine(t) + 1), Column: 1}
	}
	return source.TemplateLine{Line: int32(i + 1), Same: int32(utf8.RuneCountInString(text)), Column: 1}
}

// actionColumn is the column of the action where a line written from a
// template line first differs from it, past the first same characters:
// the last action starting there or before, else the line's first
// action, else 1.
func actionColumn(starts []int, same int) int {
	col := 0
	for _, s := range starts {
		if s <= same+1 {
			col = s
		}
	}
	if col == 0 && len(starts) > 0 {
		col = starts[0]
	}
	return max(col, 1)
}

// splitLines splits text into lines as yaml.v3 counts them: at LF, CR
// LF, a CR alone, NEL and the Unicode line and paragraph separators.
func splitLines(text string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '\r' && i+1 < len(text) && text[i+1] == '\n':
			lines = append(lines, text[start:i])
			i += 2
			start = i
			continue
		case r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029:
			lines = append(lines, text[start:i])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(lines, text[start:])
}

// scanTemplate splits tmpl into lines and reads its actions as Go's
// text/template lexes them (strings, raw strings and characters inside
// an action do not end it; a comment is an action of its own), with the
// blocks they open: it returns the lines and the range blocks.
func scanTemplate(tmpl string) ([]tmplLine, []span) {
	texts := splitLines(tmpl)
	t := make([]tmplLine, len(texts))
	// starts[i] is the offset in tmpl where line i starts.
	starts := make([]int, len(texts))
	off := 0
	for i, s := range texts {
		t[i] = tmplLine{text: s, plain: true}
		starts[i] = off
		off += len(s)
		if off < len(tmpl) {
			off += breakLen(tmpl[off:])
		}
	}
	lineAt := func(from, offset int) int {
		for from+1 < len(starts) && starts[from+1] <= offset {
			from++
		}
		return from
	}
	type open struct {
		kw        string
		line, col int
	}
	var (
		stack   []open
		loops   []span
		defines []span
		line    int
	)
	for i := 0; i < len(tmpl); {
		k := strings.Index(tmpl[i:], "{{")
		if k < 0 {
			break
		}
		begin := i + k
		line = lineAt(line, begin)
		end, kw := lexAction(tmpl, begin)
		last := lineAt(line, max(end-1, begin))
		for j := line; j <= last; j++ {
			t[j].plain = false
		}
		col := utf8.RuneCountInString(tmpl[starts[line]:begin]) + 1
		t[line].starts = append(t[line].starts, col)
		switch kw {
		case "if", "with", "range", "define", "block":
			stack = append(stack, open{kw, line, col})
		case "end":
			if n := len(stack); n > 0 {
				o := stack[n-1]
				stack = stack[:n-1]
				switch o.kw {
				case "range":
					loops = append(loops, span{o.line, last, o.col})
				case "define":
					defines = append(defines, span{o.line, last, o.col})
				}
			}
		}
		if writes(kw) {
			t[line].output = true
		} else {
			t[line].control = true
		}
		i = end
		line = last
	}
	for _, d := range defines {
		for j := d.first; j <= d.last; j++ {
			t[j].hidden, t[j].plain = true, false
		}
	}
	return t, loops
}

// writes reports whether an action whose first word is kw may write text.
func writes(kw string) bool {
	switch kw {
	case "if", "else", "end", "range", "with", "define", "break", "continue", "/*", ":=":
		return false
	}
	return true
}

// breakLen is the length of the line break text starts with.
func breakLen(text string) int {
	if strings.HasPrefix(text, "\r\n") {
		return 2
	}
	_, size := utf8.DecodeRuneInString(text)
	return size
}

// lexAction reads the action starting at tmpl[begin] ("{{"): the offset
// just past it (the end of tmpl when it is not closed) and its first
// word: a keyword, "/*" for a comment, ":=" for a variable's
// declaration or assignment, else what it calls ("" for a value).
func lexAction(tmpl string, begin int) (end int, kw string) {
	p := begin + 2
	if strings.HasPrefix(tmpl[p:], "- ") || strings.HasPrefix(tmpl[p:], "-\t") || strings.HasPrefix(tmpl[p:], "-\n") || strings.HasPrefix(tmpl[p:], "-\r") {
		p += 2
	}
	for p < len(tmpl) && isSpace(tmpl[p]) {
		p++
	}
	if strings.HasPrefix(tmpl[p:], "/*") {
		c := strings.Index(tmpl[p+2:], "*/")
		if c < 0 {
			return len(tmpl), "/*"
		}
		p += 2 + c + 2
		if e := strings.Index(tmpl[p:], "}}"); e >= 0 {
			return p + e + 2, "/*"
		}
		return len(tmpl), "/*"
	}
	w := p
	for w < len(tmpl) && (isWord(tmpl[w]) || tmpl[w] == '$') {
		w++
	}
	kw = tmpl[p:w]
	if strings.HasPrefix(kw, "$") {
		rest := strings.TrimLeft(tmpl[w:], " \t")
		if strings.HasPrefix(rest, ":=") || strings.HasPrefix(rest, "=") && !strings.HasPrefix(rest, "==") {
			kw = ":="
		}
	}
	for p < len(tmpl) {
		switch c := tmpl[p]; {
		case strings.HasPrefix(tmpl[p:], "}}"):
			return p + 2, kw
		case c == '"' || c == '\'':
			p = skipQuoted(tmpl, p+1, c)
		case c == '`':
			q := strings.IndexByte(tmpl[p+1:], '`')
			if q < 0 {
				return len(tmpl), kw
			}
			p += 1 + q + 1
		default:
			p++
		}
	}
	return len(tmpl), kw
}

// skipQuoted returns the offset past the quote q closing the string or
// character that starts at p, a backslash escaping the next byte; a
// string ends at its line's end, where Go's lexer fails on it.
func skipQuoted(tmpl string, p int, q byte) int {
	for p < len(tmpl) {
		switch tmpl[p] {
		case '\\':
			p += 2
			continue
		case q:
			return p + 1
		case '\n':
			return p
		}
		p++
	}
	return len(tmpl)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isWord(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// align finds the most lines of out that are plain lines of t, in order,
// a range block's lines taken again for each pass of its loop: for each
// line of out, the line of t it is a copy of, or -1. It reports false
// when that would cost more than maxAlignCells.
func align(t []tmplLine, out []string, loops []span) ([]int, bool) {
	copyOf := make([]int, len(out))
	for i := range copyOf {
		copyOf[i] = -1
	}
	// Lines compared as numbers: the same number for the same text,
	// -1 for a template line Helm does not write as it is.
	ids := map[string]int{}
	id := func(s string) int {
		n, ok := ids[s]
		if !ok {
			n = len(ids)
			ids[s] = n
		}
		return n
	}
	tid := make([]int, len(t))
	for j := range t {
		tid[j] = -1
		if t[j].plain {
			tid[j] = id(t[j].text)
		}
	}
	oid := make([]int, len(out))
	for i := range out {
		oid[i] = id(out[i])
	}
	same := func(i, j int) bool { return oid[i] == tid[j] }
	// The lines both begin and end with are copies, whatever the loops:
	// matching them first loses no match.
	lo := 0
	for lo < len(out) && lo < len(t) && same(lo, lo) {
		copyOf[lo] = lo
		lo++
	}
	hiO, hiT := len(out), len(t)
	for hiO > lo && hiT > lo && same(hiO-1, hiT-1) {
		copyOf[hiO-1] = hiT - 1
		hiO, hiT = hiO-1, hiT-1
	}
	n, m := hiO-lo, hiT-lo
	if n == 0 || m == 0 {
		return copyOf, true
	}
	if int64(n)*int64(m+1) > maxAlignCells {
		return nil, false
	}
	// reach[j] is the furthest position (0..m, before line lo+j) from
	// which the alignment may come back to position j: a range block
	// holding j may run again from its start after its end.
	reach := make([]int, m+1)
	for j := range reach {
		reach[j] = j
	}
	for _, l := range loops {
		s, e := l.first-lo, l.last-lo+1
		s, e = max(s, 0), min(e, m)
		for j := s; j <= e; j++ {
			reach[j] = max(reach[j], e)
		}
	}
	// prev[j] is the most copies aligning out[lo:lo+i] with the template
	// up to position j; cur[j] the same for i+1 before the moves that
	// skip template lines (pre), then after. from[i][j] is the position
	// j came from by those moves; matched[i][j] says pre[j] matched a
	// line.
	prev := make([]int32, m+1)
	pre := make([]int32, m+1)
	cur := make([]int32, m+1)
	from := make([]int32, n*(m+1))
	matched := make([]bool, n*(m+1))
	best := make([]int32, m+1) // best[j]: the position ≤ j with the most
	for i := range n {
		row := i * (m + 1)
		for j := 0; j <= m; j++ {
			pre[j] = prev[j]
			if j > 0 && same(lo+i, lo+j-1) && prev[j-1]+1 > pre[j] {
				pre[j] = prev[j-1] + 1
				matched[row+j] = true
			}
		}
		for j := 0; j <= m; j++ {
			best[j] = int32(j)
			if j > 0 && pre[best[j-1]] > pre[j] {
				best[j] = best[j-1]
			}
		}
		for j := 0; j <= m; j++ {
			k := best[reach[j]]
			if pre[j] >= pre[k] {
				k = int32(j)
			}
			from[row+j], cur[j] = k, pre[k]
		}
		prev, cur = cur, prev
	}
	j := m
	for i := n - 1; i >= 0; i-- {
		row := i * (m + 1)
		k := int(from[row+j])
		if matched[row+k] {
			copyOf[lo+i] = lo + k - 1
			j = k - 1
		} else {
			j = k
		}
	}
	return copyOf, true
}

// place gives each line of out the line of t it was written from: its
// own where it is a copy; else, of the template lines between the copies
// around it (across a range block's end and start where the copies are
// of two passes of its loop), the one most like it, those holding an
// action that writes text first. -1 when t has no line to give.
func place(t []tmplLine, out []string, copyOf []int, loops []span) []int {
	at := make([]int, len(out))
	work := 0
	for i := 0; i < len(out); {
		if copyOf[i] >= 0 {
			at[i] = copyOf[i]
			i++
			continue
		}
		// out[i:k] are written by actions, between the copies
		// out[i-1] and out[k].
		k := i
		for k < len(out) && copyOf[k] < 0 {
			k++
		}
		after, before := -1, len(t)
		if i > 0 {
			after = copyOf[i-1]
		}
		if k < len(out) {
			before = copyOf[k]
		}
		cands := between(t, after, before, loops)
		for x := i; x < k; x++ {
			at[x] = likest(t, out[x], cands, &work)
		}
		i = k
	}
	return at
}

// between lists the template lines that may have written what comes
// between copies of lines after and before (-1 and len(t) for the
// template's start and end), in order.
func between(t []tmplLine, after, before int, loops []span) []int {
	var lines []int
	add := func(from, to int) {
		for j := from; j < to; j++ {
			if !t[j].hidden {
				lines = append(lines, j)
			}
		}
	}
	if after < before {
		add(after+1, before)
	} else {
		// The copies are of two passes of a loop: from after to the
		// end of the innermost range block holding both, then from
		// its start to before.
		in := span{first: 0, last: len(t) - 1}
		for _, l := range loops {
			if l.first <= before && after <= l.last && l.last-l.first < in.last-in.first {
				in = l
			}
		}
		add(after+1, in.last+1)
		add(in.first, before)
	}
	if len(lines) == 0 {
		// Nothing between: the copy above, or below at the start.
		switch {
		case after >= 0:
			lines = append(lines, after)
		case before < len(t):
			lines = append(lines, before)
		}
	}
	return lines
}

// likest is the line of cands out is most like: the longest common start
// and end, a line holding an action that writes text before one of text
// alone before one of actions writing none, the first of equals. Past
// maxLikeWork it is the first candidate writing text.
func likest(t []tmplLine, out string, cands []int, work *int) int {
	if len(cands) == 0 {
		return -1
	}
	best, bestScore, bestRank := cands[0], -1, -1
	for _, j := range cands {
		rank := 0
		switch {
		case t[j].output:
			rank = 2
		case !t[j].control:
			rank = 1
		}
		if *work > maxLikeWork {
			if rank == 2 {
				return j
			}
			continue
		}
		*work += min(len(out), len(t[j].text)) + 1
		score := likeness(out, t[j].text)
		if score > bestScore || score == bestScore && rank > bestRank {
			best, bestScore, bestRank = j, score, rank
		}
	}
	return best
}

// likeness is how many bytes a and b have in common at their start and,
// after that, at their end.
func likeness(a, b string) int {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	return p + s
}

// commonPrefixRunes is how many characters a and b have in common at
// their start.
func commonPrefixRunes(a, b string) int {
	n := 0
	for len(a) > 0 && len(b) > 0 {
		ra, sa := utf8.DecodeRuneInString(a)
		rb, sb := utf8.DecodeRuneInString(b)
		if ra != rb || sa != sb {
			break
		}
		a, b, n = a[sa:], b[sb:], n+1
	}
	return n
}
