package diff

import (
	"fmt"
	"strings"
)

// opKind is one line's fate in an edit script.
type opKind byte

const (
	opEqual  opKind = ' '
	opDelete opKind = '-'
	opInsert opKind = '+'
)

// edit is one line of an edit script: a line of a (Delete), of b
// (Insert) or of both (Equal), by index.
type edit struct {
	kind opKind
	a, b int // index in a (Equal, Delete) and in b (Equal, Insert)
}

// maxEditDistance bounds the Myers search. Past it the rest of the two
// texts is reported as removed and added whole: still a correct diff,
// only not a minimal one, and the time and memory stay bounded (the
// search costs O((N+M)·D) time and O(D²) memory).
const maxEditDistance = 4000

// splitLines splits s into lines, each keeping its "\n"; the last line
// lacks one when s does not end in a newline.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// lineEdits returns a shortest edit script from a to b (Myers, "An O(ND)
// Difference Algorithm and Its Variations", 1986), deletions before
// insertions at each change, as diff(1) prints them.
func lineEdits(a, b []string) []edit {
	// Lines become small integers: comparing them is then one compare.
	ids := map[string]int{}
	id := func(lines []string) []int {
		out := make([]int, len(lines))
		for i, l := range lines {
			n, ok := ids[l]
			if !ok {
				n = len(ids)
				ids[l] = n
			}
			out[i] = n
		}
		return out
	}
	x, y := id(a), id(b)

	// A common prefix and suffix need no search.
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	out := make([]edit, 0, len(a)+len(b))
	for i := range pre {
		out = append(out, edit{opEqual, i, i})
	}
	out = append(out, myers(x[pre:len(x)-suf], y[pre:len(y)-suf], pre, pre)...)
	for i := range suf {
		out = append(out, edit{opEqual, len(a) - suf + i, len(b) - suf + i})
	}
	return out
}

// myers diffs x and y, whose first elements are at offA and offB of the
// whole texts.
func myers(x, y []int, offA, offB int) []edit {
	n, m := len(x), len(y)
	if n == 0 || m == 0 {
		return wholesale(n, m, offA, offB)
	}
	limit := min(n+m, maxEditDistance)
	off := limit + 1
	v := make([]int, 2*limit+3)
	// trace[d] is v[-d..d] as it stood before step d.
	var trace [][]int
	end := -1
	for d := 0; d <= limit && end < 0; d++ {
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
		for k := -d; k <= d; k += 2 {
			var px int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				px = v[off+k+1] // down: an insertion
			} else {
				px = v[off+k-1] + 1 // right: a deletion
			}
			py := px - k
			for px < n && py < m && x[px] == y[py] {
				px++
				py++
			}
			v[off+k] = px
			if px >= n && py >= m {
				end = d
				break
			}
		}
	}
	if end < 0 {
		return wholesale(n, m, offA, offB)
	}
	// Walk back from (n, m) to (0, 0), collecting edits in reverse.
	var rev []edit
	px, py := n, m
	for d := end; d > 0; d-- {
		prev := trace[d] // v[-d..d] before step d, i.e. after step d-1
		at := func(k int) int { return prev[k+d] }
		k := px - py
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		sx := at(pk)
		sy := sx - pk
		for px > sx && py > sy {
			px--
			py--
			rev = append(rev, edit{opEqual, offA + px, offB + py})
		}
		if pk == k+1 {
			py--
			rev = append(rev, edit{opInsert, -1, offB + py})
		} else {
			px--
			rev = append(rev, edit{opDelete, offA + px, -1})
		}
	}
	for px > 0 && py > 0 {
		px--
		py--
		rev = append(rev, edit{opEqual, offA + px, offB + py})
	}
	out := make([]edit, 0, len(rev))
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return deletionsFirst(out)
}

// wholesale reports n lines removed and m added.
func wholesale(n, m, offA, offB int) []edit {
	out := make([]edit, 0, n+m)
	for i := range n {
		out = append(out, edit{opDelete, offA + i, -1})
	}
	for i := range m {
		out = append(out, edit{opInsert, -1, offB + i})
	}
	return out
}

// deletionsFirst reorders each run of changes so its deletions come
// before its insertions, the order unified diffs are read in.
func deletionsFirst(es []edit) []edit {
	for i := 0; i < len(es); {
		if es[i].kind == opEqual {
			i++
			continue
		}
		j := i
		for j < len(es) && es[j].kind != opEqual {
			j++
		}
		run := es[i:j]
		var dels, ins []edit
		for _, e := range run {
			if e.kind == opDelete {
				dels = append(dels, e)
			} else {
				ins = append(ins, e)
			}
		}
		copy(run, append(dels, ins...))
		i = j
	}
	return es
}

// noNewline marks, as diff(1) does, a line printed without the newline
// the file lacks after it.
const noNewline = "\\ No newline at end of file\n"

// contextLines is how many unchanged lines surround each change.
const contextLines = 3

// Unified returns the unified diff of two texts, with three lines of
// context, headed --- a/aName and +++ b/bName; "" when they are equal.
// An empty side is shown as /dev/null, as git does for an added or
// removed file, when its name is "".
func Unified(aName, bName, a, b string) string {
	al, bl := splitLines(a), splitLines(b)
	es := lineEdits(al, bl)
	changed := false
	for _, e := range es {
		if e.kind != opEqual {
			changed = true
			break
		}
	}
	if !changed {
		return ""
	}
	var sb strings.Builder
	from, to := "/dev/null", "/dev/null"
	if aName != "" {
		from = "a/" + aName
	}
	if bName != "" {
		to = "b/" + bName
	}
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", from, to)
	for i := 0; i < len(es); {
		if es[i].kind == opEqual {
			i++
			continue
		}
		// A hunk: from contextLines before this change to contextLines
		// after the last change closer than 2·contextLines to the next.
		start := max(0, i-contextLines)
		end := i
		for {
			for end < len(es) && es[end].kind != opEqual {
				end++
			}
			eq := end
			for eq < len(es) && es[eq].kind == opEqual {
				eq++
			}
			if eq < len(es) && eq-end <= 2*contextLines {
				end = eq
				continue
			}
			end = min(len(es), end+contextLines)
			break
		}
		hunk := es[start:end]
		aStart, bStart, aLen, bLen := hunkRange(hunk, es[:start])
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", rangeOf(aStart, aLen), rangeOf(bStart, bLen))
		for _, e := range hunk {
			line := ""
			switch e.kind {
			case opEqual, opDelete:
				line = al[e.a]
			case opInsert:
				line = bl[e.b]
			}
			sb.WriteByte(byte(e.kind))
			sb.WriteString(line)
			if !strings.HasSuffix(line, "\n") {
				sb.WriteString("\n" + noNewline)
			}
		}
		i = end
	}
	return sb.String()
}

// hunkRange is the 1-based first line and the length of a hunk on each
// side; before is every edit before the hunk.
func hunkRange(hunk, before []edit) (aStart, bStart, aLen, bLen int) {
	for _, e := range before {
		if e.kind != opInsert {
			aStart++
		}
		if e.kind != opDelete {
			bStart++
		}
	}
	for _, e := range hunk {
		if e.kind != opInsert {
			aLen++
		}
		if e.kind != opDelete {
			bLen++
		}
	}
	// An empty range names the line before it, as diff(1) does.
	if aLen > 0 {
		aStart++
	}
	if bLen > 0 {
		bStart++
	}
	return aStart, bStart, aLen, bLen
}

func rangeOf(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}
