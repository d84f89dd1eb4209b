package render

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/engines"
	"keyhole.dev/keyhole/source/fixture"
)

// Benchmark scale: 10,000 Connections across 1,000 sandboxes.
const (
	benchSandboxes       = 1000
	benchConnsPerSandbox = 10
)

// writeBenchRepo writes a repository of benchSandboxes AgentRuntimes, each
// binding benchConnsPerSandbox Connections (one host and one Secret each)
// to the roles of one SandboxClass.
func writeBenchRepo(b *testing.B, dir string) {
	b.Helper()
	var class strings.Builder
	class.WriteString("apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: SandboxClass\nmetadata:\n  name: workspace\n  namespace: agents\nspec:\n  image: ghcr.io/acme/agent-workspace:1.4.2\n  connections:\n")
	for r := range benchConnsPerSandbox {
		fmt.Fprintf(&class, "    - role: r%d\n", r)
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	write("sandboxclass.yaml", class.String())
	for s := range benchSandboxes {
		var docs strings.Builder
		fmt.Fprintf(&docs, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: AgentRuntime\nmetadata:\n  name: a%d\n  namespace: agents\nspec:\n  promptPackRef: {name: a%d}\n  facades: [{type: websocket, port: 8080}]\n  sandbox:\n    enabled: true\n    connections:\n", s, s)
		for r := range benchConnsPerSandbox {
			fmt.Fprintf(&docs, "      - {sandbox: workspace, role: r%d, connection: c%d-%d}\n", r, s, r)
		}
		for r := range benchConnsPerSandbox {
			fmt.Fprintf(&docs, `---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: c%[1]d-%[2]d
  namespace: agents
spec:
  hosts: [h%[1]d-%[2]d.example.com]
  credential:
    kind: secret
    secretRef:
      name: s%[1]d-%[2]d
  placement:
    inject:
      - hosts: [h%[1]d-%[2]d.example.com]
        header: Authorization
        value: "Bearer {{ .token }}"
        placeholderEnv: [T%[1]d_%[2]d]
        rules:
          - methods: [GET]
            pathPrefixes: [/v1]
---
apiVersion: v1
kind: Secret
metadata:
  name: s%[1]d-%[2]d
  namespace: agents
stringData:
  token: t
`, s, r)
		}
		write(fmt.Sprintf("a%04d.yaml", s), docs.String())
	}
}

func benchCheck(b *testing.B, dir string, v *schema.Validator) compiler.Plan {
	docs, ds, err := source.Load([]string{dir}, source.Options{Engines: engines.All()})
	if err != nil {
		b.Fatal(err)
	}
	res := compiler.Compile(docs, v, compiler.Options{})
	if ds.HasErrors() || res.Diagnostics.HasErrors() {
		b.Fatalf("bench repo does not check: %v %v", ds, res.Diagnostics)
	}
	return res.Plan
}

// benchRepo writes the benchmark repository to a temporary directory,
// and returns it with a schema validator.
func benchRepo(b *testing.B) (string, *schema.Validator) {
	b.Helper()
	dir := b.TempDir()
	writeBenchRepo(b, dir)
	v := fixture.Validator(b)
	return dir, v
}

// BenchmarkCheck is `keyhole check` on the benchmark repository;
// BenchmarkCheckRender is `keyhole render` (check, then render, in
// memory). docs/benchmarks.md holds CheckRender to at most 1.3x Check.
func BenchmarkCheck(b *testing.B) {
	dir, v := benchRepo(b)
	for b.Loop() {
		benchCheck(b, dir, v)
	}
}

func BenchmarkCheckRender(b *testing.B) {
	dir, v := benchRepo(b)
	for b.Loop() {
		plan := benchCheck(b, dir, v)
		if len(plan.Sandboxes) != benchSandboxes {
			b.Fatalf("plan has %d sandboxes, want %d", len(plan.Sandboxes), benchSandboxes)
		}
		if _, err := Render(plan, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRender is Render alone on the benchmark plan.
func BenchmarkRender(b *testing.B) {
	dir, v := benchRepo(b)
	plan := benchCheck(b, dir, v)
	for b.Loop() {
		if _, err := Render(plan, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
