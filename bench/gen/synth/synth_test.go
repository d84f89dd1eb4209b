package synth

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/engines"
)

// readTree returns every file under dir by slash path.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGenerate(t *testing.T) {
	tests := map[string]struct {
		opts      Options
		files     int
		kinds     map[string]int
		agentDocs int
	}{
		"uneven last file": {
			opts:  Options{Connections: 42, Agents: 5, PerFile: 10},
			files: 5 /* conn files */ + 5 /* runtime files */ + 5 /* classes */ + 5 /* agents */ + 2, /* keyhole.yaml, company */
			kinds: map[string]int{"Connection": 43, "Secret": 43, "AgentRuntime": 13, "SandboxClass": 5, "Agent": 5, "Config": 1},
		},
		"defaults": {
			opts:  Options{Connections: 250},
			files: 3 + 3 + 3,
			kinds: map[string]int{"Connection": 250, "Secret": 250, "AgentRuntime": 63, "SandboxClass": 24},
		},
		"overlays": {
			opts:  Options{Connections: 8, Overlays: 2},
			files: 3 + 2 /* base */ + 2, /* overlays */
			kinds: map[string]int{"Connection": 8 + 2*OverlayConnections, "Secret": 8 + 2*OverlayConnections, "SandboxClass": 1 + 2, "AgentRuntime": 2 + 2*OverlayConnections/4},
		},
		"agents only": {
			opts:  Options{Agents: 2},
			files: 4,
			kinds: map[string]int{"Agent": 2, "Connection": 1, "Secret": 1, "Config": 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "repo")
			st, err := Generate(dir, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if st.Files != tc.files {
				t.Errorf("%d files, want %d", st.Files, tc.files)
			}
			docs, ds, err := source.Load([]string{dir}, source.Options{Engines: engines.All()})
			if err != nil || len(ds) > 0 {
				t.Fatalf("Load: %v %v", err, ds)
			}
			if len(docs) != st.Documents {
				t.Errorf("loaded %d documents, Generate says %d", len(docs), st.Documents)
			}
			kinds := map[string]int{}
			for _, d := range docs {
				kinds[d.Object().Kind]++
			}
			for k, n := range tc.kinds {
				if kinds[k] != n {
					t.Errorf("%d %s, want %d (all: %v)", kinds[k], k, n, kinds)
				}
			}

			// The same options give the same bytes.
			again := filepath.Join(t.TempDir(), "again")
			if _, err := Generate(again, tc.opts); err != nil {
				t.Fatal(err)
			}
			a, b := readTree(t, dir), readTree(t, again)
			if len(a) != len(b) {
				t.Fatalf("%d files, then %d", len(a), len(b))
			}
			for p, content := range a {
				if b[p] != content {
					t.Errorf("%s differs between two runs", p)
				}
			}
		})
	}
}

// TestPlaceholdersOnly checks every Secret value is a visible placeholder.
func TestPlaceholdersOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	if _, err := Generate(dir, Options{Connections: 20}); err != nil {
		t.Fatal(err)
	}
	value := regexp.MustCompile(`(?m)^  (user|token): (.*)$`)
	n := 0
	for p, content := range readTree(t, dir) {
		for _, m := range value.FindAllStringSubmatch(content, -1) {
			n++
			if m[2] != "x-access-token" && !strings.HasPrefix(m[2], "placeholder-value-") {
				t.Errorf("%s: %s is not a placeholder: %q", p, m[1], m[2])
			}
		}
	}
	if n != 40 {
		t.Errorf("found %d Secret values, want 40", n)
	}
}

func TestGenerateRefuses(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		dir  string
		opts Options
		want string
	}{
		"non-empty directory": {dir: full, opts: Options{Connections: 1}, want: "not empty"},
		"negative count":      {dir: t.TempDir(), opts: Options{Connections: -1}, want: "negative"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Generate(tc.dir, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(full, "keep.txt")); string(b) != "mine" {
		t.Error("Generate touched a file it did not write")
	}
}

func TestMainCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r")
	tests := map[string]struct {
		args     []string
		code     int
		stdout   string
		stderrRE string
	}{
		"writes":          {args: []string{"-n", "8", "-agents", "1", "-o", out}, code: 0, stdout: "wrote 6 files, 23 documents to " + out + "\n"},
		"no output dir":   {args: []string{"-n", "8"}, code: 2, stderrRE: "usage: gen"},
		"bad flag":        {args: []string{"-x"}, code: 2, stderrRE: "flag provided but not defined"},
		"existing output": {args: []string{"-n", "8", "-o", out}, code: 1, stderrRE: "not empty"},
	}
	for _, name := range []string{"writes", "no output dir", "bad flag", "existing output"} {
		tc := tests[name]
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Main(tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if stdout.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.stdout)
			}
			if !regexp.MustCompile(tc.stderrRE).MatchString(stderr.String()) {
				t.Errorf("stderr %q does not match %q", stderr.String(), tc.stderrRE)
			}
		})
	}
}

// TestChange: the pull request rewrites every Connection file and, with
// an agent edit, every agent, and leaves nothing of what it replaces;
// made again, it changes nothing.
func TestChange(t *testing.T) {
	dir := t.TempDir()
	if _, err := Generate(dir, Options{Connections: 8, Agents: 3, PerFile: 4}); err != nil {
		t.Fatal(err)
	}
	changed, err := Change(dir, func(agent string) string { return agent + "# edited\n" })
	if err != nil {
		t.Fatal(err)
	}
	var agents, others int
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := string(b)
		if widenedPulls.MatchString(s) || strings.Contains(s, "methods: [PUT, PATCH, DELETE]") {
			t.Errorf("%s still holds what the change replaces", p)
		}
		switch {
		case d.Name() == "agent.yaml" && strings.HasSuffix(s, "# edited\n"):
			agents++
		case strings.Contains(s, "pathPrefixes: [/repos/team]"):
			others++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if agents != 3 || others == 0 || changed != agents+others {
		t.Errorf("changed %d files: %d agents, %d others", changed, agents, others)
	}
	if again, err := Change(dir, nil); err != nil || again != 0 {
		t.Errorf("the change made again changed %d files, %v", again, err)
	}
}
