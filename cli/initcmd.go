package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
)

// initEngines are the engines `keyhole init` writes the deploy files of;
// "" is none: the files alone, rendered and applied by hand or by CI.
func initEngines() []string { return []string{"flux", "argocd", "kustomize"} }

// initSecretForms are the forms the credential's Secret takes: a
// stand-in kept out of git (.gitignore), or an ExternalSecret, which git
// may hold.
func initSecretForms() []string { return []string{"stand-in", "external-secret"} }

// initOptions is what `keyhole init` scaffolds.
type initOptions struct {
	connectors []string
	engine     string
	secret     string
	namespace  string
	agent      string
	store      string
	// under is the directory the files go in, relative to the one
	// keyhole.yaml goes in (see initRoot): "." but for a directory
	// inside a git working tree.
	under string
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

func (s *stringsFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

func runInit(e *env, args []string) int {
	fs := newFlags(e, "init", "--connector NAME [--connector NAME...] [--engine flux|argocd|kustomize] [--secret stand-in|external-secret] [DIR]")
	var o initOptions
	var connectors stringsFlag
	fs.Var(&connectors, "connector", "a connector of the catalog the agent uses (repeatable, or comma-separated): "+strings.Join(catalogNames(), ", "))
	fs.StringVar(&o.engine, "engine", "", "the GitOps engine that applies the render: "+strings.Join(initEngines(), ", ")+" (default: none, the files alone)")
	fs.StringVar(&o.secret, "secret", "stand-in", "the credentials' Secrets: stand-in (a Secret with REPLACE-ME values, which .gitignore keeps out of git) or external-secret (an ExternalSecret git may hold)")
	fs.StringVar(&o.namespace, "namespace", "agents", "the namespace of the agent and its objects")
	fs.StringVar(&o.agent, "agent", "assistant", "the agent's name")
	fs.StringVar(&o.store, "secret-store", "secret-store", "the ClusterSecretStore the ExternalSecrets read (with --secret external-secret)")
	rest, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	o.connectors = connectors
	if len(rest) > 1 {
		fmt.Fprintln(e.stderr, "keyhole init: name at most one directory")
		return exitUsage
	}
	dir := "."
	if len(rest) == 1 {
		dir = rest[0]
	}
	root, rel, err := initRoot(dir)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole init: %s\n", errText(err))
		return exitUsage
	}
	o.under = rel
	files, err := scaffold(o)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole init: %s\n", errText(err))
		return exitUsage
	}
	if err := writeNew(root, files); err != nil {
		fmt.Fprintf(e.stderr, "keyhole init: %s\n", errText(err))
		return exitUsage
	}
	for _, f := range files {
		fmt.Fprintf(e.stdout, "wrote %s\n", diag.EscapeControl(filepath.Join(root, f.name)))
	}
	paths := []string{rel}
	if o.secret == "stand-in" {
		// A walk skips what .gitignore ignores, in a directory named
		// too: named, the stand-ins are read.
		paths = append(paths, path.Join(rel, "secrets", "*.yaml"))
	}
	fmt.Fprintf(e.stdout, "next, in %s: keyhole check %s\n", diag.EscapeControl(root), diag.EscapeControl(strings.Join(paths, " ")))
	if o.secret == "stand-in" {
		// CI checks a clone, which has no stand-in: say so before its
		// first red run does.
		fmt.Fprintln(e.stdout, "git ignores the stand-ins: a check of a clone (CI) says their Secrets are missing until git holds what makes them (--secret external-secret writes ExternalSecrets; a SealedSecret or SOPS file serves too)")
	}
	return exitOK
}

// initRoot returns the directory keyhole.yaml belongs in for files
// written in dir (the top of the git working tree holding dir, or dir
// outside one), and dir relative to it.
func initRoot(dir string) (root, rel string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			rel, err := filepath.Rel(d, abs)
			if err != nil {
				return "", "", err
			}
			if rel == "." {
				return dir, ".", nil
			}
			root, err := filepath.Rel(abs, d)
			if err != nil {
				return "", "", err
			}
			return filepath.Join(dir, root), filepath.ToSlash(rel), nil
		}
		if d == filepath.Dir(d) {
			return dir, ".", nil
		}
	}
}

