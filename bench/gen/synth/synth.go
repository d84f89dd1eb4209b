// Package synth generates synthetic keyhole repositories of any size for
// benchmarks: Connections with their Secrets, SandboxClasses, AgentRuntimes
// that bind them, and agent.yaml files. The output is deterministic (the
// same options give the same bytes), valid against keyhole's schemas, and
// holds only placeholder values, never anything shaped like a real token.
package synth

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Options says how large a repository to write.
type Options struct {
	// Connections is the number of Connections, each with its own Secret.
	Connections int
	// Agents is the number of agents/<name>/agent.yaml files.
	Agents int
	// PerFile is how many Connections (with their Secrets) share one
	// multi-document file; zero means DefaultPerFile.
	PerFile int
	// Overlays is the number of kustomize overlays (overlays/env-N), each
	// putting one shared base of OverlayConnections Connections, with
	// their Secrets, class and runtimes, into its own namespace.
	Overlays int
}

// OverlayConnections is the size of the kustomize base the overlays share.
const OverlayConnections = 100

// DefaultPerFile keeps files at a size real repositories have.
const DefaultPerFile = 100

// roles are the Connection roles every generated SandboxClass declares; an
// AgentRuntime binds one Connection to each.
func roles() []string { return []string{"vcs", "issues", "registry", "api"} }

// maxNamespaces spreads the objects over at most this many namespaces.
const maxNamespaces = 10

// Stats counts what Generate wrote.
type Stats struct {
	Files, Documents int
}

