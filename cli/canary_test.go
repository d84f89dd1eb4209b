package cli

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// canary is planted in every Secret of the canary repository. No byte of
// any output may hold it, in plain text or in the base64 a Secret's data
// holds, whatever the format and whatever goes wrong.
const canary = "CANARY-7f3a9c1e-do-not-print"

// tokenCanary has the shape of a GitHub token and is written where no
// credential belongs, into a Connection: CredentialLiteral must fire on
// it, and no output may hold it either.
const tokenCanary = "ghp_C4n4ryT0k3nXq9Zr7Wm2Lp5Vb8Nd1Hs6Jf3K"

// canaryRepo writes a repository whose Secrets hold the canary in every
// form the checks read (stringData, data, a multi-line value, a value with
// a NUL) next to Connections that make every Connection check fire on
// them.
func canaryRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	files := map[string]string{
		"secrets.yaml": `apiVersion: v1
kind: Secret
metadata: {name: plain, namespace: ns}
stringData:
  token: ` + canary + `
  multi: "` + canary + `\n` + canary + `"
---
apiVersion: v1
kind: Secret
metadata: {name: encoded, namespace: ns}
data:
  token: ` + b64(canary) + `
  multi: ` + b64(canary+"\n"+canary) + `
  nul: ` + b64(canary+"\x00") + `
  notbase64: "` + canary + `"
`,
		"connections.yaml": `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: plain, namespace: ns}
spec:
  hosts: [a.example.com, b.example.com, c.example.com]
  credential: {kind: secret, secretRef: {name: plain}}
  placement:
    inject:
      - {hosts: [a.example.com], header: Authorization, value: "Bearer {{ .multi }}"}
      - {hosts: [b.example.com], header: Authorization, value: "Bearer {{ .tokn }}"}
      - {hosts: [c.example.com], header: Authorization, value: "Bearer {{ .token"}
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: encoded, namespace: ns}
spec:
  hosts: [a.example.com, b.example.com]
  credential: {kind: secret, secretRef: {name: encoded}}
  placement:
    inject:
      - {hosts: [a.example.com], header: Authorization, value: "{{ .multi }}{{ .nul }}{{ .notbase64 }}"}
      - hosts: [b.example.com]
        basic: {usernameKey: multi, passwordKey: tokens}
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: literal
  namespace: ns
  annotations: {previous: "` + tokenCanary + `"}
spec:
  hosts: [a.example.com]
  credential: {kind: secret, secretRef: {name: plain}}
  placement:
    inject:
      - {hosts: [a.example.com], header: Authorization, value: "Bearer ` + tokenCanary + `"}
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: invalid, namespace: ns}
spec:
  hosts: [` + tokenCanary + `]
  credential: {kind: secret, secretRef: {name: plain}}
  placement:
    inject:
      - {hosts: [a.example.com], header: "` + tokenCanary + `", value: "{{ .token }}", placeholderEnv: [` + tokenCanary + `-]}
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: aws, namespace: ns}
spec:
  hosts: [s3.us-east-1.amazonaws.com, storage.example.com]
  credential:
    kind: awsSigV4
    secretRef: {name: plain}
    awsSigV4: {accessKeyIdKey: token, secretAccessKeyKey: multi, sessionTokenKey: tokn}
  placement:
    inject:
      - {hosts: [s3.us-east-1.amazonaws.com, storage.example.com], header: Authorization, value: "{{ .token }}"}
    env:
      - {name: AWS_SECRET_ACCESS_KEY, key: multi}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// assertNoCanary fails when out holds the canary in any form a careless
// printer could produce.
func assertNoCanary(t *testing.T, what string, out []byte) {
	t.Helper()
	for _, form := range []string{canary, base64.StdEncoding.EncodeToString([]byte(canary)), canary[:16], tokenCanary[4:20]} {
		if bytes.Contains(out, []byte(form)) {
			t.Errorf("%s holds the canary secret (%q):\n%s", what, form, out)
		}
	}
}

func TestCanaryNeverPrinted(t *testing.T) {
	dir := canaryRepo(t)
	for _, format := range []string{"text", "json", "github", "sarif"} {
		t.Run(format, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
			code := run(e, []string{"check", "--format", format, dir})
			if code != exitFailed {
				t.Fatalf("exit %d, want %d (the repository is broken on purpose)\n%s%s", code, exitFailed, stdout.String(), stderr.String())
			}
			for _, code := range []string{"ConnectionInjectionInvalid", "ConnectionSecretKeyMissing", "CredentialLiteral", "ConnectionValueLiteral", "AWSSigV4CredentialInvalid", "AWSSigV4HostUnsigned"} {
				if !bytes.Contains(stdout.Bytes(), []byte(code)) {
					t.Fatalf("%s did not fire:\n%s", code, stdout.String())
				}
			}
			assertNoCanary(t, "stdout", stdout.Bytes())
			assertNoCanary(t, "stderr", stderr.Bytes())
		})
	}
	for _, cmd := range [][]string{{"render", "--stdout", dir}, {"render", "-o", filepath.Join(t.TempDir(), "out"), dir}, {"explain", dir}} {
		t.Run(cmd[0]+" "+cmd[1], func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
			if code := run(e, cmd); code == exitOK {
				t.Fatalf("exit 0, want a failure (the repository is broken on purpose)\n%s%s", stdout.String(), stderr.String())
			}
			assertNoCanary(t, "stdout", stdout.Bytes())
			assertNoCanary(t, "stderr", stderr.Bytes())
		})
	}
	t.Run("stdin", func(t *testing.T) {
		body, err := os.ReadFile(filepath.Join(dir, "secrets.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		e := &env{stdin: bytes.NewReader(append(body, []byte("\n---\n: [broken")...)), stdout: &stdout, stderr: &stderr}
		run(e, []string{"check", "--format", "json", "-"})
		assertNoCanary(t, "stdout", stdout.Bytes())
		assertNoCanary(t, "stderr", stderr.Bytes())
	})
}

// TestCanaryFluxSubstitution: a Secret that a Flux Kustomization
// substitutes from holds the canary; the variable stands in a
// Connection's host, header value and name, where diagnostics quote
// fields. Neither check nor render may print it.
func TestCanaryFluxSubstitution(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"ks.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: app, namespace: flux-system}
spec:
  path: ./app
  sourceRef: {kind: GitRepository, name: flux-system}
  targetNamespace: ns
  postBuild:
    substituteFrom:
      - {kind: Secret, name: vars}
`,
		"vars.yaml": `apiVersion: v1
kind: Secret
metadata: {name: vars, namespace: flux-system}
stringData:
  HOST: ` + canary + `.example.com
  TOKEN: ` + canary + `
`,
		"app/connection.yaml": `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: c-${TOKEN}
spec:
  hosts:
    - ${HOST}
  credential:
    kind: secret
    secretRef:
      name: missing-${TOKEN}
  placement:
    inject:
      - hosts:
          - ${HOST}
        header: Authorization
        value: "Bearer ${TOKEN}"
`,
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "-v", dir}, {"check", "--format", "json", dir}, {"render", "--stdout", dir}} {
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		run(e, args)
		if !bytes.Contains(stdout.Bytes(), []byte("flux:flux-system/app")) && !bytes.Contains(stderr.Bytes(), []byte("flux:flux-system/app")) {
			t.Fatalf("%v did not build the Flux unit:\n%s%s", args, stdout.String(), stderr.String())
		}
		assertNoCanary(t, strings.Join(args[:1], " ")+" stdout", stdout.Bytes())
		assertNoCanary(t, strings.Join(args[:1], " ")+" stderr", stderr.Bytes())
	}
}