func catalogNames() []string {
	cat, err := schema.Catalog()
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(cat))
	for n := range cat {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// initFile is one file init writes, its name relative to DIR.
type initFile struct {
	name string
	data []byte
}

// scaffold returns the files of a repository for o, in the order they
// are written and listed.
func scaffold(o initOptions) ([]initFile, error) {
	if len(o.connectors) == 0 {
		return nil, fmt.Errorf("%w: name at least one connector with --connector: %s", errUsage, strings.Join(catalogNames(), ", "))
	}
	if o.engine != "" {
		if err := oneOf("engine", o.engine, initEngines()...); err != nil {
			return nil, err
		}
	}
	if err := oneOf("secret", o.secret, initSecretForms()...); err != nil {
		return nil, err
	}
	if o.engine == "argocd" && o.secret == "stand-in" {
		return nil, fmt.Errorf("%w: --engine argocd renders the repository from git on each sync, where a stand-in kept out of git is not, so the render finds no Secret: use --secret external-secret", errUsage)
	}
	for _, v := range []struct{ flag, value string }{{"namespace", o.namespace}, {"agent", o.agent}, {"secret-store", o.store}} {
		if !isDNSLabel(v.value) {
			return nil, fmt.Errorf("%w: --%s %q is not a DNS label (lower-case letters, digits and '-')", errUsage, v.flag, v.value)
		}
	}
	cat, err := schema.Catalog()
	if err != nil {
		return nil, err
	}
	var conns []schema.Connector
	for _, n := range o.connectors {
		c, ok := cat[n]
		if !ok {
			msg := fmt.Sprintf("no connector %q in the catalog", n)
			if near := diag.Suggest(n, catalogNames()); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			return nil, fmt.Errorf("%w: %s: want %s", errUsage, msg, strings.Join(catalogNames(), ", "))
		}
		if !slices.ContainsFunc(conns, func(x schema.Connector) bool { return x.Name == n }) {
			conns = append(conns, c)
		}
	}
	var files []initFile
	add := func(name, text string) { files = append(files, initFile{path.Join(o.under, name), []byte(text)}) }
	files = append(files, initFile{"keyhole.yaml", []byte(initConfig(o))})
	if o.secret == "stand-in" {
		add(".gitignore", "# The stand-in Secrets: their values belong in the cluster, never in git.\n/secrets/*\n")
	}
	var resources []string
	for _, c := range conns {
		name := "connections/" + c.Name + ".yaml"
		text := initConnection(o, c)
		switch {
		case o.secret == "external-secret" && o.engine != "":
			// A second source of the Application, a Kustomization of
			// their own or kubectl apply -f applies them as written:
			// keyhole's render holds only what keyhole makes, and the
			// engine applies the render alone.
			add("secrets/"+c.Name+".yaml", strings.TrimPrefix(initExternalSecret(o, c), "---\n"))
			if o.engine == "kustomize" {
				// Listed, so that check reads the keys they make.
				resources = append(resources, "secrets/"+c.Name+".yaml")
			}
		case o.secret == "external-secret":
			text += initExternalSecret(o, c)
		}
		add(name, text)
		resources = append(resources, name)
		if o.secret == "stand-in" {
			add("secrets/"+c.Name+".yaml", initStandIn(o, c))
		}
	}
	add("sandboxclass.yaml", initSandboxClass(o, conns))
	add("agentruntime.yaml", initAgentRuntime(o, conns))
	resources = append(resources, "sandboxclass.yaml", "agentruntime.yaml")
	if o.engine == "kustomize" {
		// The build reads an agent.yaml beside the kustomization.yaml
		// into its deploy unit; kustomize itself never lists it.
		add("agent.yaml", initAgentFile(o, conns))
	} else {
		add("agents/"+o.agent+"/agent.yaml", initAgentFile(o, conns))
	}
	switch o.engine {
	case "flux":
		add("flux/gitrepository.yaml", initFluxSource)
		add("flux/agents.yaml", initFluxKustomization(
			"# Flux applies what keyhole render -o rendered writes (CI commits it).",
			"agents", path.Join(o.under, "rendered")))
		if o.secret == "external-secret" {
			add("flux/secrets.yaml", initFluxKustomization(
				"# Flux applies the ExternalSecrets as written: keyhole render's output\n# holds no Secret, nor what makes one.",
				"agents-secrets", path.Join(o.under, "secrets")))
		}
	case "argocd":
		add("argocd/application.yaml", initArgoApplication(o))
	case "kustomize":
		add("kustomization.yaml", initKustomization(resources, o.secret == "external-secret"))
	}
	return files, nil
}

func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// writeNew writes files under dir, each created afresh: when any of them
// exists, it writes none and names those that do. When a write fails, it
// removes what it wrote.
func writeNew(dir string, files []initFile) error {
	var exist []string
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(dir, f.name)); err == nil {
			exist = append(exist, filepath.Join(dir, f.name))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if len(exist) > 0 {
		return fmt.Errorf("not overwriting what is there, so nothing was written: %s", strings.Join(exist, ", "))
	}
	var written []string
	var made []string
	undo := func() {
		for _, p := range slices.Backward(written) {
			os.Remove(p)
		}
		for _, d := range slices.Backward(made) {
			os.Remove(d) // only when empty
		}
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
				break
			}
			made = append([]string{d}, made...)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			undo()
			return err
		}
		out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			undo()
			return err
		}
		written = append(written, p)
		_, werr := out.Write(f.data)
		if cerr := out.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			undo()
			return werr
		}
	}
	return nil
}

