package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/render"
)

// completionShells are the shells `keyhole completion` writes for.
func completionShells() []string { return []string{"bash", "zsh", "fish"} }

func runCompletion(e *env, args []string) int {
	fs := newFlags(e, "completion", "bash|zsh|fish")
	rest, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(rest) != 1 {
		fmt.Fprintf(e.stderr, "keyhole completion: name one shell: %s\n", strings.Join(completionShells(), ", "))
		return exitUsage
	}
	if !slices.Contains(completionShells(), rest[0]) {
		fmt.Fprintf(e.stderr, "keyhole completion: no completion script for shell %q: want one of %s\n", rest[0], strings.Join(completionShells(), ", "))
		return exitUsage
	}
	cmds := completionCommands()
	var script string
	switch rest[0] {
	case "bash":
		script = bashCompletion(cmds)
	case "zsh":
		script = zshCompletion(cmds)
	case "fish":
		script = fishCompletion(cmds)
	}
	if _, err := io.WriteString(e.raw(), script); err != nil {
		return fail(e, "completion", err)
	}
	return exitOK
}

// compCommand is a command as completion sees it.
type compCommand struct {
	name, summary string
	flags         []compFlag
	// args are the positional values it takes (nil: paths).
	args []string
}

// compFlag is one flag: its name, the name of its value ("" for a
// boolean), the values it takes when they are a fixed set, and its help.
type compFlag struct {
	name   string
	value  string
	values []string
	help   string
}

// What a flag's value completes to.
const (
	completeNothing = iota
	completeValues
	completeFiles
	completeRefs
)

// completes says what the flag's value completes to: its fixed values,
// files (a DIR, FILE or PATH, or a plain string, which the proxy's paths
// are), git refs (a REF), or nothing (a name, an image, a duration).
func (f compFlag) completes() int {
	switch {
	case len(f.values) > 0:
		return completeValues
	case f.value == "REF":
		return completeRefs
	case f.value == "DIR" || f.value == "FILE" || f.value == "PATH" || f.value == "string":
		return completeFiles
	}
	return completeNothing
}

// option is the flag as users type it: -o, --format.
func (f compFlag) option() string {
	if len(f.name) == 1 {
		return "-" + f.name
	}
	return "--" + f.name
}

// gitRefs lists a repository's branches and tags, for a shell to run.
const gitRefs = "git for-each-ref --format='%(refname:short)' 2>/dev/null"

// completionCommands reads every command's flags from its own -h, so the
// scripts hold exactly the flags the commands parse.
func completionCommands() []compCommand {
	var out []compCommand
	for _, c := range commands() {
		var help bytes.Buffer
		// keyhole's commands write -h to stdout; the proxy's, its own
		// package's, to stderr: either is the help.
		c.run(&env{stdin: strings.NewReader(""), stdout: &help, stderr: &help}, []string{"-h"})
		cc := compCommand{name: c.name, summary: c.summary, flags: parseFlagHelp(help.String())}
		for i, f := range cc.flags {
			cc.flags[i].values = flagValues(c.name, f.name)
		}
		if c.name == "completion" {
			cc.args = completionShells()
		}
		out = append(out, cc)
	}
	return out
}

// flagValues are the values a flag takes when they are a fixed set.
func flagValues(command, flag string) []string {
	switch flag {
	case "format":
		if command == "diff" {
			return diffFormats()
		}
		return diag.Formats()
	case "color":
		return colorModes()
	case "layout":
		return layouts()
	case "min-severity":
		return []string{"info", "warning", "error"}
	case "proxy-mode":
		return []string{render.ModeSidecar, "deployment"}
	case "target":
		return render.Targets()
	}
	return nil
}

