package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
)

// TestCanaryNeverInSourceLines: the grouped layout, which prints the
// source line of each diagnostic, never prints the canary, whether it is
// in a Secret, written literally into a Connection, in a token's shape,
// or in a pod's env var; and it does print source lines where no secret
// may be, so the test is not passing by showing none. Every other format
// is checked alike.
func TestCanaryNeverInSourceLines(t *testing.T) {
	dir := canaryRepo(t)
	extra := map[string]string{
		// A List whose items are a Secret and a Connection that fails: the
		// Connection's lines are in a file that holds a Secret.
		"list.yaml": `apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Secret
    metadata: {name: listed, namespace: ns}
    stringData: {token: "` + canary + `"}
  - apiVersion: omnia.altairalabs.ai/v1alpha1
    kind: Connection
    metadata: {name: listed, namespace: ns}
    spec:
      hosts: [l.example.com]
      credential: {kind: secret, secretRef: {name: listed}}
      placement:
        inject:
          - {hosts: [l.example.com], header: Authorization, value: "{{ .tokn }} ` + canary + `"}
`,
		// A pod's env var holds the canary on a line a schema error
		// points at.
		"sandbox.yaml": `apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxTemplate
metadata: {name: t, namespace: ns}
spec:
  podTemplate:
    spec:
      containers:
        - name: c
          image: busybox
          env:
            - {name: TOKEN, value: "` + canary + `", bogus: 1}
            - name: OTHER
              value: ` + canary + `
              bogus: 2
`,
	}
	for name, body := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"check", "-v", "--layout", "grouped", "--color", "always", dir},
		{"check", "-v", "--layout", "grouped", "--color", "never", dir},
		{"check", "--format", "junit", "--min-severity", "info", dir},
		{"check", "--format", "gitlab", "--min-severity", "info", dir},
	} {
		t.Run(strings.Join(args[1:len(args)-1], " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
			if code := run(e, args); code != exitFailed {
				t.Fatalf("exit %d, want %d\n%s%s", code, exitFailed, stdout.String(), stderr.String())
			}
			for _, code := range []string{"ConnectionSecretKeyMissing", "CredentialLiteral", "ConnectionValueLiteral", "SchemaInvalid"} {
				if !bytes.Contains(stdout.Bytes(), []byte(code)) {
					t.Fatalf("%s did not fire:\n%s", code, stdout.String())
				}
			}
			assertNoCanary(t, "stdout", stdout.Bytes())
			assertNoCanary(t, "stderr", stderr.Bytes())
			if args[2] == "--layout" && !bytes.Contains(stdout.Bytes(), []byte(`"Bearer {{ .tokn }}"}`)) {
				t.Errorf("no source line shown at all:\n%s", stdout.String())
			}
		})
	}
}

