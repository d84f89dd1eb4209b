package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/bench/gen/synth"
)

// BenchmarkDiffAtScale compares `keyhole diff --base HEAD~1 --head HEAD`
// with `keyhole render --stdout` at HEAD on a generated repository
// committed with the real git binary: KEYHOLE_BENCH_N Connections (default
// 10,000) and a tenth as many agents, and a second commit changing one
// Connection's injected header, the usual pull request. Each iteration
// runs one render, one diff, and one diff reusing nothing between its
// sides (afresh), in turn, so that they share the machine's load; it
// reports the medians of each, in wall and CPU seconds, and their ratios
// to render's. Run it with -benchtime=5x or more for medians worth
// reading; with -cpuprofile, each command's samples carry its name (see
// labelled): go tool pprof -tagfocus=cmd=diff.
func BenchmarkDiffAtScale(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Fatalf("git is not on PATH (make test installs it): %v", err)
	}
	n := 10000
	if s := os.Getenv("KEYHOLE_BENCH_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("KEYHOLE_BENCH_N=%q: want a count", s)
		}
		n = v
	}
	dir := filepath.Join(b.TempDir(), "repo")
	if _, err := synth.Generate(dir, synth.Options{Connections: n, Agents: n / 10}); err != nil {
		b.Fatal(err)
	}
	gitCommit(b, dir, "base")
	conn := filepath.Join(dir, "namespaces", "team-00", "connections-0000.yaml")
	data, err := os.ReadFile(conn)
	if err != nil {
		b.Fatal(err)
	}
	changed := strings.Replace(string(data), "header: Authorization", "header: X-Api-Key", 1)
	if changed == string(data) {
		b.Fatal("the generated Connection has no header to change")
	}
	if err := os.WriteFile(conn, []byte(changed), 0o644); err != nil {
		b.Fatal(err)
	}
	gitCommit(b, dir, "one Connection")
	b.Chdir(dir)

	// Each iteration times render, then diff, then diff with each side
	// rendered on its own (diffAfresh: how diff ran before it reused
	// anything), so all three see the same load.
	var wall, cpu [3][]float64
	for b.Loop() {
		for i, name := range []string{"render", "diff", "diff-afresh"} {
			var out, errs bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errs, diffAfresh: name == "diff-afresh"}
			args, want := []string{"diff", "--base", "HEAD~1", "--head", "HEAD"}, exitFailed
			if name == "render" {
				args, want = []string{"render", "--stdout"}, exitOK
			}
			start, startCPU := time.Now(), cpuTime(b)
			code := labelled(name, func() int { return run(e, args) })
			wall[i] = append(wall[i], time.Since(start).Seconds())
			cpu[i] = append(cpu[i], (cpuTime(b) - startCPU).Seconds())
			if code != want {
				b.Fatalf("%s: exit %d, want %d:\n%s", name, code, want, errs.String())
			}
			if name != "render" && !strings.Contains(out.String(), "2 resources changed, 0 added, 0 removed") {
				b.Fatalf("%s reports another change than the one Connection's:\n%s", name, out.String())
			}
		}
	}
	var mw, mc [3]float64
	for i := range wall {
		mw[i], mc[i] = median(wall[i]), median(cpu[i])
	}
	b.ReportMetric(mw[0], "render-s")
	b.ReportMetric(mw[1], "diff-s")
	b.ReportMetric(mw[2], "afresh-s")
	b.ReportMetric(mc[0], "render-cpu-s")
	b.ReportMetric(mc[1], "diff-cpu-s")
	b.ReportMetric(mc[2], "afresh-cpu-s")
	b.ReportMetric(mw[1]/mw[0], "wall-ratio")
	b.ReportMetric(mc[1]/mc[0], "cpu-ratio")
	b.ReportMetric(mw[2]/mw[0], "afresh-wall-ratio")
	b.ReportMetric(mc[2]/mc[0], "afresh-cpu-ratio")
}

// labelled runs f with the profiler label cmd=name, which the goroutines
// it starts inherit, so that a CPU profile of the benchmark splits by
// command: go tool pprof -tagfocus=cmd=diff.
func labelled(name string, f func() int) int {
	var code int
	pprof.Do(context.Background(), pprof.Labels("cmd", name), func(context.Context) { code = f() })
	return code
}

// gitCommit commits everything in dir with the real git binary, making
// the repository first when there is none.
func gitCommit(b *testing.B, dir, msg string) {
	b.Helper()
	git := func(args ...string) {
		b.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=keyhole", "GIT_AUTHOR_EMAIL=test@keyhole.dev",
			"GIT_COMMITTER_NAME=keyhole", "GIT_COMMITTER_EMAIL=test@keyhole.dev", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		git("init", "-q", "-b", "main")
	}
	git("add", "-A")
	git("commit", "-q", "-m", msg)
}