func initConfig(o initOptions) string {
	var b strings.Builder
	b.WriteString(`# keyhole's settings for this repository (docs/schema.md lists every field).
apiVersion: keyhole.dev/v1alpha1
kind: Config
# agent.yaml agents live in this namespace, where their connection labels
# name Connections.
namespace: ` + o.namespace + `
# The image agent.yaml agents' sandboxes run: put yours.
sandboxImage: registry.example.com/agent-sandbox:1.0.0
`)
	switch o.engine {
	default:
		b.WriteString(`# keyhole render -o rendered writes its output here: not an input.
exclude: [` + path.Join(o.under, "rendered") + `/]
`)
	case "flux":
		b.WriteString(`# Flux applies ` + path.Join(o.under, "rendered") + `/ (` + path.Join(o.under, "flux/agents.yaml") + `), which keyhole render
# writes from this repository (GitRepository agents-config, its root is here).
flux:
  sources:
    - kind: GitRepository
      name: agents-config
      path: .
  rendered: [` + path.Join(o.under, "rendered") + `]
`)
	}
	return b.String()
}

// secretName is the Secret a connector's Connection reads.
func secretName(c schema.Connector) string { return c.Name + "-credential" }

// basicUser is the user name a connector's git-style hosts take, "" when
// none takes basic auth alone or split from its API (splitAPI).
func basicUser(c schema.Connector) string {
	for _, h := range c.Hosts {
		if h.Inject.Basic != nil && (h.Inject.Header == nil || splitAPI(c.Name) != "") {
			return h.Inject.Basic.Username
		}
	}
	return ""
}

// splitAPI is the path prefix of the API of a connector whose host takes
// a header on its API and basic auth on git's smart-HTTP paths, "" for
// any other. Its Connection gets one entry of each form on the host, the
// header's rules under this prefix, the basic entry's on git's paths of
// one group, which the user names: a pattern of any group ("/*/*/info/refs")
// would also hold /api/v4/info/refs, a request both entries allow.
func splitAPI(name string) string {
	if name == "gitlab" {
		return "/api/v4" // GitLab's REST API; git over HTTPS wants user oauth2
	}
	return ""
}

