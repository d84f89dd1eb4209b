package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy"
	"keyhole.dev/keyhole/suggest"
)

// TestSuggestCanary plants the canary in the example's Secret and in a
// query a hand-made log line carries: no output of suggest, text or
// JSON, and no file --write changes, may hold it.
func TestSuggestCanary(t *testing.T) {
	dir := t.TempDir()
	if err := copyTree("../examples/github-acme", dir); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret.yaml")
	b, err := os.ReadFile(secret)
	if err != nil {
		t.Fatal(err)
	}
	planted := strings.Replace(string(b), "replace-me-with-a-github-token", canary, 1)
	if planted == string(b) {
		t.Fatal("the example's Secret no longer holds the stand-in value the canary replaces")
	}
	if err := os.WriteFile(secret, []byte(planted), 0o644); err != nil {
		t.Fatal(err)
	}
	var log []byte
	at := time.Date(2026, 11, 29, 23, 10, 0, 0, time.UTC)
	for _, p := range []string{"/repos/acme/gadgets/issues?access_token=" + canary, "/repos/acme/gadgets/pulls#" + canary} {
		log = proxy.AppendRequestLine(log, at, proxy.RequestLine{Sandbox: "agents/support-workspace", Host: "api.github.com", Method: "GET", Path: p,
			Decision: "refuse", Reason: "l7-not-allowed", Connection: "github-acme", Status: 403})
	}
	logFile := filepath.Join(t.TempDir(), "proxy.log")
	if err := os.WriteFile(logFile, log, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"suggest", "--log", logFile, dir},
		{"suggest", "--format", "json", "--log", logFile, dir},
		{"suggest", "--write", "--log", logFile, dir},
	} {
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		if code := run(e, args); code != exitFailed {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, exitFailed, stdout.String(), stderr.String())
		}
		if !strings.Contains(stdout.String(), "/repos/acme/gadgets") {
			t.Fatalf("%v suggested nothing:\n%s", args, stdout.String())
		}
		assertNoCanary(t, strings.Join(args, " ")+" stdout", stdout.Bytes())
		assertNoCanary(t, strings.Join(args, " ")+" stderr", stderr.Bytes())
	}
	conn, err := os.ReadFile(filepath.Join(dir, "connection.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conn), "pathPrefixes: [/repos/acme/gadgets]") {
		t.Fatalf("--write did not add the rule:\n%s", conn)
	}
	assertNoCanary(t, "connection.yaml after --write", conn)
}

// TestWriteAllOrNone makes the second of two writes fail: the first file
// must be left as it was, and no temporary file left behind.
func TestWriteAllOrNone(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(first, []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := writeAll([]suggest.Patch{
		{File: first, Text: []byte("after\n")},
		{File: filepath.Join(dir, "gone", "b.yaml"), Text: []byte("after\n")},
	}, []string{dir})
	if err == nil {
		t.Fatal("no error for a file that is not there")
	}
	if b, _ := os.ReadFile(first); string(b) != "before\n" {
		t.Fatalf("the first file was written: %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

// TestSuggestBadLog feeds suggest a log of nothing it can use: it says
// how many lines it skipped and exits 0, as for a log without refusals.
func TestSuggestBadLog(t *testing.T) {
	in := "\x00\x00{\"time\":\xff\n" + strings.Repeat("{", 1<<20) + "\nnot json\n{\"time\":\"x\",\"msg\":\"request\"}\n"
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(in), stdout: &stdout, stderr: &stderr}
	if code := run(e, []string{"suggest", "../examples/github-acme"}); code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if want := "read 0 request lines: 0 refused, in 0 groups; 4 other lines skipped\n"; stdout.String() != want {
		t.Fatalf("stdout %q, want %q", stdout.String(), want)
	}
}

// TestSuggestWriteOnlyInside: --write edits only the repository's own
// files: a file a kustomization read from outside the repository, one
// reached through a committed symbolic link, or one in .git is refused,
// and then no file is written, not even the repository's own.
func TestSuggestWriteOnlyInside(t *testing.T) {
	repo, outside := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(repo)
	for name, data := range map[string]string{
		"connection.yaml":                         "inside\n",
		filepath.Join(outside, "connection.yaml"): "outside\n",
		".git/config":                             "config\n",
	} {
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, "linked"); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{filepath.Join(outside, "connection.yaml"), "../" + filepath.Base(outside) + "/connection.yaml", "linked/connection.yaml", ".git/config"} {
		err := writeAll([]suggest.Patch{{File: "connection.yaml", Text: []byte("edited\n")}, {File: file, Text: []byte("edited\n")}}, nil)
		if err == nil {
			t.Errorf("writing %s: no error", file)
		}
	}
	for name, want := range map[string]string{"connection.yaml": "inside\n", filepath.Join(outside, "connection.yaml"): "outside\n", ".git/config": "config\n"} {
		if b, _ := os.ReadFile(name); string(b) != want {
			t.Errorf("%s = %q, want it untouched (%q)", name, b, want)
		}
	}
	if err := writeAll([]suggest.Patch{{File: "connection.yaml", Text: []byte("edited\n")}}, []string{"."}); err != nil {
		t.Errorf("writing the repository's own file: %v", err)
	}
}
