package cli

import (
	"bytes"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/bench/gen/synth"
	"keyhole.dev/keyhole/pipeline"
)

// diffBoth runs diff with args twice, its sides sharing what identical
// inputs give and each side on its own, fails the test unless the two
// print the same bytes and exit alike, and returns what the shared run
// reused and its outputs.
func diffBoth(t *testing.T, args ...string) (*pipeline.Reuse, int, string, string) {
	t.Helper()
	return bothWays(t, "diff", args...)
}

// bothWays runs the command (diff, or explain with --base) with args
// twice, reusing and afresh, as diffBoth says.
func bothWays(t *testing.T, cmd string, args ...string) (*pipeline.Reuse, int, string, string) {
	t.Helper()
	var out [2]struct {
		code           int
		stdout, stderr bytes.Buffer
	}
	r := pipeline.NewReuse()
	for i, afresh := range []bool{false, true} {
		e := &env{stdin: strings.NewReader(""), stdout: &out[i].stdout, stderr: &out[i].stderr, diffAfresh: afresh}
		if !afresh {
			e.diffReuse = r
		}
		out[i].code = run(e, append([]string{cmd}, args...))
	}
	reused, afresh := &out[0], &out[1]
	if reused.code != afresh.code {
		t.Errorf("%s %s: exit %d reusing, %d afresh", cmd, strings.Join(args, " "), reused.code, afresh.code)
	}
	if !bytes.Equal(reused.stdout.Bytes(), afresh.stdout.Bytes()) {
		t.Errorf("%s %s: stdout differs:\nreusing:\n%s\nafresh:\n%s", cmd, strings.Join(args, " "), reused.stdout.String(), afresh.stdout.String())
	}
	if !bytes.Equal(reused.stderr.Bytes(), afresh.stderr.Bytes()) {
		t.Errorf("%s %s: stderr differs:\nreusing:\n%s\nafresh:\n%s", cmd, strings.Join(args, " "), reused.stderr.String(), afresh.stderr.String())
	}
	return r, reused.code, reused.stdout.String(), reused.stderr.String()
}

// diffFormatsBoth is diffBoth in every format, returning the text run's:
// the formats print one Result, so a difference would show in any, but
// each prints its own parts of it.
func diffFormatsBoth(t *testing.T, args ...string) (*pipeline.Reuse, int, string, string) {
	t.Helper()
	var (
		r              *pipeline.Reuse
		code           int
		stdout, stderr string
	)
	for _, f := range diffFormats() {
		fr, fcode, fout, ferr := diffBoth(t, append([]string{"--format", f}, args...)...)
		if f == "text" {
			r, code, stdout, stderr = fr, fcode, fout, ferr
		}
	}
	return r, code, stdout, stderr
}

// TestDiffReuseExamples diffs each example against itself, against itself
// less its last file, and against a working tree whose first file gains a
// leading comment line (every position below it moves): reusing what
// identical inputs give, diff prints what it prints rendering each side on
// its own.
func TestDiffReuseExamples(t *testing.T) {
	entries, err := os.ReadDir("../examples")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if !ent.IsDir() {
			continue
		}
		t.Run(ent.Name(), func(t *testing.T) {
			files := example(t, ent.Name())
			var names []string
			for n := range files {
				names = append(names, n)
			}
			slices.Sort(names)
			g := newGitFixture(t, files)
			g.branch("deleted", map[string]string{names[len(names)-1]: ""})
			g.write(map[string]string{names[0]: "# moved down a line\n" + files[names[0]]})
			t.Chdir(g.dir)

			// Each sandbox renders once.
			r, _, _, _ := diffBoth(t, "--base", "main", "--head", "main")
			renders := run(&env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}, []string{"render", "--stdout"}) == exitOK
			if renders && r.Render().Hits() == 0 {
				t.Error("the same commit on both sides: no sandbox's render was reused")
			}
			diffFormatsBoth(t, "--base", "main", "--head", "deleted")
			diffBoth(t, "--base", "main")
		})
	}
}