// oneRepository returns a catalog rule of git's smart-HTTP paths in any
// repository ("/*/*/git-upload-pack") as path prefixes of one repository,
// named as a clone URL names it, with or without ".git". Patterns are
// keyhole's own proxy's; the omnia operator's Connection has prefixes
// only, so a rule written with them renders with every target. It
// reports false for a rule of other paths, which it leaves as it is.
func oneRepository(r schema.Rule) (schema.Rule, bool) {
	if len(r.PathPatterns) == 0 || len(r.PathPrefixes) > 0 {
		return r, false
	}
	var prefixes []string
	for _, p := range r.PathPatterns {
		tail, ok := strings.CutPrefix(p, "/*/*/")
		if !ok || strings.Contains(tail, "*") {
			return r, false
		}
		prefixes = append(prefixes, "/your-org/your-repo/"+tail, "/your-org/your-repo.git/"+tail)
	}
	r.PathPatterns = nil
	r.PathPrefixes = prefixes
	return r, true
}

// splitGitRules are the rules of a split host's basic entry: clone and
// fetch of the repositories of one group and its subgroups.
func splitGitRules() []schema.Rule {
	return []schema.Rule{
		{Methods: []string{"GET"}, PathPatterns: []string{"/your-group/*/info/refs", "/your-group/*/*/info/refs"}},
		{Methods: []string{"POST"}, PathPatterns: []string{"/your-group/*/git-upload-pack", "/your-group/*/*/git-upload-pack"}},
	}
}

// starterWrites are the writes a connector's use needs beyond its reads,
// for those whose calls are writes (a model call is a POST).
func starterWrites(name string) []schema.Rule {
	switch name {
	case "anthropic":
		return []schema.Rule{{Methods: []string{"POST"}, PathPrefixes: []string{"/v1/messages"}}}
	case "openai":
		return []schema.Rule{{Methods: []string{"POST"}, PathPrefixes: []string{"/v1/chat/completions", "/v1/embeddings", "/v1/responses"}}}
	case "linear":
		return []schema.Rule{{Methods: []string{"POST"}, PathPrefixes: []string{"/graphql"}}}
	}
	return nil
}

func initConnection(o initOptions, c schema.Connector) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# The %s connector's credential: the proxy puts it on requests to these
# hosts, only for the methods and paths the rules allow. The rules are a
# start: narrow them to what the agent needs (docs/connections.md).
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: %s
  namespace: %s
spec:
  hosts: [%s]
  credential:
    kind: secret
    secretRef:
      name: %s
  placement:
    inject:
`, c.Name, c.Name, o.namespace, strings.Join(connectorHosts(c), ", "), secretName(c))
	for i, h := range c.Hosts {
		if api := splitAPI(c.Name); api != "" && h.Inject.Header != nil && h.Inject.Basic != nil {
			hd := h.Inject.Header
			fmt.Fprintf(&b, `      # The API reads the token in %s; git over HTTPS reads it as
      # basic auth (user %s). One entry each, split by path: replace
      # your-group with the group whose repositories the agent clones
      # (docs/connections.md, "One host, two forms").
      - hosts: [%s]
        header: %s
        value: %q
        placeholderEnv: [%s]
        rules:
          - %s
      - hosts: [%s]
        basic: {usernameKey: user, passwordKey: token}
        rules:
