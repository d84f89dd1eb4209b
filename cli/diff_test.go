package cli

import (
	"bytes"
	"fmt"
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

	"keyhole.dev/keyhole/internal/golden"
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
	return dirFiles(t, filepath.Join("../examples", name))
}

// dirFiles reads every file under dir, by slash-separated relative name.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	root := os.DirFS(dir)
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
	return replaced(t, conn, "      - hosts: [github.com]\n", "      - hosts: [uploads.github.com]\n        header: Authorization\n        value: \"Bearer {{ .token }}\"\n        rules: [{methods: [POST], pathPrefixes: [/repos/acme/widgets/releases]}]\n      - hosts: [github.com]\n")
}

func runIn(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(&env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}, args)
	return code, stdout.String(), stderr.String()
}

// TestDiffExitCodes pins diff's exit codes: 0 no change, 1 changed, 2
// when no diff can be computed, 3 when the change trips --fail-on; and
// explain --base's: 0 whatever the verdict, 2 on a mistake.
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
		"gate, widened":             {args: []string{"diff", "--base", "main", "--head", "changed", "--fail-on", "widened"}, want: exitGate},
		"gate, narrowed":            {args: []string{"diff", "--base", "changed", "--head", "main", "--fail-on", "narrowed"}, want: exitGate},
		"gate not tripped":          {args: []string{"diff", "--base", "main", "--head", "changed", "--fail-on", "narrowed"}, want: exitFailed},
		"gate, several":             {args: []string{"diff", "--base", "changed", "--head", "main", "--fail-on", "widened,narrowed", "--format", "json"}, want: exitGate},
		"gate, any":                 {args: []string{"diff", "--base", "main", "--head", "changed", "--fail-on", "any"}, want: exitGate},
		"gate, no change":           {args: []string{"diff", "--base", "main", "--head", "moved", "--fail-on", "any"}, want: exitOK},
		"gate, unknown":             {args: []string{"diff", "--base", "main", "--fail-on", "wider"}, want: exitUsage},
		"gate, omnia target":        {args: []string{"diff", "--base", "main", "--head", "changed", "--fail-on", "widened", "--target", "omnia"}, want: exitUsage},
		"gate, agent-sandbox":       {args: []string{"diff", "--base", "main", "--head", "changed", "--fail-on", "widened", "--target", "agent-sandbox"}, want: exitGate},
		"explain --base":            {args: []string{"explain", "--base", "main", "--head", "changed", "--sandbox", "support-workspace"}, want: exitOK},
		"explain --base, list":      {args: []string{"explain", "--base", "main", "--head", "changed"}, want: exitOK},
		"explain --head alone":      {args: []string{"explain", "--head", "changed"}, want: exitUsage},
		"explain --base, no such":   {args: []string{"explain", "--base", "main", "--sandbox", "nobody"}, want: exitUsage},
		"explain --base, broken":    {args: []string{"explain", "--base", "main", "--head", "broken", "--sandbox", "support-workspace"}, want: exitUsage},
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
	// explain --base says what diff says, for one sandbox.
	for name, args := range map[string][]string{
		"explain":         {"explain", "--base", "main", "--head", "changed", "--sandbox", "support-workspace"},
		"explain request": {"explain", "--base", "main", "--head", "changed", "--sandbox", "support-workspace", "--request", "GET https://uploads.github.com/"},
		"explain list":    {"explain", "--base", "main", "--head", "changed"},
		"explain broken":  {"explain", "--base", "changed", "--head", "broken", "--sandbox", "support-workspace"},
	} {
		t.Run(name, func(t *testing.T) {
			_, stdout, stderr := runIn(t, args...)
			if stdout+stderr == "" {
				t.Fatalf("keyhole %s printed nothing", strings.Join(args, " "))
			}
			assertNoCanary(t, "stdout", []byte(stdout))
			assertNoCanary(t, "stderr", []byte(stderr))
		})
	}
}

// fleet is github-acme with three more AgentRuntimes bound to its
// Connection, and one bound to a read-only Connection of its own: five
// sandboxes, four of which share every change to github-acme.
func fleet(t *testing.T) map[string]string {
	files := example(t, "github-acme")
	for _, rt := range []string{"triage", "release", "docs"} {
		files["agentruntime-"+rt+".yaml"] = replaced(t, files["agentruntime.yaml"], "name: support", "name: "+rt)
	}
	files["audit.yaml"] = `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: github-audit
  namespace: agents
spec:
  hosts: [api.github.com]
  credential:
    kind: secret
    secretRef:
      name: acme-github-token
  placement:
    inject:
      - hosts: [api.github.com]
        header: Authorization
        value: "Bearer {{ .token }}"
        rules:
          - methods: [GET, HEAD]
            pathPrefixes: [/orgs/acme/audit-log]
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: AgentRuntime
metadata:
  name: audit
  namespace: agents
spec:
  promptPackRef: {name: audit}
  facades: [{type: websocket, port: 8080}]
  sandbox:
    enabled: true
    connections:
      - {sandbox: workspace, role: vcs, connection: github-audit}
`
	return files
}

