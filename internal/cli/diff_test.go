package cli

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// gitFixture is a repository made with go-git, with fixed dates so its
// commit hashes, and so every report naming them, are the same each run.
type gitFixture struct {
	t    *testing.T
	dir  string
	repo *git.Repository
}

func newGitFixture(t *testing.T, files map[string]string) *gitFixture {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
	g := &gitFixture{t: t, dir: dir, repo: r}
	g.write(files)
	g.commit("base")
	return g
}

// write writes files into the working tree; an empty body removes one.
func (g *gitFixture) write(files map[string]string) {
	g.t.Helper()
	for name, body := range files {
		p := filepath.Join(g.dir, filepath.FromSlash(name))
		if body == "" {
			if err := os.Remove(p); err != nil {
				g.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			g.t.Fatal(err)
		}
	}
}

func (g *gitFixture) commit(msg string) {
	g.t.Helper()
	wt, err := g.repo.Worktree()
	if err != nil {
		g.t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		g.t.Fatal(err)
	}
	sig := &object.Signature{Name: "keyhole", Email: "test@keyhole.dev", When: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig}); err != nil {
		g.t.Fatal(err)
	}
}

// branch commits files on a new branch made from main, and checks main
// out again.
func (g *gitFixture) branch(name string, files map[string]string) {
	g.t.Helper()
	wt, err := g.repo.Worktree()
	if err != nil {
		g.t.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name), Create: true}); err != nil {
		g.t.Fatal(err)
	}
	g.write(files)
	g.commit(name)
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("main")}); err != nil {
		g.t.Fatal(err)
	}
}

// example reads an example's files, by slash-separated path.
func example(t *testing.T, name string) map[string]string {
	t.Helper()
	root := os.DirFS(filepath.Join("../../examples", name))
	out := map[string]string{}
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func replaced(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q not found", old)
	}
	return strings.Replace(s, old, new, 1)
}

// acmeChange is the change docs/diff.md shows: one more POST path, and
// uploads.github.com injected too.
func acmeChange(t *testing.T, conn string) string {
	conn = replaced(t, conn, "pathPrefixes: [/repos/acme/widgets/pulls]", "pathPrefixes: [/repos/acme/widgets/pulls, /repos/acme/widgets/issues]")
	conn = replaced(t, conn, "hosts: [api.github.com, github.com]", "hosts: [api.github.com, uploads.github.com, github.com]")
	return replaced(t, conn, "      - hosts: [github.com]\n", "      - hosts: [uploads.github.com]\n        header: Authorization\n        value: \"Bearer {{ .token }}\"\n      - hosts: [github.com]\n")
}

func runIn(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(&env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}, args)
	return code, stdout.String(), stderr.String()
}

// TestDiffExitCodes pins diff's exit codes: 0 no change, 1 changed, 2
// when no diff can be computed.
func TestDiffExitCodes(t *testing.T) {
	files := example(t, "github-acme")
	g := newGitFixture(t, files)
	g.branch("changed", map[string]string{"connection.yaml": acmeChange(t, files["connection.yaml"])})
	g.branch("broken", map[string]string{"secret.yaml": replaced(t, files["secret.yaml"], "  token:", "  github-token:")})
	g.branch("moved", map[string]string{"connection.yaml": "", "more/github-acme.yaml": files["connection.yaml"]})
	team := map[string]string{}
	for name, body := range files {
		team["team/"+name] = strings.ReplaceAll(body, "namespace: agents", "namespace: team")
	}
	g.branch("team", team)
	notRepo := t.TempDir()
	t.Chdir(g.dir)
	for name, tc := range map[string]struct {
		args []string
		dir  string // instead of the repository
		want int
	}{
		"no change, working tree":   {args: []string{"diff", "--base", "main"}, want: exitOK},
		"no change, two refs":       {args: []string{"diff", "--base", "main", "--head", "HEAD"}, want: exitOK},
		"a moved file is no change": {args: []string{"diff", "--base", "main", "--head", "moved"}, want: exitOK},
		"changed":                   {args: []string{"diff", "--base", "main", "--head", "changed"}, want: exitFailed},
		"changed, reversed":         {args: []string{"diff", "--base", "changed", "--head", "main"}, want: exitFailed},
		"changed, json":             {args: []string{"diff", "--base", "main", "--head", "changed", "--format", "json"}, want: exitFailed},
		"changed, omnia target":     {args: []string{"diff", "--base", "main", "--head", "changed", "--target", "omnia"}, want: exitFailed},
		"changed, deployment mode":  {args: []string{"diff", "--base", "main", "--head", "changed", "--proxy-mode", "deployment"}, want: exitFailed},
		"head fails its check":      {args: []string{"diff", "--base", "main", "--head", "broken"}, want: exitUsage},
		"base fails its check":      {args: []string{"diff", "--base", "broken", "--head", "main"}, want: exitUsage},
		"unknown ref":               {args: []string{"diff", "--base", "nope"}, want: exitUsage},
		"not a repository":          {args: []string{"diff", "--base", "main"}, dir: notRepo, want: exitUsage},
		"no --base":                 {args: []string{"diff"}, want: exitUsage},
		"unknown format":            {args: []string{"diff", "--base", "main", "--format", "yaml"}, want: exitUsage},
		"unknown proxy mode":        {args: []string{"diff", "--base", "main", "--head", "changed", "--proxy-mode", "nope"}, want: exitUsage},
		"help":                      {args: []string{"diff", "-h"}, want: exitOK},
		"a path only on head":       {args: []string{"diff", "--base", "main", "--head", "team", "team"}, want: exitFailed},
		"a path only on base":       {args: []string{"diff", "--base", "team", "--head", "main", "team"}, want: exitFailed},
		"a path on neither side":    {args: []string{"diff", "--base", "main", "--head", "moved", "nowhere"}, want: exitUsage},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.dir != "" {
				t.Chdir(tc.dir)
			}
			code, stdout, stderr := runIn(t, tc.args...)
			if code != tc.want {
				t.Errorf("keyhole %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), code, tc.want, stdout, stderr)
			}
		})
	}
}