`, hd.Name, h.Inject.Basic.Username, h.Host, hd.Name, hd.ValuePrefix+"{{ .token }}", c.Env,
				ruleFlow(schema.Rule{Methods: []string{"GET", "HEAD"}, PathPrefixes: []string{api}}), h.Host)
			for _, r := range splitGitRules() {
				b.WriteString("          - " + ruleFlow(r) + "\n")
			}
			continue
		}
		fmt.Fprintf(&b, "      - hosts: [%s]\n", h.Host)
		if hd := h.Inject.Header; hd != nil {
			fmt.Fprintf(&b, "        header: %s\n        value: %q\n", hd.Name, hd.ValuePrefix+"{{ .token }}")
		} else {
			b.WriteString("        basic: {usernameKey: user, passwordKey: token}\n")
		}
		if i == 0 {
			fmt.Fprintf(&b, "        placeholderEnv: [%s]\n", c.Env)
		}
		var rules []schema.Rule
		on, _ := c.ReadOnlyOn(h.Host)
		for _, r := range on {
			// A Connection's rules match method and path; the
			// catalog's conditions on a body are its own.
			if len(r.Body) == 0 && r.GraphQL == nil {
				rules = append(rules, r)
			}
		}
		rules = append(rules, starterWrites(c.Name)...)
		b.WriteString("        rules:\n")
		for _, r := range rules {
			if one, ok := oneRepository(r); ok {
				b.WriteString("          # git clone and fetch of one repository: replace your-org/your-repo\n")
				b.WriteString("          # with the one the agent clones, and add a rule for each other.\n")
				r = one
			}
			b.WriteString("          - " + ruleFlow(r) + "\n")
		}
	}
	return b.String()
}

func connectorHosts(c schema.Connector) []string {
	var hs []string
	for _, h := range c.Hosts {
		hs = append(hs, h.Host)
	}
	return hs
}

// ruleFlow writes a rule as one YAML flow mapping.
func ruleFlow(r schema.Rule) string {
	parts := []string{"methods: [" + strings.Join(r.Methods, ", ") + "]"}
	if len(r.PathPrefixes) > 0 {
		parts = append(parts, "pathPrefixes: ["+quoteAll(r.PathPrefixes)+"]")
	}
	if len(r.PathPatterns) > 0 {
		parts = append(parts, "pathPatterns: ["+quoteAll(r.PathPatterns)+"]")
	}
	if r.EncodedSlash != "" {
		parts = append(parts, "encodedSlash: "+r.EncodedSlash)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// quoteAll writes paths for a flow sequence: a path holding '*' is
// quoted, since YAML reads a leading '*' as an alias.
func quoteAll(paths []string) string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if strings.ContainsAny(p, "*") {
			out[i] = fmt.Sprintf("%q", p)
		} else {
			out[i] = p
		}
	}
	return strings.Join(out, ", ")
}

func initStandIn(o initOptions, c schema.Connector) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# A stand-in for the Secret connections/%s.yaml reads, so that keyhole
# checks its keys. .gitignore keeps this directory out of git: create the
# real Secret in the cluster (kubectl create secret generic %s
# -n %s%s --from-literal=token=...), or replace this file with a SealedSecret,
# an ExternalSecret or a SOPS-encrypted Secret with the same keys, which git
# may hold.
apiVersion: v1
kind: Secret
metadata:
  name: %s
  namespace: %s
type: Opaque
stringData:
`, c.Name, secretName(c), o.namespace, userLiteral(c), secretName(c), o.namespace)
	if u := basicUser(c); u != "" {
		fmt.Fprintf(&b, "  user: %s\n", u)
	}
	b.WriteString("  token: REPLACE-ME\n")
	return b.String()
}

// userLiteral is the kubectl flag that puts the basic-auth user name in
// the Secret, "" for a connector that takes none.
func userLiteral(c schema.Connector) string {
	if u := basicUser(c); u != "" {
		return " --from-literal=user=" + u
	}
	return ""
}

func initExternalSecret(o initOptions, c schema.Connector) string {
	var b strings.Builder
	fmt.Fprintf(&b, `---
# The Secret the Connection reads, made by external-secrets from the store
# %s: put the key your store holds the credential under.
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata:
  name: %s
  namespace: %s
spec:
  secretStoreRef:
    kind: ClusterSecretStore
    name: %s
  target:
    name: %s
`, o.store, secretName(c), o.namespace, o.store, secretName(c))
	if u := basicUser(c); u != "" {
		fmt.Fprintf(&b, "    template:\n      engineVersion: v2\n      mergePolicy: Merge\n      data:\n        user: %s\n", u)
	}
	fmt.Fprintf(&b, "  data:\n    - secretKey: token\n      remoteRef:\n        key: %s\n", secretName(c))
	return b.String()
}

func initSandboxClass(o initOptions, conns []schema.Connector) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# The sandbox the agent's code runs in, and the roles a Connection fills
# there: one per connector.
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: SandboxClass
metadata:
  name: workspace
  namespace: %s