// fleetChange is the change docs/diff.md shows on fleet: github-acme's
// POST rule widened from the pulls of one repository to every path under
// the organisation's repositories, and the audit Connection's HEAD dropped.
func fleetChange(t *testing.T, files map[string]string) map[string]string {
	return map[string]string{
		"connection.yaml": replaced(t, files["connection.yaml"], "pathPrefixes: [/repos/acme/widgets/pulls]", "pathPrefixes: [/repos/acme]"),
		"audit.yaml":      replaced(t, files["audit.yaml"], "methods: [GET, HEAD]", "methods: [GET]"),
	}
}

// TestDiffDoc keeps the example outputs in docs/diff.md equal to what
// keyhole prints for them; KEYHOLE_UPDATE=1 rewrites them. Each example
// sits between <!-- generated: NAME --> and <!-- end: NAME -->; the prose
// around them is the doc's own.
func TestDiffDoc(t *testing.T) {
	const path = "../docs/diff.md"
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	acme := example(t, "github-acme")
	ga := newGitFixture(t, acme)
	ga.write(map[string]string{"connection.yaml": acmeChange(t, acme["connection.yaml"])})
	fl := fleet(t)
	gf := newGitFixture(t, fl)
	gf.write(fleetChange(t, fl))
	type section struct {
		dir   string
		args  []string
		code  int
		fence string
		// cut, when set, ends the example before the line starting
		// with it: the doc shows the head of the report.
		cut string
		// shell shows the command, its stderr and its exit status
		// instead of its stdout.
		shell bool
	}
	gen := map[string]string{}
	for name, s := range map[string]section{
		"text":     {dir: ga.dir, args: []string{"diff", "--base", "main"}, code: exitFailed, fence: "text"},
		"markdown": {dir: gf.dir, args: []string{"diff", "--base", "main", "--format", "markdown"}, code: exitFailed, fence: "markdown", cut: "#### Resources"},
		"json":     {dir: ga.dir, args: []string{"diff", "--base", "main", "--format", "json"}, code: exitFailed, fence: "json"},
		"gate":     {dir: gf.dir, args: []string{"diff", "--base", "main", "--format", "markdown", "--fail-on", "widened"}, code: exitGate, fence: "text", shell: true},
		"explain":  {dir: ga.dir, args: []string{"explain", "--base", "main", "--sandbox", "support-workspace", "--request", "POST https://api.github.com/repos/acme/widgets/issues"}, fence: "text"},
	} {
		t.Chdir(s.dir)
		code, stdout, stderr := runIn(t, s.args...)
		if code != s.code || (stderr != "") != s.shell {
			t.Fatalf("keyhole %s: exit %d, stderr:\n%s", strings.Join(s.args, " "), code, stderr)
		}
		out := stdout
		if s.cut != "" {
			i := strings.Index(out, "\n"+s.cut)
			if i < 0 {
				t.Fatalf("keyhole %s: no line %q to cut at", strings.Join(s.args, " "), s.cut)
			}
			out = out[:i+1]
		}
		if s.shell {
			out = fmt.Sprintf("$ keyhole %s > diff.md\n%s$ echo $?\n%d\n", shellWords(s.args), stderr, code)
		} else {
			out = fmt.Sprintf("$ keyhole %s\n%s", shellWords(s.args), out)
			if s.fence == "json" || s.fence == "markdown" {
				out = strings.SplitN(out, "\n", 2)[1] // the command is in the prose
			}
		}
		gen[name] = "````" + s.fence + "\n" + out + "````\n"
	}
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
		got = re.ReplaceAllLiteralString(got, "<!-- generated: "+name+" -->\n"+out+"<!-- end: "+name+" -->")
	}
	golden.Check(t, abs, []byte(got))
}

// shellWords writes args as a shell would need them typed.
func shellWords(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if strings.ContainsAny(a, " '\"$") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
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

// TestDiffExclude: diff reads each side as check reads the inputs, so a
// path --exclude keeps out of check is kept out of both sides too; a
// broken file there fails neither, and a change there is no change.
func TestDiffExclude(t *testing.T) {
	files := example(t, "github-acme")
	files["vendor/broken.yaml"] = "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: broken, namespace: agents}\nspec: {hosts: [x.example.com], credential: {kind: secret, secretRef: {name: nowhere}}}\n"
	g := newGitFixture(t, files)
	g.write(map[string]string{"vendor/broken.yaml": strings.Replace(files["vendor/broken.yaml"], "x.example.com", "y.example.com", 1)})
	t.Chdir(g.dir)
	if code, _, stderr := runIn(t, "check", "--exclude", "vendor", "."); code != exitOK {
		t.Fatalf("check --exclude vendor: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := runIn(t, "diff", "--base", "main", "--exclude", "vendor", ".")
	if code != exitOK || !strings.Contains(stdout, "no changes") {
		t.Fatalf("diff --exclude vendor: exit %d, want 0 and no changes\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, _, _ := runIn(t, "diff", "--base", "main", "."); code != exitUsage {
		t.Fatalf("diff without --exclude: exit %d, want %d (the broken file is read)", code, exitUsage)
	}
}
