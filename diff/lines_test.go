package diff

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// apply applies a unified diff made by Unified to a, as patch(1) would,
// checking every context and removed line against a. It is the test's own
// reading of the format, independent of how Unified wrote it.
func apply(a, udiff string) (string, error) {
	if udiff == "" {
		return a, nil
	}
	lines := splitLines(udiff)
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		return "", fmt.Errorf("no header: %q", udiff)
	}
	old := splitLines(a)
	var out []string
	next := 0 // next line of old not yet copied
	i := 2
	for i < len(lines) {
		var aStart, aLen, bStart, bLen int
		h := strings.TrimSuffix(lines[i], "\n")
		if _, err := fmt.Sscanf(h, "@@ -%s +%s @@", new(string), new(string)); err != nil {
			return "", fmt.Errorf("bad hunk header %q", h)
		}
		f := strings.Fields(h)
		aStart, aLen = parseRange(f[1][1:])
		bStart, bLen = parseRange(f[2][1:])
		_ = bStart
		from := aStart - 1
		if aLen == 0 {
			from = aStart
		}
		if from < next || from > len(old) {
			return "", fmt.Errorf("hunk %q out of order", h)
		}
		out = append(out, old[next:from]...)
		next = from
		i++
		gotA, gotB := 0, 0
		for i < len(lines) && !strings.HasPrefix(lines[i], "@@") {
			l := lines[i]
			body := l[1:]
			if i+1 < len(lines) && lines[i+1] == noNewline {
				body = strings.TrimSuffix(body, "\n")
				i++
			}
			switch l[0] {
			case ' ', '-':
				if next >= len(old) || old[next] != body {
					return "", fmt.Errorf("line %d of a is %q, diff says %q", next+1, old[min(next, len(old)-1)], body)
				}
				next++
				gotA++
				if l[0] == ' ' {
					out = append(out, body)
					gotB++
				}
			case '+':
				out = append(out, body)
				gotB++
			default:
				return "", fmt.Errorf("bad diff line %q", l)
			}
			i++
		}
		if gotA != aLen || gotB != bLen {
			return "", fmt.Errorf("hunk %q holds %d,%d lines", h, gotA, gotB)
		}
	}
	out = append(out, old[next:]...)
	return strings.Join(out, ""), nil
}

func parseRange(s string) (start, n int) {
	n = 1
	if a, b, ok := strings.Cut(s, ","); ok {
		s = a
		n, _ = strconv.Atoi(b)
	}
	start, _ = strconv.Atoi(s)
	return start, n
}

func TestUnified(t *testing.T) {
	for name, tc := range map[string]struct {
		a, b string
		want string
	}{
		"equal":        {a: "x\ny\n", b: "x\ny\n", want: ""},
		"both empty":   {a: "", b: "", want: ""},
		"added file":   {a: "", b: "a\nb\n", want: "--- a/old\n+++ b/new\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		"removed file": {a: "a\n", b: "", want: "--- a/old\n+++ b/new\n@@ -1 +0,0 @@\n-a\n"},
		"one line changed in the middle": {
			a:    "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			b:    "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			want: "--- a/old\n+++ b/new\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n",
		},
		"two changes far apart make two hunks": {
			a:    "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n",
			b:    "one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n",
			want: "--- a/old\n+++ b/new\n@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+twelve\n",
		},
		"two changes close together make one hunk": {
			a:    "1\n2\n3\n4\n5\n6\n7\n",
			b:    "one\n2\n3\n4\n5\n6\nseven\n",
			want: "--- a/old\n+++ b/new\n@@ -1,7 +1,7 @@\n-1\n+one\n 2\n 3\n 4\n 5\n 6\n-7\n+seven\n",
		},
		"missing final newline": {
			a:    "a\nb",
			b:    "a\nb\n",
			want: "--- a/old\n+++ b/new\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
		},
		"insertion between lines": {
			a:    "a\nc\n",
			b:    "a\nb\nc\n",
			want: "--- a/old\n+++ b/new\n@@ -1,2 +1,3 @@\n a\n+b\n c\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Unified("old", "new", tc.a, tc.b)
			if got != tc.want {
				t.Errorf("Unified:\n%s\nwant:\n%s", got, tc.want)
			}
			back, err := apply(tc.a, got)
			if err != nil || back != tc.b {
				t.Errorf("applying the diff = %q, %v; want %q", back, err, tc.b)
			}
		})
	}
}

// TestUnifiedDevNull: an absent side is /dev/null, as git prints it.
func TestUnifiedDevNull(t *testing.T) {
	got := Unified("", "x.yaml", "", "a\n")
	if want := "--- /dev/null\n+++ b/x.yaml\n@@ -0,0 +1 @@\n+a\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestLineEditsMinimal: the script is a shortest one.
func TestLineEditsMinimal(t *testing.T) {
	for name, tc := range map[string]struct {
		a, b  string
		edits int
	}{
		"abcabba to cbabac (the paper's example)": {a: "a\nb\nc\na\nb\nb\na\n", b: "c\nb\na\nb\na\nc\n", edits: 5},
		"disjoint":      {a: "a\nb\n", b: "c\nd\n", edits: 4},
		"prefix kept":   {a: "a\nb\nc\n", b: "a\nb\n", edits: 1},
		"suffix kept":   {a: "x\nb\nc\n", b: "b\nc\n", edits: 1},
		"interleaved":   {a: "a\nx\nb\nx\nc\n", b: "a\nb\nc\n", edits: 2},
		"repeated line": {a: "x\nx\nx\n", b: "x\nx\nx\nx\n", edits: 1},
	} {
		t.Run(name, func(t *testing.T) {
			n := 0
			for _, e := range lineEdits(splitLines(tc.a), splitLines(tc.b)) {
				if e.kind != opEqual {
					n++
				}
			}
			if n != tc.edits {
				t.Errorf("%d edits, want %d", n, tc.edits)
			}
		})
	}
}

// TestLineEditsBounded: past maxEditDistance the diff is still correct.
func TestLineEditsBounded(t *testing.T) {
	var a, b strings.Builder
	for i := range maxEditDistance + 10 {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	d := Unified("a", "b", a.String(), b.String())
	back, err := apply(a.String(), d)
	if err != nil || back != b.String() {
		t.Fatalf("applying the bounded diff failed: %v", err)
	}
}

func FuzzUnified(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nc\nd\n")
	f.Add("", "x")
	f.Add("x\ny", "x\ny\n")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "1\n2\nthree\n4\n5\n6\n7\n8\nnine\n10\n")
	f.Add("\n\n\n", "\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := Unified("a", "b", a, b)
		if (d == "") != (a == b) {
			t.Fatalf("Unified(%q, %q) = %q: empty exactly when equal", a, b, d)
		}
		back, err := apply(a, d)
		if err != nil {
			t.Fatalf("applying %q to %q: %v", d, a, err)
		}
		if back != b {
			t.Fatalf("applying %q to %q gave %q, want %q", d, a, back, b)
		}
	})
}