// TestDiffCanary plants a canary in every Secret on every ref, in the
// forms the checks read, and looks for it in every format's stdout and
// stderr: of a change, of a broken head, of a dirty working tree.
func TestDiffCanary(t *testing.T) {
	files := example(t, "github-acme")
	files["secret.yaml"] = strings.ReplaceAll(files["secret.yaml"], "replace-me-with-a-github-token", canary)
	files["secret.yaml"] = strings.ReplaceAll(files["secret.yaml"], "x-access-token", canary+"-user")
	g := newGitFixture(t, files)
	g.branch("changed", map[string]string{
		"connection.yaml": acmeChange(t, files["connection.yaml"]),
		"secret.yaml":     replaced(t, files["secret.yaml"], "  user:", "  extra: "+canary+"-extra\n  user:"),
	})
	g.branch("broken", map[string]string{
		// A multi-line value the template reads: ConnectionInjectionInvalid
		// reads the value itself.
		"secret.yaml": replaced(t, files["secret.yaml"], "  token: "+canary, "  token: \""+canary+"\\n"+canary+"\""),
	})
	g.write(map[string]string{"connection.yaml": acmeChange(t, files["connection.yaml"])})
	t.Chdir(g.dir)
	for _, format := range diffFormats() {
		for name, args := range map[string][]string{
			"changed":      {"--base", "main", "--head", "changed"},
			"broken head":  {"--base", "changed", "--head", "broken"},
			"working tree": {"--base", "broken"},
		} {
			t.Run(format+" "+name, func(t *testing.T) {
				code, stdout, stderr := runIn(t, append([]string{"diff", "--format", format}, args...)...)
				if code == exitOK {
					t.Fatalf("exit 0: the case compares nothing\n%s%s", stdout, stderr)
				}
				if name == "broken head" && !strings.Contains(stderr, "ConnectionInjectionInvalid") {
					t.Fatalf("the check that reads Secret values did not fire:\n%s", stderr)
				}
				assertNoCanary(t, "stdout", []byte(stdout))
				assertNoCanary(t, "stderr", []byte(stderr))
			})
		}
	}
}

// TestDiffDoc keeps the example outputs in docs/diff.md equal to what
// keyhole diff prints for them; KEYHOLE_UPDATE=1 rewrites them. Each
// example sits between <!-- generated: NAME --> and <!-- end: NAME -->;
// the prose around them is the doc's own.
func TestDiffDoc(t *testing.T) {
	const path = "../../docs/diff.md"
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	files := example(t, "github-acme")
	g := newGitFixture(t, files)
	g.write(map[string]string{"connection.yaml": acmeChange(t, files["connection.yaml"])})
	t.Chdir(g.dir)
	gen := map[string]string{}
	for name, format := range map[string]string{"text": "text", "markdown": "markdown", "json": "json"} {
		code, stdout, stderr := runIn(t, "diff", "--base", "main", "--format", format)
		if code != exitFailed || stderr != "" {
			t.Fatalf("diff --format %s: exit %d, stderr:\n%s", format, code, stderr)
		}
		gen[name] = stdout
	}
	fence := map[string]string{"text": "text", "markdown": "markdown", "json": "json"}
	doc, err := os.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	got := string(doc)
	for name, out := range gen {
		re := regexp.MustCompile(`(?s)(<!-- generated: ` + name + ` -->\n).*?(<!-- end: ` + name + ` -->)`)
		if !re.MatchString(got) {
			t.Fatalf("%s has no generated section %q", path, name)
		}
		f := strings.Repeat("`", 4)
		got = re.ReplaceAllLiteralString(got, "<!-- generated: "+name+" -->\n"+f+fence[name]+"\n"+out+f+"\n<!-- end: "+name+" -->")
	}
	if os.Getenv("KEYHOLE_UPDATE") == "1" {
		if err := os.WriteFile(abs, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != string(doc) {
		t.Errorf("%s is out of date: run KEYHOLE_UPDATE=1 go test ./internal/cli", path)
	}
}

// TestDiffOmniaTarget: with --target omnia only the rendered objects are
// compared. agent.yaml's allowed_domains changes the kubernetes target's
// proxy config, and nothing the omnia target renders.
func TestDiffOmniaTarget(t *testing.T) {
	files := example(t, "agent-sandbox")
	agent := files["agents/support/agent.yaml"]
	g := newGitFixture(t, files)
	g.write(map[string]string{"agents/support/agent.yaml": replaced(t, agent, "files.pythonhosted.org", "registry.npmjs.org")})
	t.Chdir(g.dir)
	code, stdout, stderr := runIn(t, "diff", "--base", "main")
	if code != exitFailed || !strings.Contains(stdout, "+ passthrough host registry.npmjs.org") {
		t.Errorf("kubernetes target: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runIn(t, "diff", "--base", "main", "--target", "omnia")
	if code != exitOK || !strings.HasPrefix(stdout, "keyhole diff: no changes") {
		t.Errorf("omnia target: exit %d\n%s%s", code, stdout, stderr)
	}
}
