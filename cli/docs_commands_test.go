//go:build e2e

package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The convention for commands in README.md, docs/*.md and the examples'
// READMEs, which TestDocCommands enforces:
//
//   - every fenced block names its language;
//   - a ```sh block is commands, one a line (a trailing \ continues one,
//     # starts a comment), run in order by bash -e in a fresh copy of the
//     repository with keyhole and keyhole-proxy on PATH: each must exit 0;
//   - a ```console block is a terminal session: a line starting "$ " is a
//     command, the lines after it are its output (stdout and stderr), of
//     which a line "..." stands for any number of lines; the command may
//     fail, the output must match;
//   - a block right after a line <!-- not run: REASON --> is not run, and
//     says why; after <!-- setup: NAME --> it runs where docSetups()[NAME]
//     prepared, instead of the copy;
//   - commands are never in bash, shell or untyped blocks, so none can
//     hide from the test.
//
// A command that cannot run here (it needs a cluster, a Docker daemon,
// minutes of benchmark) is marked not run, with the reason.

// docBlock is one fenced block of a Markdown file.
type docBlock struct {
	file  string
	line  int // of the opening fence
	lang  string
	body  []string
	norun string // the reason, when marked not run
	setup string
}

var (
	fenceOpen = regexp.MustCompile("^(`{3,}|~{3,})(.*)$")
	notRun    = regexp.MustCompile(`^<!-- not run:(.*)-->$`)
	setupMark = regexp.MustCompile(`^<!-- setup: ([a-z0-9-]+) -->$`)
)

func docBlocks(t *testing.T, file string) []docBlock {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []docBlock
	var cur *docBlock
	var fence, prev string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		// A fence may be indented, inside a list item.
		line := sc.Text()
		if cur != nil {
			if l := strings.TrimLeft(line, " "); strings.HasPrefix(l, fence) && strings.TrimSpace(strings.TrimLeft(l, fence[:1])) == "" {
				blocks = append(blocks, *cur)
				cur = nil
			} else {
				cur.body = append(cur.body, line)
			}
			continue
		}
		if m := fenceOpen.FindStringSubmatch(strings.TrimLeft(line, " ")); m != nil {
			fence = m[1]
			cur = &docBlock{file: file, line: n}
			if words := strings.Fields(m[2]); len(words) > 0 {
				cur.lang = words[0]
			}
			if m := notRun.FindStringSubmatch(prev); m != nil {
				cur.norun = strings.TrimSpace(m[1])
				if cur.norun == "" {
					t.Errorf("%s:%d: <!-- not run: --> without a reason", file, n-1)
				}
			}
			if m := setupMark.FindStringSubmatch(prev); m != nil {
				cur.setup = m[1]
			}
		}
		prev = strings.TrimSpace(line)
	}
	if cur != nil {
		t.Errorf("%s:%d: the fence is never closed", file, cur.line)
	}
	return blocks
}

// TestDocCommands runs every command README.md, docs/*.md and the
// examples' READMEs show.
func TestDocCommands(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	// The examples' READMEs walk through them with commands too.
	readmes, err := filepath.Glob(filepath.Join(root, "examples", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, readmes...)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", bin+"/", "./cmd/keyhole", "./cmd/keyhole-proxy")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ran := 0
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		for _, b := range docBlocks(t, file) {
			name := fmt.Sprintf("%s:%d", rel, b.line)
			switch b.lang {
			case "":
				t.Errorf("%s: a fence without a language: say text, yaml, sh, console...", name)
				continue
			case "bash", "shell", "zsh", "shell-session":
				t.Errorf("%s: commands go in ```sh or ```console blocks (or text, if they are not commands)", name)
				continue
			case "sh", "console":
			default:
				continue
			}
			if b.norun != "" {
				continue
			}
			ran++
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				if b.setup != "" {
					setup, ok := docSetups()[b.setup]
					if !ok {
						t.Fatalf("no setup %q", b.setup)
					}
					dir = setup(t)
				} else if err := copyKeyholeTree(root, dir); err != nil {
					t.Fatal(err)
				}
				// GOBIN keeps a go install the docs show off this machine's.
				// -trimpath lets a go command in the copy reuse what the
				// build cache holds from other directories.
				env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "GOBIN="+t.TempDir(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -trimpath"))
				if b.lang == "sh" {
					runShBlock(t, dir, env, b.body)
				} else {
					runConsoleBlock(t, dir, env, b.body)
				}
			})
		}
	}
	if ran < 3 {
		t.Errorf("only %d blocks ran", ran)
	}
}

func runShBlock(t *testing.T, dir string, env, body []string) {
	t.Helper()
	script := "set -eo pipefail\n" + strings.Join(body, "\n") + "\n"
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%v\n--- commands ---\n%s--- output ---\n%s", err, script, out)
	}
}

func runConsoleBlock(t *testing.T, dir string, env, body []string) {
	t.Helper()
	type step struct {
		cmd  string
		want []string
	}
	var steps []step
	for _, l := range body {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			steps = append(steps, step{cmd: c})
			continue
		}
		if len(steps) == 0 {
			t.Fatalf("output %q before any $ command", l)
		}
		steps[len(steps)-1].want = append(steps[len(steps)-1].want, l)
	}
	status := 0
	for _, s := range steps {
		// One shell per command, with $? the previous command's status,
		// as in the session the block shows.
		cmd := exec.Command("bash", "--noprofile", "--norc", "-c", fmt.Sprintf("(exit %d); %s", status, s.cmd))
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		status = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if !matchLines(got, s.want) {
			t.Errorf("$ %s\n--- shown ---\n%s\n--- printed ---\n%s", s.cmd, strings.Join(s.want, "\n"), out)
		}
	}
}

// matchLines matches got against want, whose "..." lines stand for any
// number of lines.
func matchLines(got, want []string) bool {
	if len(want) == 0 {
		return len(got) == 0 || len(got) == 1 && got[0] == ""
	}
	if want[0] == "..." {
		for i := 0; i <= len(got); i++ {
			if matchLines(got[i:], want[1:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && strings.TrimRight(got[0], " ") == strings.TrimRight(want[0], " ") && matchLines(got[1:], want[1:])
}

// copyKeyholeTree copies the repository's files (not .git, caches or outputs)
// into dir.
func copyKeyholeTree(root, dir string) error {
	skip := []string{".git", ".cache", "bin", "rendered"}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel != "." && slices.Contains(skip, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		dst := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, info.Mode().Perm())
	})
}

// docSetups prepare a directory for a block that needs more than a copy
// of the repository.
func docSetups() map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		// docs/quickstart.md after its first block: the repository
		// keyhole init wrote, where every later block runs, as a
		// reader who typed them in one terminal would.
		"quickstart": func(t *testing.T) string {
			dir := filepath.Join(t.TempDir(), "agents-config")
			var out, errs strings.Builder
			if code := Main([]string{"init", "--connector", "github", "--connector", "anthropic", dir}, &out, &errs); code != 0 {
				t.Fatalf("keyhole init: exit %d\n%s", code, errs.String())
			}
			return dir
		},
		// The change docs/diff.md's examples show (TestDiffDoc): a
		// repository of examples/github-acme on main, and the working
		// tree adding a POST path and uploads.github.com.
		// The pull request examples/sigs-agent-sandbox's README shows:
		// main holds agent-sandbox's aider example as it was (the key in
		// the template), the working tree the example with keyhole.
		"sigs-agent-sandbox-pr": func(t *testing.T) string {
			after := example(t, "sigs-agent-sandbox")
			before := map[string]string{
				"sandboxtemplate.yaml": replaced(t, after["sandboxtemplate.yaml"], "          ports:\n",
					"          env:\n            - name: OPENAI_API_KEY\n              valueFrom:\n                secretKeyRef: {name: llm-secrets, key: openai-api-key}\n          ports:\n"),
				"warmpool.yaml": after["warmpool.yaml"],
				"secrets.yaml":  after["secrets.yaml"],
			}
			g := newGitFixture(t, before)
			delete(after, "README.md")
			g.write(after)
			return g.dir
		},
		"diff-acme": func(t *testing.T) string {
			files := example(t, "github-acme")
			g := newGitFixture(t, files)
			g.write(map[string]string{"connection.yaml": acmeChange(t, files["connection.yaml"])})
			return g.dir
		},
	}
}
