package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/render"
)

// examples are the command lines each command's -h shows. They work in
// any repository, with the placeholders (see placeholders) filled in;
// those that need a git history or a file say so with their placeholder.
// TestHelpExamplesParse parses every one of them, and TestHelpExamples
// runs them (but the proxy's, which runs until stopped) in a git
// repository holding keyhole's examples/, with each placeholder's value
// there, so they cannot go stale.
func examples(command string) []string {
	return map[string][]string{
		"init": {
			"keyhole init --connector github --connector anthropic --engine flux <new-dir>",
		},
		"check": {
			"keyhole check",
			"keyhole check --format json <path>",
			"keyhole check --format sarif --min-severity info . > keyhole.sarif",
			"keyhole check --format gitlab . > gl-code-quality-report.json",
		},
		"render": {
			"keyhole render <path> -o rendered/",
			"keyhole render --stdout --proxy-mode deployment <path> > all.yaml",
			"keyhole render --target omnia <path> -o omnia/",
		},
		"diff": {
			"keyhole diff --base main <path>",
			"keyhole diff --base origin/main --format markdown <path> > diff.md",
		},
		"explain": {
			"keyhole explain <path>",
			"keyhole explain <path> --sandbox <sandbox>",
			"keyhole explain <path> --sandbox <sandbox> --request 'GET https://api.github.com/user'",
		},
		"suggest": {
			"keyhole suggest --log <proxy-log> <path>",
			"keyhole suggest --log - --format json <path> < <proxy-log>",
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

// placeholder is one <name> the examples hold: what to write in its
// place, and its value in keyhole's own repository, where the examples
// run as they are written with it.
type placeholder struct {
	name, meaning, inKeyhole string
}

// placeholders are the examples' placeholders, in the order -h explains
// them.
func placeholders() []placeholder {
	return []placeholder{
		{"<new-dir>", "a directory to write the files in, new or holding none of them (default: .)", "../agents-config"},
		{"<path>", "a file or directory of your repository, or several (default: .)", "examples/github-acme"},
		{"<sandbox>", "a sandbox's name, as 'keyhole explain <path>' lists them", "support-workspace"},
		{"<proxy-log>", "a file of the egress proxy's log lines (kubectl logs of it)", "examples/github-acme/egress.log"},
	}
}

// fillPlaceholders writes an example with each placeholder's value in
// keyhole's own repository.
func fillPlaceholders(example string) string {
	for _, p := range placeholders() {
		example = strings.ReplaceAll(example, p.name, p.inKeyhole)
	}
	return example
}

// printExamples writes a command's examples for its -h, and what the
// placeholders they hold stand for.
func printExamples(w io.Writer, command string) {
	ex := examples(command)
	if len(ex) == 0 {
		return
	}
	fmt.Fprintln(w, "\nexamples:")
	for _, x := range ex {
		fmt.Fprintf(w, "  %s\n", x)
	}
	var used []placeholder
	for _, p := range placeholders() {
		if slices.ContainsFunc(ex, func(x string) bool { return strings.Contains(x, p.name) }) {
			used = append(used, p)
		}
	}
	if len(used) == 0 {
		return
	}
	fmt.Fprintln(w, "\nwhere:")
	for _, p := range used {
		fmt.Fprintf(w, "  %-11s %s\n  %-11s (in keyhole's own repository: %s)\n", p.name, p.meaning, "", p.inKeyhole)
	}
	if command == "diff" {
		fmt.Fprintln(w, "  main and origin/main are branches of the git repository that holds <path>: name yours")
	}
}

// runHelp is `keyhole help <command>`, the command's -h, and `keyhole
// help <CODE>`, what a diagnostic's code catches and how to fix it, from
// the table docs/checks.md is generated from, with the address of its
// entry there (SARIF's helpUri). Anything else is a usage error that
// names the nearest command or code.
func runHelp(e *env, args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(e.stderr, "keyhole help: name one command or one diagnostic code; run 'keyhole help' for the commands")
		return exitUsage
	}
	name := args[0]
	var names []string
	for _, c := range commands() {
		if c.name == name {
			return c.run(e, []string{"-h"})
		}
		names = append(names, c.name)
	}
	rules := allRules()
	if r, ok := rules[name]; ok {
		printRule(e.stdout, r)
		return exitOK
	}
	for code := range rules {
		names = append(names, code)
	}
	slices.Sort(names)
	msg := fmt.Sprintf("no command or diagnostic code %q", diag.EscapeControl(name))
	if near := diag.Suggest(name, names); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	fmt.Fprintf(e.stderr, "keyhole help: %s; run 'keyhole help' for the commands, docs/checks.md lists the codes\n", msg)
	return exitUsage
}

// allRules are every code keyhole reports: the check table's and the
// render targets', as docs/checks.md lists them.
func allRules() map[string]diag.Rule {
	rules := compiler.Rules()
	for _, r := range slices.Concat(render.OmniaRules(), render.AgentSandboxRules()) {
		rules[r.Code] = r
	}
	return rules
}

// printRule writes one code's entry of docs/checks.md as text.
func printRule(w io.Writer, r diag.Rule) {
	fmt.Fprintf(w, "%s (%s)\n\n", r.Code, r.Severity)
	fmt.Fprintf(w, "What it catches:\n%s\n\n", wrap(r.Purpose, "  ", 78))
	fmt.Fprintf(w, "How to fix it:\n%s\n\n", wrap(r.Help, "  ", 78))
	fmt.Fprintf(w, "Silence it on one object with the annotation keyhole.dev/ignore: %s,\nor with an ignore entry of keyhole.yaml.\n\n", r.Code)
	fmt.Fprintf(w, "%s\n", helpURI(r.Code))
}

// wrap breaks s into lines of at most width columns (a longer word
// stands alone), each starting with indent.
func wrap(s, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(s) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	return b.String()
}
