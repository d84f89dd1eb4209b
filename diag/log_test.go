package diag

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// runnerCommand reports whether a CI runner reads line as a workflow
// command, written apart from IsCommand as the tests' own reading of the
// runner: GitHub's takes "::" at the start once white space is trimmed
// and "##[" anywhere, comparing under culture rules that pass over
// default-ignorable characters; Azure Pipelines takes "##vso[" anywhere.
func runnerCommand(line string) bool {
	var b strings.Builder
	for _, r := range line {
		if unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) {
			continue
		}
		b.WriteRune(r)
	}
	s := strings.TrimLeftFunc(b.String(), unicode.IsSpace)
	low := strings.ToLower(s)
	return strings.HasPrefix(s, "::") || strings.Contains(low, "##[") || strings.Contains(low, "##vso[")
}

// logLines splits printed output where a runner splits it into lines.
func logLines(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
}

func TestSafeLines(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"plain":              {"a.yaml:1:2: error X: m\n", "a.yaml:1:2: error X: m\n"},
		"a colon mid-line":   {"host [::1]:443 and a::b\n", "host [::1]:443 and a::b\n"},
		"set-output":         {"::set-output name=diff-file::x.yaml:1:1: error\n", `\u003a:set-output name=diff-file::x.yaml:1:1: error` + "\n"},
		"indented":           {"\t  ::notice::hidden\n", "\t  \\u003a:notice::hidden\n"},
		"after a CR":         {"ok\r::error::x", "ok\r\\u003a:error::x"},
		"no-break space":     {"\u00a0::error::x", "\u00a0\\u003a:error::x"},
		"soft hyphen":        {":\u00ad:error::x", `\u003a\u00ad:error::x`},
		"zero-width lead":    {"\u200b::error::x", `\u200b::error::x`},
		"old form anywhere":  {"a.yaml: ##[set-output name=x;]y", `a.yaml: ##\u005bset-output name=x;]y`},
		"old form twice":     {"##[a]##[b]", `##\u005ba]##\u005bb]`},
		"old form hidden":    {"#\u00ad#[x]", `#\u00ad#[x]`},
		"azure":              {"x ##VSO[task.setvariable variable=a]b", `x ##VSO\u005btask.setvariable variable=a]b`},
		"json stays json":    {`  "file": "##[x]",`, `  "file": "##\u005bx]",`},
		"single colon start": {":x", ":x"},
	} {
		t.Run(name, func(t *testing.T) {
			got := SafeLines(tc.in)
			if got != tc.want {
				t.Errorf("SafeLines(%q) = %q, want %q", tc.in, got, tc.want)
			}
			for _, l := range logLines(got) {
				if runnerCommand(l) || IsCommand(l) {
					t.Errorf("line %q still reads as a command", l)
				}
			}
			if again := SafeLines(got); again != got {
				t.Errorf("SafeLines is not idempotent: %q, then %q", got, again)
			}
		})
	}
	var s string
	json.Unmarshal([]byte(SafeLines(`"##[x]`+"\u00ad"+`::y"`)), &s)
	if s != "##[x]\u00ad::y" {
		t.Errorf("JSON string through SafeLines decodes to %q", s)
	}
}

