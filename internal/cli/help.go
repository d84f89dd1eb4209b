package cli

import (
	"fmt"
	"io"
)

// examples are the command lines each command's -h shows, run from the
// root of keyhole's repository, whose examples/ they name.
// TestHelpExamples runs every one of them (but the proxy's, which runs
// until stopped), so they cannot go stale.
func examples(command string) []string {
	return map[string][]string{
		"check": {
			"keyhole check examples/github-acme",
			"keyhole check --format json examples/broken/secret-key-missing",
			"keyhole check --format sarif --min-severity info examples/ > keyhole.sarif",
		},
		"render": {
			"keyhole render examples/github-acme -o rendered/",
			"keyhole render --stdout --proxy-mode deployment examples/github-acme > all.yaml",
			"keyhole render --target omnia examples/agent-sandbox -o omnia/",
		},
		"diff": {
			"keyhole diff --base main examples/github-acme",
			"keyhole diff --base origin/main --format markdown examples/github-acme > diff.md",
		},
		"explain": {
			"keyhole explain examples/github-acme",
			"keyhole explain examples/github-acme --sandbox support-workspace",
			"keyhole explain examples/github-acme --sandbox support-workspace --request 'GET https://api.github.com/user'",
		},
		"suggest": {
			"keyhole suggest --log examples/github-acme/egress.log examples/github-acme",
			"keyhole suggest --log - --format json examples/github-acme < examples/github-acme/egress.log",
		},
		"schema": {
			"keyhole schema --json-schema > keyhole.schema.json",
			"keyhole schema --crds",
		},
		"version": {
			"keyhole version",
		},
		"completion": {
			"keyhole completion bash > ~/.local/share/bash-completion/completions/keyhole",
			"keyhole completion zsh > ~/.zsh/completions/_keyhole",
			"keyhole completion fish > ~/.config/fish/completions/keyhole.fish",
		},
	}[command]
}

// printExamples writes a command's examples for its -h.
func printExamples(w io.Writer, command string) {
	ex := examples(command)
	if len(ex) == 0 {
		return
	}
	fmt.Fprintln(w, "\nexamples:")
	for _, x := range ex {
		fmt.Fprintf(w, "  %s\n", x)
	}
}
