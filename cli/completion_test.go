package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestCompletionCommands checks the flags completion reads from each
// command's -h: every command is there, with the flags it parses.
func TestCompletionCommands(t *testing.T) {
	want := map[string][]string{
		"check":   {"allow-missing-secrets", "allow-remote-bases", "format", "min-severity", "sarif-category"},
		"render":  {"format", "krm", "min-severity", "o", "proxy-mode", "stdout", "target"},
		"diff":    {"base", "format", "head", "target"},
		"explain": {"body", "request", "sandbox"},
		"suggest": {"format", "log", "write"},
		"schema":  {"crds", "cue", "json-schema"},
		"proxy":   {"config", "listen", "resolve", "upstream-ca", "version"},
	}
	got := map[string]compCommand{}
	for _, c := range completionCommands() {
		got[c.name] = c
	}
	for _, c := range commands() {
		if _, ok := got[c.name]; !ok {
			t.Errorf("command %s has no completion", c.name)
		}
	}
	for cmd, flags := range want {
		var names []string
		for _, f := range got[cmd].flags {
			names = append(names, f.name)
		}
		for _, f := range flags {
			if !slices.Contains(names, f) {
				t.Errorf("%s: flag %s missing from %v", cmd, f, names)
			}
		}
	}
	kinds := map[string]int{}
	for _, c := range []string{"render", "diff", "proxy"} {
		for _, f := range got[c].flags {
			kinds[c+" "+f.option()] = f.completes()
		}
	}
	for flag, want := range map[string]int{
		"render -o":               completeFiles,
		"render --format":         completeValues,
		"render --stdout":         completeNothing,
		"render --namespace":      completeNothing,
		"diff --base":             completeRefs,
		"proxy --config":          completeFiles,
		"proxy --upstream-ca":     completeFiles,
		"proxy --max-tunnels":     completeNothing,
		"render --proxy-mode":     completeValues,
		"render --proxy-image":    completeNothing,
		"render --sarif-category": completeNothing,
	} {
		if got, ok := kinds[flag]; !ok || got != want {
			t.Errorf("%s completes as %d (known: %v), want %d", flag, got, ok, want)
		}
	}
}

func TestCompletionUsage(t *testing.T) {
	tests := map[string]struct {
		args []string
		code int
		out  string
	}{
		"bash":          {args: []string{"bash"}, out: "complete -o filenames -F _keyhole keyhole"},
		"zsh":           {args: []string{"zsh"}, out: "#compdef keyhole"},
		"fish":          {args: []string{"fish"}, out: "complete -c keyhole"},
		"no shell":      {code: exitUsage},
		"unknown shell": {args: []string{"tcsh"}, code: exitUsage},
		"two shells":    {args: []string{"bash", "zsh"}, code: exitUsage},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(&env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}, append([]string{"completion"}, tc.args...))
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.out) {
				t.Errorf("stdout lacks %q", tc.out)
			}
			for _, c := range commands() {
				if tc.code == exitOK && !strings.Contains(stdout.String(), c.name) {
					t.Errorf("script does not name command %s", c.name)
				}
			}
		})
	}
}

// TestHelpShowsExamples checks every command's -h shows an example.
func TestHelpShowsExamples(t *testing.T) {
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := c.run(&env{stdin: strings.NewReader(""), stdout: &stderr, stderr: &stderr}, []string{"-h"}); code != exitOK {
				t.Fatalf("-h exits %d", code)
			}
			if !strings.Contains(stderr.String(), "\nexamples:\n  keyhole") {
				t.Errorf("-h shows no example:\n%s", stderr.String())
			}
		})
	}
}