// TestDiffReuseRepos diffs each fixture repository (Flux, Argo CD, Helm,
// a controller's kustomize tree) against itself, against itself less its
// last file, and against a working tree whose first file gains a leading
// comment line: sharing what identical inputs give, the two sides at
// once, diff prints what it prints doing each side on its own, and the
// same commit on both sides builds each kustomization once.
func TestDiffReuseRepos(t *testing.T) {
	entries, err := os.ReadDir("testdata/repos")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		t.Run(ent.Name(), func(t *testing.T) {
			files := dirFiles(t, filepath.Join("testdata/repos", ent.Name()))
			names := slices.Sorted(maps.Keys(files))
			g := newGitFixture(t, files)
			g.branch("deleted", map[string]string{names[len(names)-1]: ""})
			g.write(map[string]string{names[0]: "# moved down a line\n" + files[names[0]]})
			t.Chdir(g.dir)
			r, _, _, _ := diffBoth(t, "--base", "main", "--head", "main")
			if r.Source().BuildHits() == 0 {
				t.Error("the same commit on both sides: no kustomize build was reused")
			}
			diffBoth(t, "--base", "main", "--head", "deleted")
			diffBoth(t, "--base", "main")
		})
	}
}

// TestDiffReuseGenerated diffs a generated repository (bench/gen: loose
// files and kustomize overlays) against one change of each kind, committed
// or in the working tree: reusing what identical inputs give, diff prints
// what it prints rendering each side on its own, reuses something, and
// never prints a Secret's value.
func TestDiffReuseGenerated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gen")
	if _, err := synth.Generate(dir, synth.Options{Connections: 40, Agents: 4, Overlays: 1, PerFile: 10}); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	const (
		conns   = "namespaces/team-00/connections-0000.yaml"
		classes = "namespaces/team-01/classes.yaml"
		agent   = "agents/agent-0001/agent.yaml"
	)
	tests := map[string]struct {
		change   func(t *testing.T) map[string]string
		worktree bool
		// formats runs the diff in every format, not only text.
		formats bool
		// rendered is whether some sandbox renders as it did: false
		// when the change reaches every sandbox.
		rendered bool
	}{
		"connection": {
			change: func(t *testing.T) map[string]string {
				return map[string]string{conns: replaced(t, files[conns], "header: Authorization", "header: X-Api-Key")}
			},
			formats:  true,
			rendered: true,
		},
		"secret key": {
			change: func(t *testing.T) map[string]string {
				return map[string]string{conns: replaced(t, files[conns], "  token: placeholder-value-00000", "  token: placeholder-value-00000\n  extra: "+canary)}
			},
			rendered: true,
		},
		"secret key renamed": {
			change: func(t *testing.T) map[string]string {
				return map[string]string{conns: replaced(t, files[conns], "  token: placeholder-value-00001", "  tok: "+canary)}
			},
			rendered: true,
		},
		"sandbox class": {
			change: func(t *testing.T) map[string]string {
				return map[string]string{classes: replaced(t, files[classes], "image: registry.example.com/sandbox/workspace:1.0.0", "image: registry.example.com/sandbox/workspace:1.0.1")}
			},
			rendered: true,
		},
		"agent": {
			change: func(t *testing.T) map[string]string {
				return map[string]string{agent: files[agent] + "allowed_domains: [proxy.golang.org]\n"}
			},
			rendered: true,
		},
		"keyhole.yaml": {
			change: func(t *testing.T) map[string]string {
				return map[string]string{"keyhole.yaml": replaced(t, files["keyhole.yaml"], "sandboxImage: ghcr.io/acme/agent-sandbox:1", "sandboxImage: ghcr.io/acme/agent-sandbox:2")}
			},
			rendered: true,
		},
		"operator version": {
			// Every AgentRuntime is checked against the operator the
			// head's keyhole.yaml names, though none of their files
			// changed.
			change: func(t *testing.T) map[string]string {
				return map[string]string{"keyhole.yaml": files["keyhole.yaml"] + "operator:\n  version: v0.9.0-beta.17\n"}
			},
		},
		"kustomize overlay": {
			change: func(t *testing.T) map[string]string {
				return map[string]string{"overlays/env-0/kustomization.yaml": replaced(t, files["overlays/env-0/kustomization.yaml"], "namespace: env-0", "namespace: env-9")}
			},
			rendered: true,
		},
		"kustomize base": {
			change: func(t *testing.T) map[string]string {
				return map[string]string{"overlays/base/objects.yaml": replaced(t, files["overlays/base/objects.yaml"], "header: Authorization", "header: X-Api-Key")}
			},
			rendered: true,
		},
		"deleted file": {
			change: func(*testing.T) map[string]string {
				return map[string]string{"namespaces/team-02/runtimes-0002.yaml": ""}
			},
			rendered: true,
		},
		"renamed file": {
			change: func(*testing.T) map[string]string {
				return map[string]string{classes: "", "namespaces/team-01/classes-renamed.yaml": files[classes]}
			},
			rendered: true,
		},
		"lines moved": {
			change: func(*testing.T) map[string]string {
				return map[string]string{classes: "# a comment moves every line down\n" + files[classes]}
			},
			rendered: true,
		},
		"connection in the working tree": {
			change: func(t *testing.T) map[string]string {
				return map[string]string{conns: replaced(t, files[conns], "header: Authorization", "header: X-Api-Key")}
			},
			worktree: true,
			rendered: true,
		},
		"secret in the working tree": {
			change: func(t *testing.T) map[string]string {
				return map[string]string{conns: replaced(t, files[conns], "  token: placeholder-value-00001", "  token: "+canary)}
			},
			worktree: true,
			rendered: true,
		},
		"renamed in the working tree": {
			change: func(*testing.T) map[string]string {
				return map[string]string{classes: "", "namespaces/team-01/classes-renamed.yaml": files[classes]}
			},
			worktree: true,
			rendered: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newGitFixture(t, files)
			args := []string{"--base", "main"}
			if tc.worktree {
				g.write(tc.change(t))
			} else {
				g.branch("head", tc.change(t))
				args = append(args, "--head", "head")
			}
			t.Chdir(g.dir)
			diff := diffBoth
			if tc.formats {
				diff = diffFormatsBoth
			}
			r, code, stdout, stderr := diff(t, args...)
			if code == exitUsage && !strings.Contains(stderr, "the check found errors") {
				t.Errorf("exit %d, and no side's check failed:\n%s%s", code, stdout, stderr)
			}
			if r.Source().Hits() == 0 {
				t.Error("no file's parse (and what the Digest took of it) was reused")
			}
			if tc.rendered && code == exitFailed && r.Render().Hits() == 0 {
				t.Error("no sandbox's render was reused")
			}
			if strings.Contains(stdout+stderr, canary) {
				t.Errorf("a Secret's value is in the output:\n%s%s", stdout, stderr)
			}
			// explain --base compares the same two sides, reusing as
			// diff does: every sandbox's verdict, and one sandbox's
			// request decided on both sides.
			r, code, stdout, stderr = bothWays(t, "explain", args...)
			if code != exitOK && !strings.Contains(stderr, "the check found errors") {
				t.Errorf("explain --base: exit %d, and no side's check failed:\n%s%s", code, stdout, stderr)
			}
			if code == exitOK && r.Source().Hits() == 0 {
				t.Error("explain --base: no file's parse was reused")
			}
			if sandbox, _, _ := strings.Cut(stdout, "\t"); code == exitOK {
				_, code, stdout, stderr = bothWays(t, "explain", append(slices.Clone(args), "--sandbox", sandbox, "--request", "GET https://api-00000.example.com/repos/acme")...)
				if code != exitOK || !strings.Contains(stdout, sandbox) {
					t.Errorf("explain --base --sandbox %s: exit %d\n%s%s", sandbox, code, stdout, stderr)
				}
			}
			if strings.Contains(stdout+stderr, canary) {
				t.Errorf("explain --base: a Secret's value is in the output:\n%s%s", stdout, stderr)
			}
		})
	}
}
