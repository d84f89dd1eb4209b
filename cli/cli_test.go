package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestExitCodes pins the CLI contract's exit codes, which scripts can only
// see as zero or not.
func TestExitCodes(t *testing.T) {
	t.Chdir("..")
	tests := map[string]struct {
		args []string
		want int
	}{
		"clean example":           {args: []string{"check", "examples/github-acme"}, want: exitOK},
		"broken example":          {args: []string{"check", "examples/broken/secret-key-missing"}, want: exitFailed},
		"missing secret":          {args: []string{"check", "examples/broken/secret-missing"}, want: exitFailed},
		"missing secret allowed":  {args: []string{"check", "--allow-missing-secrets", "examples/broken/secret-missing"}, want: exitOK},
		"flags after paths":       {args: []string{"check", "examples/github-acme", "--format", "json"}, want: exitOK},
		"unknown format":          {args: []string{"check", "--format", "yaml", "examples/github-acme"}, want: exitUsage},
		"unknown flag":            {args: []string{"check", "--frob"}, want: exitUsage},
		"help flag":               {args: []string{"check", "-h"}, want: exitOK},
		"unreadable path":         {args: []string{"check", "does-not-exist"}, want: exitUsage},
		"unknown command":         {args: []string{"frobnicate"}, want: exitUsage},
		"no command":              {args: nil, want: exitUsage},
		"version":                 {args: []string{"version"}, want: exitOK},
		"double dash ends flags":  {args: []string{"check", "--", "examples/github-acme"}, want: exitOK},
		"flag-like path after --": {args: []string{"check", "--", "--format"}, want: exitUsage},
		"namespace not a label":   {args: []string{"check", "--namespace", "Bad_NS", "examples/github-acme"}, want: exitUsage},
		"render namespace":        {args: []string{"render", "--stdout", "--namespace", "Bad_NS", "examples/github-acme"}, want: exitUsage},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
			if got := run(e, tc.args); got != tc.want {
				t.Errorf("keyhole %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), got, tc.want, stdout.String(), stderr.String())
			}
		})
	}
}