// TestLogWriter: lines split across writes, and a last line without a
// break, are made safe all the same.
func TestLogWriter(t *testing.T) {
	var b bytes.Buffer
	w := NewLogWriter(&b)
	for _, p := range []string{"ok\n:", ":set-output name=a::b\n#", "#[x] ", "tail\r", "::last"} {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "ok\n\\u003a:set-output name=a::b\n##\\u005bx] tail\r\\u003a:last"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// hostileName makes a file or object name out of the pieces a pull
// request's author would try: workflow commands in both forms, line
// breaks, characters a runner passes over, and what would escape
// markdown. Each holds its mark, so that the tests can find it again.
func hostileName(r *rand.Rand, mark string) string {
	pieces := []string{
		"::set-output name=diff-file::", "::notice title=x::hidden", "::stop-commands::t", "::error::",
		"##[set-output name=diff-file;]", "##vso[task.setvariable variable=a]", "##[group]",
		"\n", "\r", "\r\n", "\n  ", "\n\t", "\u00ad", "\u200b", "\ufeff", "\u2028", "\u0085", "\u00a0", "\u180e", "\ufe0f",
		" ", "\t", ":", "#", "[", "`", "``", "<img src=x>", "</details>", "@octocat", "![x](https://e.test/x.png)",
		"|", "%0A", "%3A", "\x1b[2K", "\u202e", "a", "é", ".yaml", "/", "\\", "*", "_",
	}
	var b strings.Builder
	for range 1 + r.IntN(8) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	// The mark somewhere in the name, not always first.
	s := b.String()
	at := r.IntN(len(s) + 1)
	for at > 0 && at < len(s) && !isRuneStart(s[at]) {
		at--
	}
	return s[:at] + mark + s[at:]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// TestPrintersHostileNames feeds diagnostics whose file, object, units and
// message are hostile names to every format: no line of any of them reads
// as a workflow command but the github format's own annotations, and
// every name is still there to be read (escaped, never dropped).
func TestPrintersHostileNames(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	annotation := regexp.MustCompile(`^::(error|warning|notice) (file=[^:,\r\n]*,line=\d+,col=\d+,)?title=[^:,\r\n]*::[^\r\n]*$`)
	for i := range 300 {
		var ds List
		var marks []string
		var names []string
		sum := Summary{Documents: 3, Objects: 3}
		for j := range 1 + r.IntN(14) { // past 10, github prints plain lines too
			mark := fmt.Sprintf("mk%03dx%d", i, j)
			file, obj := hostileName(r, mark+"f"), hostileName(r, mark+"o")
			marks = append(marks, mark+"f")
			names = append(names, file)
			ds = append(ds, Diagnostic{
				Code: "SchemaInvalid", Severity: Warning + Severity(r.IntN(2)),
				Pos:     Pos{File: file, Line: 1 + j, Column: 1},
				Object:  Object{Kind: "Connection", Name: obj},
				Path:    "spec." + obj,
				Message: fmt.Sprintf("name %q is not valid; %s", obj, obj),
				Units:   []string{obj},
			})
			sum.Units = append(sum.Units, obj)
			sum.Built = append(sum.Built, BuiltUnit{Name: obj, Source: "kustomization", Documents: 1})
		}
		for _, format := range Formats() {
			// The grouped layout shows a source line too, as hostile as
			// the names: it goes through the same guard.
			excerpt := func(d Diagnostic) (string, bool) { return "  ##[error]" + d.Object.Name, true }
			grouped := Options{Grouped: true, Color: true, Verbose: true, Excerpt: excerpt, Reference: func(c string) string { return "keyhole help " + c }}
			for _, o := range []Options{{}, {Verbose: true, MinSeverity: Info}, grouped} {
				p, err := NewPrinterWith(format, o)
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				if err := p.Print(&b, ds, sum, nil); err != nil {
					t.Fatal(err)
				}
				out := b.String()
				commands := 0
				for _, l := range logLines(out) {
					if !runnerCommand(l) {
						continue
					}
					if format == "github" && annotation.MatchString(l) {
						commands++
						continue
					}
					t.Fatalf("%s: %q prints a workflow command:\n%q", format, names, l)
				}
				if format != "github" && commands > 0 {
					t.Fatalf("%s: %d commands", format, commands)
				}
				for k, m := range marks {
					if !strings.Contains(out, m) {
						t.Fatalf("%s: the name %q is not in the output:\n%s", format, names[k], out)
					}
				}
				if format == "json" || format == "sarif" || format == "gitlab" {
					var v any
					if err := json.Unmarshal(b.Bytes(), &v); err != nil {
						t.Fatalf("%s: not JSON any more: %v\n%s", format, err, out)
					}
				}
				if format == "json" {
					var rep jsonReport
					json.Unmarshal(b.Bytes(), &rep)
					got := map[string]bool{}
					for _, d := range rep.Diagnostics {
						got[d.File] = true
					}
					for _, n := range names {
						if !got[n] {
							t.Fatalf("json: file %q is not decoded as it was named: %v", n, got)
						}
					}
				}
			}
		}
	}
}

// FuzzSafeLines: whatever the text, no line of SafeLines' output reads as
// a workflow command, a second pass changes nothing, and a JSON string
// made safe decodes to what it was.
func FuzzSafeLines(f *testing.F) {
	for _, s := range []string{"::set-output name=a::b", " \t::x::y", ":\u00ad:x::y", "a ##[x]y", "##vso[x]", "#\u200b#[x]", "ok\r::e::x\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := SafeLines(s)
		for _, l := range logLines(out) {
			if runnerCommand(l) {
				t.Fatalf("SafeLines(%q) = %q: %q reads as a command", s, out, l)
			}
		}
		if again := SafeLines(out); again != out {
			t.Fatalf("SafeLines(%q) = %q, then %q", s, out, again)
		}
		b, err := json.Marshal(s)
		if err != nil {
			return
		}
		var back string
		if err := json.Unmarshal([]byte(SafeLines(string(b))), &back); err != nil {
			t.Fatalf("%s through SafeLines is not JSON: %v", b, err)
		}
		var want string
		json.Unmarshal(b, &want)
		if back != want {
			t.Fatalf("JSON %s decodes to %q through SafeLines, %q without", b, back, want)
		}
	})
}