// TestFileNameCannotForgeLines: a file whose name holds a line break and
// a workflow command is reported on one line in every text format, so a
// CI runner reading the log sees no command keyhole did not write.
func TestFileNameCannotForgeLines(t *testing.T) {
	dir := t.TempDir()
	conn, err := os.ReadFile("../examples/broken/secret-key-missing/connection.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secret, err := os.ReadFile("../examples/broken/secret-key-missing/secret.yaml")
	if err != nil {
		t.Fatal(err)
	}
	forged := "conn\n::error file=x::forged\x1b[2K.yaml"
	for name, body := range map[string][]byte{forged: conn, "secret.yaml": secret} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, format := range []string{"text", "github"} {
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		if code := run(e, []string{"check", "-v", "--format", format, dir}); code != exitFailed {
			t.Fatalf("%s: exit %d, want %d\n%s%s", format, code, exitFailed, stdout.String(), stderr.String())
		}
		commands := 0
		for _, l := range strings.Split(stdout.String(), "\n") {
			if strings.HasPrefix(l, "::") {
				commands++
			}
			if strings.Contains(l, "\x1b") {
				t.Errorf("%s: an escape sequence reached the output: %q", format, l)
			}
		}
		want := map[string]int{"text": 0, "github": 2}[format] // github: one annotation per error
		if commands != want || !strings.Contains(stdout.String(), "forged") {
			t.Errorf("%s: %d lines start a workflow command, want %d:\n%s", format, commands, want, stdout.String())
		}
	}
}
