//go:build e2e

package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompletionShells loads each completion script into its real shell
// and asks it to complete, as a user pressing TAB would.
func TestCompletionShells(t *testing.T) {
	needTools(t, completionShells()...)
	dir := t.TempDir()
	for _, sh := range completionShells() {
		var out bytes.Buffer
		if code := run(&env{stdin: strings.NewReader(""), stdout: &out, stderr: &out}, []string{"completion", sh}); code != exitOK {
			t.Fatalf("completion %s: exit %d: %s", sh, code, out.String())
		}
		if err := os.WriteFile(filepath.Join(dir, "keyhole."+sh), out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A file and a git branch for the completions that list them.
	if err := os.WriteFile(filepath.Join(dir, "connection.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	shell(t, dir, "git", "init", "-q", "-b", "trunk")
	shell(t, dir, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "x")

	bash := map[string]struct {
		line string // the words typed; the last is completed
		want []string
		not  []string
	}{
		"commands":         {line: "keyhole ch", want: []string{"check"}, not: []string{"render"}},
		"all commands":     {line: "keyhole ", want: []string{"check", "render", "diff", "explain", "schema", "proxy", "version", "completion"}},
		"flags of check":   {line: "keyhole check --m", want: []string{"--min-severity"}, not: []string{"--format"}},
		"format values":    {line: "keyhole check --format s", want: []string{"sarif"}},
		"diff formats":     {line: "keyhole diff --format ", want: []string{"markdown", "github"}, not: []string{"sarif"}},
		"short -o":         {line: "keyhole render -", want: []string{"-o", "--stdout"}},
		"paths":            {line: "keyhole check conn", want: []string{"connection.yaml"}},
		"git refs":         {line: "keyhole diff --base tr", want: []string{"trunk"}},
		"completion shell": {line: "keyhole completion f", want: []string{"fish"}},
		"proxy flags":      {line: "keyhole proxy --con", want: []string{"--config"}},
	}
	for name, tc := range bash {
		t.Run("bash/"+name, func(t *testing.T) {
			script := `source keyhole.bash
read -ra COMP_WORDS <<< "$LINE"
case $LINE in *" ") COMP_WORDS+=("") ;; esac
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_keyhole
printf '%s\n' "${COMPREPLY[@]}"`
			got := shell(t, dir, "env", "LINE="+tc.line, "bash", "--norc", "-c", script)
			check(t, got, tc.want, tc.not)
		})
	}

	fish := map[string]struct {
		line      string
		want, not []string
	}{
		"commands":       {line: "keyhole ch", want: []string{"check\tload, validate and print diagnostics"}},
		"flags of check": {line: "keyhole check --m", want: []string{"--min-severity\t"}},
		"format values":  {line: "keyhole check --format ", want: []string{"sarif", "github"}},
		"short -o":       {line: "keyhole render -", want: []string{"-o\t"}},
		"git refs":       {line: "keyhole diff --base ", want: []string{"trunk"}},
		"shells":         {line: "keyhole completion ", want: []string{"bash", "zsh", "fish"}},
	}
	for name, tc := range fish {
		t.Run("fish/"+name, func(t *testing.T) {
			got := shell(t, dir, "fish", "--no-config", "-c", "source keyhole.fish; complete -C '"+tc.line+"'")
			check(t, got, tc.want, tc.not)
		})
	}

	// zsh's completion system cannot run outside an interactive line
	// editor; load the script into it as a user's .zshrc would and check
	// it parses and registers for keyhole.
	t.Run("zsh/loads", func(t *testing.T) {
		got := shell(t, dir, "zsh", "-f", "-c", `autoload -Uz compinit && compinit -u -D && source keyhole.zsh && print -r -- "$_comps[keyhole]"`)
		if strings.TrimSpace(got) != "_keyhole" {
			t.Errorf("zsh registered %q for keyhole, want _keyhole", got)
		}
		shell(t, dir, "zsh", "-n", "keyhole.zsh")
	})
}

func shell(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func check(t *testing.T, got string, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("completions lack %q:\n%s", w, got)
		}
	}
	for _, n := range not {
		for _, l := range strings.Split(got, "\n") {
			if l == n {
				t.Errorf("completions hold %q:\n%s", n, got)
			}
		}
	}
}
