package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// exampleWords splits an example as a shell would, for the simple forms
// the examples use: words apart by spaces, 'single quotes', and the
// redirections > FILE and < FILE, which are left out.
func exampleWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("%q: unterminated quote", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	var out []string
	for i := 0; i < len(words); i++ {
		if words[i] == ">" || words[i] == "<" {
			i++
			continue
		}
		out = append(out, words[i])
	}
	return out
}

// TestHelpExamplesParse parses every example each command's -h shows
// against the flags that command's -h lists: each flag exists, takes a
// value when it needs one, and one of its values when they are a fixed
// set. An example names no path of keyhole's own repository (it would
// work only there): a path is a placeholder, and -h says what each one
// stands for.
func TestHelpExamplesParse(t *testing.T) {
	n := 0
	for _, c := range completionCommands() {
		if c.name == "proxy" {
			continue
		}
		var help bytes.Buffer
		run(&env{stdout: &help, stderr: &help}, []string{c.name, "-h"})
		for _, ex := range examples(c.name) {
			n++
			t.Run(ex, func(t *testing.T) {
				if strings.Contains(ex, "examples/") {
					t.Errorf("names a path only keyhole's repository holds; write a placeholder")
				}
				for _, p := range placeholders() {
					if strings.Contains(ex, p.name) && !strings.Contains(help.String(), "  "+p.name+" ") {
						t.Errorf("%s is not explained in -h:\n%s", p.name, help.String())
					}
				}
				words := exampleWords(t, fillPlaceholders(ex))
				if len(words) < 2 || words[0] != "keyhole" || words[1] != c.name {
					t.Fatalf("does not start with keyhole %s: %q", c.name, words)
				}
				args := words[2:]
				for i := 0; i < len(args); i++ {
					a := args[i]
					if !strings.HasPrefix(a, "-") || a == "-" {
						continue
					}
					name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
					k := slices.IndexFunc(c.flags, func(f compFlag) bool { return f.name == name })
					if k < 0 {
						t.Errorf("flag %s is not one of keyhole %s's", a, c.name)
						continue
					}
					f := c.flags[k]
					if f.value == "" {
						continue
					}
					if !hasValue {
						if i+1 >= len(args) {
							t.Errorf("flag %s has no value", a)
							continue
						}
						i++
						value = args[i]
					}
					if len(f.values) > 0 && !slices.Contains(f.values, value) {
						t.Errorf("flag %s: %q is not one of %v", a, value, f.values)
					}
				}
			})
		}
	}
	if n == 0 {
		t.Fatal("no examples")
	}
}

// TestHelpCommandAndCode: keyhole help <command> is the command's -h,
// keyhole help <CODE> the code's entry of docs/checks.md with its
// address there (SARIF's helpUri), and anything else a usage error that
// names the nearest.
func TestHelpCommandAndCode(t *testing.T) {
	call := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(&env{stdout: &out, stderr: &errOut}, args)
		return code, out.String(), errOut.String()
	}
	code, out, _ := call("help", "check")
	_, want, _ := call("check", "-h")
	if code != exitOK || out != want {
		t.Errorf("help check: exit %d\n%s\nwant check -h:\n%s", code, out, want)
	}
	rules := allRules()
	// A check's code, and a render target's.
	for _, c := range []string{"ConnectionSecretMissing", "CredentialLiteral", "OmniaRuleDropped"} {
		r, ok := rules[c]
		if !ok {
			t.Fatalf("no rule %s", c)
		}
		code, out, _ := call("help", c)
		if code != exitOK || !strings.HasPrefix(out, c+" ("+r.Severity.String()+")\n") ||
			!strings.Contains(out, helpURI(c)) || !strings.Contains(out, "docs/checks.md#"+strings.ToLower(c)) {
			t.Errorf("help %s: exit %d\n%s", c, code, out)
		}
		for _, w := range strings.Fields(r.Purpose + " " + r.Help) {
			if !strings.Contains(out, w) {
				t.Errorf("help %s leaves out %q of the table's text", c, w)
				break
			}
		}
	}
	for _, r := range rules {
		if code, _, errOut := call("help", r.Code); code != exitOK {
			t.Errorf("help %s: exit %d: %s", r.Code, code, errOut)
		}
	}
	code, out, errOut := call("help", "ConectionSecretMissing")
	if code != exitUsage || out != "" || !strings.Contains(errOut, `did you mean "ConnectionSecretMissing"?`) {
		t.Errorf("help of a misspelt code: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, _ := call("help", "-h"); code != exitOK || !strings.HasPrefix(out, "keyhole: ") {
		t.Errorf("help -h: exit %d\n%s", code, out)
	}
	if code, _, errOut := call("help", "a", "b"); code != exitUsage || errOut == "" {
		t.Errorf("help with two names: exit %d, stderr %q", code, errOut)
	}
}