// flagLine is a flag's first line in flag.PrintDefaults: "  -name" and,
// when it takes a value, " TYPE"; a short one has its help after a tab.
var flagLine = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9-]*)(?: ([^\t]+))?(?:\t(.*))?$`)

// parseFlagHelp reads the flags out of flag.PrintDefaults' output.
func parseFlagHelp(help string) []compFlag {
	var flags []compFlag
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		line := sc.Text()
		if m := flagLine.FindStringSubmatch(line); m != nil {
			flags = append(flags, compFlag{name: m[1], value: m[2], help: m[3]})
			continue
		}
		if h, ok := strings.CutPrefix(line, "    \t"); ok && len(flags) > 0 && flags[len(flags)-1].help == "" {
			flags[len(flags)-1].help = h
		}
	}
	slices.SortFunc(flags, func(a, b compFlag) int { return strings.Compare(a.name, b.name) })
	return flags
}

// shortHelp is a flag's help cut to its first clause, for a completion
// menu: up to the first ";" or " (" and at most 70 characters.
func shortHelp(h string) string {
	for _, sep := range []string{"; ", " ("} {
		if i := strings.Index(h, sep); i > 0 {
			h = h[:i]
		}
	}
	if len([]rune(h)) > 70 {
		h = string([]rune(h)[:67]) + "..."
	}
	return h
}

func bashCompletion(cmds []compCommand) string {
	var b strings.Builder
	b.WriteString("# bash completion for keyhole, written by `keyhole completion bash`.\n")
	b.WriteString("_keyhole() {\n")
	b.WriteString("  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n")
	names := make([]string, 0, len(cmds))
	for _, c := range cmds {
		names = append(names, c.name)
	}
	fmt.Fprintf(&b, "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n    COMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n    return\n  fi\n", strings.Join(names, " "))
	b.WriteString("  local flags='' args=''\n  case ${COMP_WORDS[1]} in\n")
	for _, c := range cmds {
		var fl []string
		for _, f := range c.flags {
			fl = append(fl, f.option())
		}
		fmt.Fprintf(&b, "    %s) flags='%s'; args='%s'\n", c.name, strings.Join(fl, " "), strings.Join(c.args, " "))
		b.WriteString("      case $prev in\n")
		for _, f := range c.flags {
			if f.value == "" {
				continue
			}
			reply := "COMPREPLY=()"
			switch f.completes() {
			case completeValues:
				reply = fmt.Sprintf("COMPREPLY=($(compgen -W '%s' -- \"$cur\"))", strings.Join(f.values, " "))
			case completeFiles:
				reply = "COMPREPLY=($(compgen -f -- \"$cur\"))"
			case completeRefs:
				reply = "COMPREPLY=($(compgen -W \"$(" + gitRefs + ")\" -- \"$cur\"))"
			}
			fmt.Fprintf(&b, "        --%s|-%s) %s; return ;;\n", f.name, f.name, reply)
		}
		b.WriteString("      esac ;;\n")
	}
	b.WriteString("  esac\n")
	b.WriteString("  if [[ $cur == -* ]]; then\n    COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n  elif [ -n \"$args\" ]; then\n    COMPREPLY=($(compgen -W \"$args\" -- \"$cur\"))\n  else\n    COMPREPLY=($(compgen -f -- \"$cur\"))\n  fi\n}\n")
	b.WriteString("complete -o filenames -F _keyhole keyhole\n")
	return b.String()
}

// zshQuote escapes a description for _arguments and _describe, where
// [ ] : and ' are syntax.
func zshQuote(s string) string {
	return strings.NewReplacer("'", "'\\''", "[", "(", "]", ")", ":", " -", "\\", "/").Replace(s)
}

func zshCompletion(cmds []compCommand) string {
	var b strings.Builder
	b.WriteString("#compdef keyhole\n# zsh completion for keyhole, written by `keyhole completion zsh`.\n")
	b.WriteString("_keyhole() {\n  local -a commands\n  commands=(\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "    '%s:%s'\n", c.name, zshQuote(c.summary))
	}
	b.WriteString("  )\n  if (( CURRENT == 2 )); then\n    _describe 'command' commands\n    return\n  fi\n")
	b.WriteString("  local cmd=$words[2]\n  shift words\n  (( CURRENT-- ))\n  case $cmd in\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "    %s)\n      _arguments -s", c.name)
		for _, f := range c.flags {
			spec := fmt.Sprintf("%s[%s]", f.option(), zshQuote(shortHelp(f.help)))
			if f.value != "" {
				action := " "
				switch f.completes() {
				case completeValues:
					action = "(" + strings.Join(f.values, " ") + ")"
				case completeFiles:
					action = "_files"
				case completeRefs:
					action = "{compadd - $(" + strings.ReplaceAll(gitRefs, "'", "'\\''") + ")}"
				}
				spec += fmt.Sprintf(":%s:%s", f.name, action)
			}
			fmt.Fprintf(&b, " \\\n        '%s'", spec)
		}
		if len(c.args) > 0 {
			fmt.Fprintf(&b, " \\\n        '1:%s:(%s)'", c.name, strings.Join(c.args, " "))
		} else if c.name != "version" {
			b.WriteString(" \\\n        '*:path:_files'")
		}
		b.WriteString("\n      ;;\n")
	}
	b.WriteString("  esac\n}\n")
	b.WriteString("if [ \"$funcstack[1]\" = _keyhole ]; then\n  _keyhole \"$@\"\nelse\n  compdef _keyhole keyhole\nfi\n")
	return b.String()
}

// fishQuote quotes a fish string.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func fishCompletion(cmds []compCommand) string {
	var b strings.Builder
	b.WriteString("# fish completion for keyhole, written by `keyhole completion fish`.\n")
	names := make([]string, 0, len(cmds))
	for _, c := range cmds {
		names = append(names, c.name)
	}
	fmt.Fprintf(&b, "complete -c keyhole -f -n 'not __fish_seen_subcommand_from %s'\n", strings.Join(names, " "))
	for _, c := range cmds {
		fmt.Fprintf(&b, "complete -c keyhole -n 'not __fish_seen_subcommand_from %s' -a %s -d %s\n", strings.Join(names, " "), c.name, fishQuote(c.summary))
	}
	for _, c := range cmds {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		if len(c.args) > 0 {
			fmt.Fprintf(&b, "complete -c keyhole -n %s -f -a %s\n", cond, fishQuote(strings.Join(c.args, " ")))
		} else if c.name != "version" {
			fmt.Fprintf(&b, "complete -c keyhole -n %s -F\n", cond)
		}
		for _, f := range c.flags {
			opt := "-l"
			if len(f.name) == 1 {
				opt = "-s"
			}
			line := fmt.Sprintf("complete -c keyhole -n %s %s %s", cond, opt, f.name)
			if f.value != "" {
				switch f.completes() {
				case completeValues:
					line += " -x -a " + fishQuote(strings.Join(f.values, " "))
				case completeFiles:
					line += " -r -F"
				case completeRefs:
					line += " -x -a " + fishQuote("("+strings.ReplaceAll(gitRefs, "'", "\"")+")")
				default:
					line += " -x"
				}
			}
			fmt.Fprintf(&b, "%s -d %s\n", line, fishQuote(shortHelp(f.help)))
		}
	}
	return b.String()
}
