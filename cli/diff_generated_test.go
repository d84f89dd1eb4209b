//go:build e2e

package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"keyhole.dev/keyhole/bench/gen/synth"
)

// TestDiffGeneratedRepository runs keyhole diff on a generated repository
// of 2,100 sandboxes (bench/gen: 400 Connections in 100 AgentRuntimes, and
// 3,000 agents) committed with the real git binary, after a pull request
// that edits every Connection file and every agent: each runtime's own
// rules widen and narrow, and every agent trades its allowed domains for
// another. The
// markdown report, a PR comment, must fit GitHub's limit and account for
// every sandbox; the gate must trip.
func TestDiffGeneratedRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is not on PATH (make test installs it): %v", err)
	}
	dir := filepath.Join(t.TempDir(), "repo")
	if _, err := synth.Generate(dir, synth.Options{Connections: 400, Agents: 3000}); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=keyhole", "GIT_AUTHOR_EMAIL=test@keyhole.dev",
			"GIT_COMMITTER_NAME=keyhole", "GIT_COMMITTER_EMAIL=test@keyhole.dev", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	edited, err := synth.Change(dir, func(agent string) string {
		agent += "allowed_domains: [proxy.golang.org]\n"
		return strings.Replace(agent, "allowed_domains: [pypi.org, files.pythonhosted.org]\n", "", 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	if edited < 3000 {
		t.Fatalf("the change edits %d files", edited)
	}
	git("commit", "-q", "-am", "every file")
	t.Chdir(dir)

	code, stdout, stderr := runIn(t, "diff", "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
	if code != exitFailed {
		t.Fatalf("diff --format json: exit %d\n%s", code, stderr)
	}
	var rep struct {
		Access    map[string]int    `json:"access"`
		Sandboxes []json.RawMessage `json:"sandboxes"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	// The runtimes change (their rules widen and narrow), and so do the
	// agents that trade their allowed domains; the others widen.
	if n := len(rep.Sandboxes); n < 2000 || rep.Access["changed"] < 1000 || rep.Access["widened"] < 1000 || rep.Access["widened"]+rep.Access["changed"] != n {
		t.Fatalf("%d sandboxes, access %v: the change is not the one described", n, rep.Access)
	}

	code, md, stderr := runIn(t, "diff", "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown", "--fail-on", "widened")
	if code != exitGate || !strings.HasPrefix(stderr, "keyhole diff: --fail-on widened: ") {
		t.Fatalf("diff --fail-on widened: exit %d, stderr %q", code, stderr)
	}
	if n := utf8.RuneCountInString(md); n > 65536 || len(md) > 60000 {
		t.Fatalf("the markdown report is %d characters, %d bytes", n, len(md))
	}
	// The verdict table counts every sandbox; the groups shown and the
	// sandboxes counted as left out add up to them.
	for verdict, n := range rep.Access {
		if n > 0 && !strings.Contains(md, "**"+verdict+"** | "+strconv.Itoa(n)+" |") {
			t.Errorf("the verdict table lacks %s = %d", verdict, n)
		}
	}
	shown := 0
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "- :warning: ") {
			continue
		}
		shown++
		if m := regexp.MustCompile(`\((\d+) sandboxes, the same change\)`).FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			shown += n - 1
		}
	}
	left := 0
	if m := regexp.MustCompile(`…and (\d+) more sandboxes`).FindStringSubmatch(md); m != nil {
		left, _ = strconv.Atoi(m[1])
	}
	if shown+left != len(rep.Sandboxes) {
		t.Errorf("the report shows %d sandboxes and leaves out %d, of %d", shown, left, len(rep.Sandboxes))
	}
	if !regexp.MustCompile(`\(1\d\d\d sandboxes, the same change\)`).MatchString(md) {
		t.Errorf("the agents' shared changes are not said once each")
	}
}
