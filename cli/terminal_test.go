package cli

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"
)

// sgrSeq matches a terminal colour sequence.
var sgrSeq = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestColorAndLayoutAuto: --color auto and --layout auto decide by
// whether the output the diagnostics go to is a terminal, and colour
// follows NO_COLOR (set and not empty: none) and TERM=dumb; the flags'
// other values decide alone. What is not a terminal gets the plain bytes.
func TestColorAndLayoutAuto(t *testing.T) {
	const dir = "../examples/broken/secret-key-missing"
	check := func(tty bool, environ map[string]string, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
			terminal: func(w io.Writer) bool { return tty && w == io.Writer(&stdout) },
			env:      func(k string) string { return environ[k] }}
		if code := run(e, append(append([]string{"check"}, args...), dir)); code != exitFailed {
			t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	plain := check(false, nil, "--color", "never", "--layout", "lines")
	colored := func(s string) bool { return strings.Contains(s, "\x1b[1;31merror\x1b[0m") }
	grouped := func(s string) bool {
		return strings.Contains(sgrSeq.ReplaceAllString(s, ""), "       |                           ^\n")
	}
	cases := map[string]struct {
		tty          bool
		environ      map[string]string
		args         []string
		color, group bool
		plainBytes   bool
	}{
		"pipe":                      {plainBytes: true},
		"pipe, NO_COLOR":            {environ: map[string]string{"NO_COLOR": "1"}, plainBytes: true},
		"terminal":                  {tty: true, color: true, group: true},
		"terminal, NO_COLOR":        {tty: true, environ: map[string]string{"NO_COLOR": "1"}, group: true},
		"terminal, NO_COLOR empty":  {tty: true, environ: map[string]string{"NO_COLOR": ""}, color: true, group: true},
		"terminal, TERM=dumb":       {tty: true, environ: map[string]string{"TERM": "dumb"}, group: true},
		"terminal, --color never":   {tty: true, args: []string{"--color", "never"}, group: true},
		"terminal, --layout lines":  {tty: true, args: []string{"--layout", "lines"}, color: true},
		"both never on a terminal":  {tty: true, args: []string{"--color=never", "--layout=lines"}, plainBytes: true},
		"pipe, --color always":      {args: []string{"--color", "always"}, color: true},
		"NO_COLOR, --color always":  {tty: true, environ: map[string]string{"NO_COLOR": "1"}, args: []string{"--color", "always"}, color: true, group: true},
		"pipe, --layout grouped":    {args: []string{"--layout", "grouped"}, group: true},
		"other formats ignore both": {tty: true, args: []string{"--format", "json"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := check(tc.tty, tc.environ, tc.args...)
			if colored(out) != tc.color || grouped(out) != tc.group {
				t.Errorf("colour %v, grouped %v; want %v, %v:\n%s", colored(out), grouped(out), tc.color, tc.group, out)
			}
			if tc.plainBytes && out != plain {
				t.Errorf("not the plain bytes:\n%s\nwant\n%s", out, plain)
			}
		})
	}
}

// TestRenderDiagnosticsTerminal: render's diagnostics go to stderr, so
// it is stderr that decides.
func TestRenderDiagnosticsTerminal(t *testing.T) {
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		terminal: func(w io.Writer) bool { return w == io.Writer(&stderr) },
		env:      func(string) string { return "" }}
	run(e, []string{"render", "--stdout", "../examples/broken/secret-key-missing"})
	if !strings.Contains(stderr.String(), "\x1b[1;31merror\x1b[0m") || !strings.Contains(sgrSeq.ReplaceAllString(stderr.String(), ""), "= see: keyhole help ConnectionSecretKeyMissing") {
		t.Errorf("render's diagnostics on a terminal are not coloured and grouped:\n%s", stderr.String())
	}
}
