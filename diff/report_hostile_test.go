package diff

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/policy"
)

// hostile makes a name out of what a pull request's author would put in
// one to forge a CI log's commands or a PR comment's markdown, with mark
// in it so the test can find it again.
func hostile(r *rand.Rand, mark string, breaks bool) string {
	pieces := []string{
		"::set-output name=diff-file::", "::notice title=x::hidden", "::error::", "##[set-output name=a;]", "##vso[task.complete]",
		"\u00ad", "\u200b", "\ufeff", "\u00a0", "\u2028", " ", "\t", ":", "#", "# ", "[", "]", "(", ")", "`", "```", "<img src=x onerror=y>",
		"</details>", "<!-- ", "-->", "@octocat", "@org/team", "![x](https://e.test/x.png)", "[link](https://e.test)", "|", "\\", "*", "**", "_",
		"~~", "&amp;", "&#64;", ":warning:", "\x1b[2K", "\u202e", "a", "é", "-", "> ", "1. ", "---",
	}
	if breaks {
		pieces = append(pieces, "\n", "\r", "\r\n", "\n\n", "\n- ", "\n#### ", "\n|a|b|\n|-|-|\n", "\n```\n", "\n::error::")
	}
	var b strings.Builder
	for range 1 + r.IntN(8) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String() + mark
}

// hostileResult is a diff whose every name and free string is made by
// name(mark), and whose resource diff's lines hold such names too.
func hostileResult(name func(mark string) string, line func(mark string) string) Result {
	inject := Outcome{Action: policy.ActionInject, Credential: name("cr")}
	refuse := Outcome{Action: policy.ActionRefuse, Reason: policy.ReasonHostNotAllowed}
	s := SandboxChange{
		Unit: name("un"), Namespace: name("ns"), Name: name("sb"), Change: Changed,
		Hosts: []HostChange{
			{Host: name("ha"), Change: Added, HeadInject: name("hi"), RulesAdded: []string{name("ra")}},
			{Host: name("hc"), Change: Changed, BaseInject: name("bi"), HeadInject: name("hj"), RulesAdded: []string{name("rb")}, RulesRemoved: []string{name("rc")}},
		},
		PassthroughAdded: []string{name("pa")}, PassthroughRemoved: []string{name("pr")},
		EnvAdded: []string{name("ea")}, EnvRemoved: []string{name("er")},
		BaseImage: name("im"), HeadImage: name("in"),
		Access: Access{
			Verdict: VerdictChanged, Undecided: name("ud"),
			Widened:  []Witness{{Method: "GET", URL: name("wu"), Body: name("wb"), Base: refuse, Head: inject, Rule: name("wr")}},
			Narrowed: []Witness{{Method: "POST", URL: name("nu"), Base: inject, Head: refuse, Rule: name("nr")}},
		},
		Ceiling:      CeilingAbove,
		AboveCeiling: []CeilingWitness{{Method: "GET", URL: name("cu"), Body: name("cb"), Limit: name("cl")}},
	}
	diffText := "--- a/" + line("da") + "\n+++ b/" + line("db") + "\n@@ -1,3 +1,3 @@\n " + line("dc") + "\n-" + line("dd") + "\n+" + line("de") + "\n  " + line("df") + "\n"
	return Result{
		Base: Ref{Name: name("rb"), Commit: "0123456789abcdef0123456789abcdef01234567"},
		Head: Ref{Name: name("rh")},
		Resources: []Resource{
			{Change: Changed, Kind: name("kd"), Namespace: name("rn"), Name: name("rm"), BasePath: name("bp"), HeadPath: name("hp"), Diff: diffText, LinesAdded: 1, LinesRemoved: 1},
			{Change: Added, Kind: name("ke"), HeadPath: name("fp"), Diff: diffText, SameAs: name("sa")},
		},
		Sandboxes: []SandboxChange{s},
		Kinds:     []KindCount{{Kind: name("kd"), Changed: 1}, {Kind: name("ke"), Added: 1}},
	}
}