spec:
  # The image the sandbox runs: put yours.
  image: registry.example.com/agent-workspace:1.0.0
  connections:
`, o.namespace)
	for _, c := range conns {
		fmt.Fprintf(&b, "    - role: %s\n      description: the %s connector's credential\n", c.Name, c.Name)
	}
	return b.String()
}

func initAgentRuntime(o initOptions, conns []schema.Connector) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: AgentRuntime
metadata:
  name: %s
  namespace: %s
spec:
  # The operator's own fields: the PromptPack the agent runs and how
  # clients reach it.
  promptPackRef:
    name: %s
  facades:
    - type: websocket
      port: 8080
  # keyhole's part: which Connection fills each role of the sandbox.
  sandbox:
    enabled: true
    connections:
`, o.agent, o.namespace, o.agent)
	for _, c := range conns {
		fmt.Fprintf(&b, "      - {sandbox: workspace, role: %s, connection: %s}\n", c.Name, c.Name)
	}
	return b.String()
}

func initAgentFile(o initOptions, conns []schema.Connector) string {
	var b strings.Builder
	// The agent's sandbox is bound in one place, its AgentRuntime
	// (agentruntime.yaml): a sandbox of agent.yaml's too would be a second
	// sandbox for the same agent under the kubernetes target, and under
	// the omnia target bindings that replace the AgentRuntime's
	// (OmniaAgentRuntimeBound).
	fmt.Fprintf(&b, `# The agent, as its platform reads it. Its sandbox is the one its
# AgentRuntime (agentruntime.yaml) binds the Connections in: code it runs
# there finds a placeholder in each connector's variable, which the proxy
# replaces with the credential on the way out.
name: %s
mode: text
llm: default
connectors:
`, o.agent)
	for _, c := range conns {
		fmt.Fprintf(&b, "  - name: %s\n    connection: %s\n", c.Name, c.Name)
	}
	return b.String()
}

const initFluxSource = `# The repository Flux reads: put yours.
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: agents-config
  namespace: flux-system
spec:
  interval: 1m
  url: https://git.example.com/your-org/agents-config.git
  ref:
    branch: main
`

// initFluxKustomization is a Flux Kustomization, name, that applies dir
// from the agents-config GitRepository, headed by comment (its lines
// begin with "# ").
func initFluxKustomization(comment, name, dir string) string {
	return comment + `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: ` + name + `
  namespace: flux-system
spec:
  interval: 10m
  sourceRef:
    kind: GitRepository
    name: agents-config
  path: ./` + dir + `
  prune: true
`
}

func initArgoApplication(o initOptions) string {
	return `# Argo CD renders this repository with keyhole's config management
# plugin (examples/argocd in keyhole's repository: plugin.yaml, version
# v0.1.0) and applies the result; its second source applies the
# ExternalSecrets as written, since keyhole's render holds no Secret.
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: agents
  namespace: argocd
spec:
  project: default
  sources:
    - repoURL: https://git.example.com/your-org/agents-config.git
      targetRevision: main
      path: ` + o.under + `
      plugin:
        name: keyhole-v0.1.0
    - repoURL: https://git.example.com/your-org/agents-config.git
      targetRevision: main
      path: ` + path.Join(o.under, "secrets") + `
  destination:
    server: https://kubernetes.default.svc
    namespace: ` + o.namespace + `
  syncPolicy:
    automated:
      prune: true
      selfHeal: true
`
}

func initKustomization(resources []string, externalSecrets bool) string {
	var b strings.Builder
	b.WriteString(`# keyhole builds this directory as kustomize does; kubectl apply -k applies
# keyhole render's output, not these inputs.
`)
	if externalSecrets {
		b.WriteString(`# keyhole's render holds no Secret, nor what makes one: apply the
# ExternalSecrets under secrets/ as written (kubectl apply -f secrets/).
`)
	}
	b.WriteString(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
`)
	for _, r := range resources {
		fmt.Fprintf(&b, "  - %s\n", r)
	}
	return b.String()
}