// Generate writes the repository into dir, which must be empty or not
// exist yet: the generator never overwrites files it did not write.
func Generate(dir string, opts Options) (Stats, error) {
	if opts.Connections < 0 || opts.Agents < 0 || opts.PerFile < 0 || opts.Overlays < 0 {
		return Stats{}, errors.New("synth: counts must not be negative")
	}
	if opts.PerFile == 0 {
		opts.PerFile = DefaultPerFile
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return Stats{}, fmt.Errorf("synth: %s is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Stats{}, fmt.Errorf("synth: %w", err)
	}
	g := generator{dir: dir}
	files := (opts.Connections + opts.PerFile - 1) / opts.PerFile
	namespaces := min(max(files, 1), maxNamespaces)
	// About one SandboxClass per ten Connections, spread over the
	// namespaces, at least one in each.
	classes := max(1, opts.Connections/10/namespaces)
	for ns := 0; ns < namespaces && opts.Connections > 0; ns++ {
		var b strings.Builder
		for c := 0; c < classes; c++ {
			sandboxClass(&b, namespace(ns), c)
		}
		g.write(filepath.Join("namespaces", namespace(ns), "classes.yaml"), b.String(), classes)
	}
	for f := 0; f < files; f++ {
		ns := namespace(f % namespaces)
		first, last := f*opts.PerFile, min((f+1)*opts.PerFile, opts.Connections)
		var conns, runtimes strings.Builder
		docs, rts := 0, 0
		for i := first; i < last; i++ {
			connection(&conns, ns, i)
			secret(&conns, ns, i)
			docs += 2
		}
		for i := first; i < last; i += len(roles()) {
			agentRuntime(&runtimes, ns, i, min(last, i+len(roles())), (i/len(roles()))%classes)
			rts++
		}
		g.write(filepath.Join("namespaces", ns, fmt.Sprintf("connections-%04d.yaml", f)), conns.String(), docs)
		g.write(filepath.Join("namespaces", ns, fmt.Sprintf("runtimes-%04d.yaml", f)), runtimes.String(), rts)
	}
	if opts.Overlays > 0 {
		g.overlays(opts.Overlays)
	}
	if opts.Agents > 0 {
		// The agents' connection label "company" resolves in the
		// namespace keyhole.yaml gives them.
		g.write("keyhole.yaml", "apiVersion: keyhole.dev/v1alpha1\nkind: Config\nnamespace: agents\nsandboxImage: ghcr.io/acme/agent-sandbox:1\n", 1)
		g.write(filepath.Join("agents", "company.yaml"), companyConnection, 2)
	}
	for a := 0; a < opts.Agents; a++ {
		name := fmt.Sprintf("agent-%04d", a)
		g.write(filepath.Join("agents", name, "agent.yaml"), agentFile(name, a), 1)
	}
	return g.stats, g.err
}

// companyConnection is the Connection every generated agent's github
// connector names, and its Secret.
const companyConnection = `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: company
  namespace: agents
spec:
  hosts: [api.github.com, uploads.github.com, github.com]
  credential:
    kind: secret
    secretRef:
      name: company-github-token
  placement:
    inject:
      - hosts: [api.github.com, uploads.github.com]
        header: Authorization
        value: "Bearer {{ .token }}"
      - hosts: [github.com]
        basic:
          usernameKey: user
          passwordKey: token
---
apiVersion: v1
kind: Secret
metadata:
  name: company-github-token
  namespace: agents
stringData:
  user: x-access-token
  token: placeholder-not-a-token
`

// overlays writes overlays/base, a kustomize base no walk reads on its
// own, and n overlays of it. Each overlay's build is n documents of the
// base's, in its own namespace, so references still resolve.
func (g *generator) overlays(n int) {
	var b strings.Builder
	sandboxClass(&b, "base", 0)
	docs := 1
	for i := 0; i < OverlayConnections; i++ {
		connection(&b, "base", i)
		secret(&b, "base", i)
		docs += 2
	}
	for i := 0; i < OverlayConnections; i += len(roles()) {
		agentRuntime(&b, "base", i, min(OverlayConnections, i+len(roles())), 0)
		docs++
	}
	g.write(filepath.Join("overlays", "base", "objects.yaml"), b.String(), 0)
	g.write(filepath.Join("overlays", "base", "kustomization.yaml"), "resources: [objects.yaml]\n", 0)
	for o := 0; o < n; o++ {
		g.write(filepath.Join("overlays", fmt.Sprintf("env-%d", o), "kustomization.yaml"),
			fmt.Sprintf("resources: [../base]\nnamespace: env-%d\nlabels: [{pairs: {env: env-%d}}]\n", o, o), docs)
	}
}

func namespace(i int) string { return fmt.Sprintf("team-%02d", i) }

// generator writes files, keeping the first error.
type generator struct {
	dir   string
	stats Stats
	err   error
}

func (g *generator) write(rel, content string, docs int) {
	if g.err != nil {
		return
	}
	p := filepath.Join(g.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		g.err = fmt.Errorf("synth: %w", err)
		return
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		g.err = fmt.Errorf("synth: %w", err)
		return
	}
	g.stats.Files++
	g.stats.Documents += docs
}

// sep starts a document, with "---" between documents.
func sep(b *strings.Builder) {
	if b.Len() > 0 {
		b.WriteString("---\n")
	}
}

func sandboxClass(b *strings.Builder, ns string, c int) {
	sep(b)
	fmt.Fprintf(b, `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: SandboxClass
metadata:
  name: class-%03d
  namespace: %s
spec:
  image: registry.example.com/sandbox/workspace:1.%d.0
  connections:
`, c, ns, c%10)
	for _, r := range roles() {
		fmt.Fprintf(b, "    - role: %s\n      description: the %s Connection of this class\n", r, r)
	}
}

// unrestricted is the annotation of the shapes without rules.
func unrestricted(i int) string {
	if i%4 < 2 {
		return "  annotations:\n    keyhole.dev/ignore: ConnectionInjectUnrestricted\n"
	}
	return ""
}

// connection writes Connection i. The four shapes cycle so that every
// kind of inject entry the compiler handles is exercised: a bearer header,
// a header plus basic auth for git, a header limited by rules, and an
// API-key header with rules on two hosts. The first two have no rules,
// and say so on purpose (the ignore annotation for
// ConnectionInjectUnrestricted), as a team that means it would: the
// repository checks clean.
func connection(b *strings.Builder, ns string, i int) {
	sep(b)
	name := fmt.Sprintf("conn-%05d", i)
	api := fmt.Sprintf("api-%05d.example.com", i)
	git := fmt.Sprintf("git-%05d.example.com", i)
	env := fmt.Sprintf("CONN_%05d_TOKEN", i)
	fmt.Fprintf(b, `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: %s
  namespace: %s
  labels:
    bench.keyhole.dev/shape: shape-%d
%sspec:
`, name, ns, i%4, unrestricted(i))
	// Shapes 1 and 3 also reach the git host.
	hosts := api
	if i%2 == 1 {
		hosts = api + ", " + git
	}
	fmt.Fprintf(b, `  hosts: [%s]
  credential:
    kind: secret
    secretRef:
      name: %s-token
  placement:
    inject:
`, hosts, name)
	switch i % 4 {
	case 0:
		fmt.Fprintf(b, `      - hosts: [%[1]s]
        header: Authorization
        value: "Bearer {{ .token }}"
        placeholderEnv: [%[2]s]
`, api, env)
	case 1:
		fmt.Fprintf(b, `      - hosts: [%[1]s]
        header: Authorization
        value: "token {{ .token }}"
        placeholderEnv: [%[3]s]
      - hosts: [%[2]s]
        basic:
          usernameKey: user
          passwordKey: token
`, api, git, env)
	case 2:
		fmt.Fprintf(b, `      - hosts: [%[1]s]
        header: Authorization
        value: "Bearer {{ .token }}"
        placeholderEnv: [%[2]s]
        rules:
          - methods: [GET, HEAD]
            pathPrefixes: [/repos/team/widgets-%[3]d, /user]
          - methods: [POST]
            pathPrefixes: [/repos/team/widgets-%[3]d/pulls]
`, api, env, i)
	case 3:
		fmt.Fprintf(b, `      - hosts: [%[1]s, %[2]s]
        header: X-Api-Key
        value: "{{ .token }}"
        placeholderEnv: [%[3]s, CONN_%05[4]d_KEY]
        rules:
          - methods: [GET]
            pathPrefixes: [/v1/items, /v1/search]
          - methods: [PUT, PATCH, DELETE]
            pathPrefixes: [/v1/items/%[4]d]
`, api, git, env, i)
	}
}

// secret writes Connection i's Secret. Its values are visibly
// placeholders, so no scanner mistakes the repository for a leak.
func secret(b *strings.Builder, ns string, i int) {
	sep(b)
	fmt.Fprintf(b, `apiVersion: v1
kind: Secret
metadata:
  name: conn-%05[1]d-token
  namespace: %[2]s
type: Opaque
stringData:
  user: x-access-token
  token: placeholder-value-%05[1]d
`, i, ns)
}

// agentRuntime binds Connections first..last-1, one per role, to a class.
func agentRuntime(b *strings.Builder, ns string, first, last, class int) {
	sep(b)
	fmt.Fprintf(b, `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: AgentRuntime
metadata:
  name: runtime-%05d
  namespace: %s
spec:
  promptPackRef: {name: agent}
  facades: [{type: websocket}]
  sandbox:
    enabled: true
    connections:
`, first/len(roles()), ns)
	for i := first; i < last; i++ {
		fmt.Fprintf(b, "      - {sandbox: class-%03d, role: %s, connection: conn-%05d}\n", class, roles()[i-first], i)
	}
}

func agentFile(name string, a int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nmode: text\nllm: llm-fast\n", name)
	if a%3 != 2 {
		b.WriteString("sandbox: daytona\n")
	}
	b.WriteString("connectors:\n  - name: github\n    connection: company\n")
	if a%3 != 2 {
		b.WriteString("    sandbox: true\n")
	}
	if a%2 == 0 {
		b.WriteString("allowed_domains: [pypi.org, files.pythonhosted.org]\n")
	}
	return b.String()
}

// Main is the command: go run ./bench/gen -n N [-agents M] [-per-file K] -o DIR.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts Options
	fs.IntVar(&opts.Connections, "n", 1000, "number of Connections (each with its Secret)")
	fs.IntVar(&opts.Agents, "agents", 0, "number of agents/<name>/agent.yaml files")
	fs.IntVar(&opts.PerFile, "per-file", DefaultPerFile, "Connections per multi-document file")
	fs.IntVar(&opts.Overlays, "overlays", 0, "kustomize overlays of a shared base of 100 Connections")
	out := fs.String("o", "", "output directory (must be empty or new)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: gen -n N [-agents M] [-per-file K] -o DIR")
		return 2
	}
	st, err := Generate(*out, opts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %d files, %d documents to %s\n", st.Files, st.Documents, *out)
	return 0
}