// TestReportHostileNames: whatever the names in a diff, no line of any
// report reads as a workflow command, the markdown report's structure is
// the one keyhole writes (no name adds a line, a heading, a table cell,
// HTML, a mention or an image, or leaves its code span), and every name
// is still there to read.
func TestReportHostileNames(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	plain := hostileResult(func(mark string) string { return "n" + mark }, func(mark string) string { return "n" + mark })
	for i := range 200 {
		names := map[string]string{}
		name := func(mark string) string {
			m := fmt.Sprintf("q%03d%s", i, mark)
			names[m] = hostile(r, m, true)
			return names[m]
		}
		// A line of a rendered file's diff is one line: the name's
		// breaks would be YAML's to quote.
		line := func(mark string) string {
			m := fmt.Sprintf("q%03d%s", i, mark)
			names[m] = hostile(r, m, false)
			return names[m]
		}
		res := hostileResult(name, line)
		for _, format := range Formats() {
			var b, pb strings.Builder
			if err := Write(&b, format, res); err != nil {
				t.Fatal(err)
			}
			if err := Write(&pb, format, plain); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, l := range strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
				if diag.IsCommand(l) || strings.HasPrefix(strings.TrimLeft(l, " \t\u00a0"), "::") {
					t.Fatalf("%s: a line reads as a workflow command: %q\n%s", format, l, out)
				}
			}
			if format == FormatJSON {
				var got jsonReport
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatalf("json: %v\n%s", err, out)
				}
				if got.Sandboxes[0].Name != res.Sandboxes[0].Name || got.Resources[0].Diff != res.Resources[0].Diff {
					t.Fatalf("json: names do not decode as they were")
				}
				continue
			}
			for m := range names {
				if !strings.Contains(out, m) {
					t.Fatalf("%s: the name %q (%s) is not in the report:\n%s", format, names[m], m, out)
				}
			}
			// Lines break where keyhole breaks them, not where a name does.
			if got, want := strings.Count(out, "\n"), strings.Count(pb.String(), "\n"); got != want {
				t.Fatalf("%s: %d lines, want %d as with plain names:\n%s", format, got, want, out)
			}
			if strings.ContainsAny(out, "\r\u2028\u2029\x1b") {
				t.Fatalf("%s: a line break or escape sequence reached the report:\n%q", format, out)
			}
			if format == FormatMarkdown {
				if got, want := mdStructure(t, out), mdStructure(t, pb.String()); got != want {
					t.Fatalf("markdown structure changed by the names:\n%s\nwant\n%s\nreport:\n%s", got, want, out)
				}
			}
		}
	}
}

// mdStructure is what of a markdown report is markdown's and not text:
// each line outside fenced code with its code spans and digits taken out
// and its text reduced to the characters markdown or GitHub reads
// (`, <, >, |, @, ![, heading and list markers), so two reports of the
// same shape have the same structure whatever their names.
func mdStructure(t *testing.T, md string) string {
	t.Helper()
	var out []string
	fence := ""
	span := regexp.MustCompile("(`+)")
	for _, l := range strings.Split(md, "\n") {
		if fence != "" {
			if l == fence {
				fence = ""
				out = append(out, "fence end")
			}
			continue
		}
		if m := regexp.MustCompile("^(`{3,})diff$").FindStringSubmatch(l); m != nil {
			fence = m[1]
			out = append(out, "fence")
			continue
		}
		// Take out the code spans: a run of backticks to the next run of
		// the same length.
		var b strings.Builder
		for l != "" {
			loc := span.FindStringIndex(l)
			if loc == nil {
				b.WriteString(l)
				break
			}
			b.WriteString(l[:loc[0]])
			run := l[loc[0]:loc[1]]
			rest := l[loc[1]:]
			end := -1
			for off := 0; ; {
				k := strings.Index(rest[off:], run)
				if k < 0 {
					break
				}
				k += off
				if (k+len(run) == len(rest) || rest[k+len(run)] != '`') && (k == 0 || rest[k-1] != '`') {
					end = k
					break
				}
				off = k + len(run)
			}
			if end < 0 {
				t.Fatalf("an unclosed code span in %q", l)
			}
			b.WriteString("CODE")
			l = rest[end+len(run):]
		}
		text := b.String()
		// <code>…</code> and <summary> hold text keyhole escaped; what
		// is left of markup is keyhole's.
		var s strings.Builder
		for i, r := range text {
			switch {
			case strings.ContainsRune("`<>|@", r):
				s.WriteRune(r)
			case r == '!' && strings.HasPrefix(text[i:], "!["):
				s.WriteString("![")
			case (r == '#' || r == '-' || r == '*') && strings.TrimLeft(text[:i], " ") == "":
				s.WriteRune(r)
			}
		}
		out = append(out, s.String())
	}
	return strings.Join(out, "\n")
}