// TestExcerptRule holds each part of the rule in excerpts' comment: a
// line is shown only from a file keyhole reads whose documents may hold
// no secret, and only where the line itself may hold none.
func TestExcerptRule(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	files := map[string]string{
		"conn.yaml":    "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c}\nspec:\n  value: x\n  token: ghp_C4n4ryT0k3nXq9Zr7Wm2Lp5Vb8Nd1Hs6Jf3K\n",
		"secret.yaml":  "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
		"sealed.yaml":  "apiVersion: bitnami.com/v1alpha1\nkind: SealedSecret\nmetadata: {name: s}\n",
		"cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\ndata: {a: b}\n",
		"sops.yaml":    "apiVersion: v1\nkind: Thing\nmetadata: {name: s}\nsops: {}\n",
		"kust.yaml":    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nsecretGenerator: [{name: s, literals: [a=b]}]\n",
		"values.yaml":  "password: x\n",
		"hr.yaml":      "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: s}\n",
		"broken.yaml":  "apiVersion: v1\nkind: Thing\n---\n: [\n",
		"pod.yaml":     "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  env:\n    - name: A\n      value: |\n        one\n        two\n    - name: B\n",
		"agent.yaml":   "name: a\n",
		"list.yaml":    "apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: Secret, metadata: {name: s}}\n",
		"ref.yaml":     "apiVersion: x/v1\nkind: Thing\nspec: {from: {kind: Secret, name: s}}\n",
		"sub/x.yaml":   "apiVersion: v1\nkind: Thing\n",
		".git/HEAD":    "ref: refs/heads/main\n",
		"linked.yaml":  "",
		"outside.yaml": "",
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A link out of the repository, to a file that looks harmless.
	out := filepath.Join(t.TempDir(), "o.yaml")
	if err := os.WriteFile(out, []byte("apiVersion: v1\nkind: Thing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove("linked.yaml")
	if err := os.Symlink(out, "linked.yaml"); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		file string
		line int
		code string
		want bool
	}{
		"connection kind line":          {file: "conn.yaml", line: 2, want: true},
		"connection value line":         {file: "conn.yaml", line: 5, want: true},
		"token-shaped string":           {file: "conn.yaml", line: 6},
		"literal finding":               {file: "conn.yaml", line: 2, code: "CredentialLiteral"},
		"value literal finding":         {file: "conn.yaml", line: 2, code: "ConnectionValueLiteral"},
		"past the end":                  {file: "conn.yaml", line: 99},
		"secret":                        {file: "secret.yaml", line: 2},
		"sealed secret":                 {file: "sealed.yaml", line: 2},
		"data field":                    {file: "cm.yaml", line: 2},
		"sops":                          {file: "sops.yaml", line: 2},
		"secretGenerator":               {file: "kust.yaml", line: 2},
		"no kind (values file)":         {file: "values.yaml", line: 1},
		"helm release":                  {file: "hr.yaml", line: 2},
		"not YAML":                      {file: "broken.yaml", line: 2},
		"pod env value":                 {file: "pod.yaml", line: 7},
		"pod env block scalar":          {file: "pod.yaml", line: 9},
		"pod env name":                  {file: "pod.yaml", line: 6, want: true},
		"agent.yaml":                    {file: "agent.yaml", line: 1, want: true},
		"list of a secret":              {file: "list.yaml", line: 2},
		"a reference of kind Secret":    {file: "ref.yaml", line: 2},
		"subdirectory":                  {file: "sub/x.yaml", line: 2, want: true},
		"absolute path":                 {file: filepath.ToSlash(filepath.Join(dir, "sub/x.yaml")), line: 2, want: true},
		"link out of the repository":    {file: "linked.yaml", line: 2},
		"standard input":                {file: "-", line: 1},
		"no line":                       {file: "sub/x.yaml", line: 0},
		"a file outside any repository": {file: filepath.ToSlash(out), line: 2, want: true},
	}
	x := newExcerpts()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code := tc.code
			if code == "" {
				code = "SchemaInvalid"
			}
			line, ok := x.line(diag.Diagnostic{Code: code, Pos: diag.Pos{File: tc.file, Line: tc.line, Column: 1}})
			if ok != tc.want {
				t.Errorf("shown %v (%q), want %v", ok, line, tc.want)
			}
		})
	}
}

// TestSourceLineCannotForgeCommands: a source line the grouped layout
// shows goes through the guard every printed line does, so a value that
// reads as a workflow command (at a line's start, or "##[" anywhere) is
// escaped, coloured or not.
func TestSourceLineCannotForgeCommands(t *testing.T) {
	dir := t.TempDir()
	body := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: ns}\nspec:\n  hosts: [\"##[error]forged.example.com\"]\n  bogus: |\n    ::error file=x::forged\n"
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, color := range []string{"never", "always"} {
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		if code := run(e, []string{"check", "--layout", "grouped", "--color", color, dir}); code != exitFailed {
			t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
		}
		out := stdout.String()
		if !strings.Contains(out, `##\u005berror]forged`) {
			t.Errorf("--color %s: the source line is not shown escaped:\n%s", color, out)
		}
		for l := range strings.Lines(sgrSeq.ReplaceAllString(out, "")) {
			if diag.IsCommand(strings.TrimSuffix(l, "\n")) {
				t.Errorf("--color %s: %q reads as a workflow command", color, l)
			}
		}
	}
}
