package render

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
)

// OmniaDir is the directory, inside the output, that holds the omnia
// target's objects: omnia/<namespace>/<kind>-<name>.yaml.
const OmniaDir = "omnia"

// Codes of the omnia target's render-time diagnostics.
const (
	codeOmniaRuleDropped         = "OmniaRuleDropped"
	codeOmniaReadOnlyUnexpressed = "OmniaReadOnlyUnexpressible"
	codeOmniaBasicUsernameMiss   = "OmniaBasicUsernameMissing"
	codeOmniaClassRoleMissing    = "OmniaClassRoleMissing"
	codeOmniaNameTaken           = "OmniaNameTaken"
	codeOmniaRuntimeMissing      = "OmniaAgentRuntimeMissing"
	codeOmniaRuntimeBound        = "OmniaAgentRuntimeBound"
	codeOmniaSandboxUnsupported  = "OmniaSandboxUnsupported"
	codeOmniaPathPatterns        = "OmniaPathPatternsUnsupported"
	codeOmniaEncodedSlash        = "OmniaEncodedSlashUnsupported"
	codeOmniaWebSocket           = "OmniaWebSocketUnsupported"
	codeOmniaHTTP2Host           = "OmniaHTTP2HostUnsupported"
	codeOmniaMCP                 = "OmniaMCPUnsupported"
	codeOmniaConnectorWritable   = "OmniaConnectorWritable"
	codeOmniaCredentialKind      = "OmniaCredentialKindUnsupported"
	codeOmniaHostSplit           = "OmniaHostSplitUnsupported"
	codeOmniaAudit               = "OmniaAuditUnsupported"
)

// OmniaRules describes the omnia target's diagnostic codes, for docs and
// SARIF. They are render-time findings, not rows of the compiler's check
// table: they concern only what the operator's resources can express.
func OmniaRules() []diag.Rule {
	return []diag.Rule{
		{Code: codeOmniaRuleDropped, Severity: diag.Warning,
			Purpose: "A catalog read-only rule uses path patterns, `encodedSlash` or a body, GraphQL or MCP condition, which an omnia Connection cannot express; it is left out and the operator's proxy refuses what it allowed.",
			Help:    "Keep the default kubernetes target for what the rule allowed (git clone over HTTPS, Git LFS downloads, GraphQL reads)."},
		{Code: codeOmniaReadOnlyUnexpressed, Severity: diag.Error,
			Purpose: "None of the read-only rules that hold on one of a connector's hosts can be expressed, and a Connection entry without rules would let every request through.",
			Help:    "Give the connector a rule of methods and path prefixes in keyhole.yaml's catalog, or keep the kubernetes target."},
		{Code: codeOmniaBasicUsernameMiss, Severity: diag.Warning,
			Purpose: "A connector host takes basic auth but the labelled Connection has no basic entry for it to take the user name key from; the host is left out.",
			Help:    "Add a basic entry for the host to the labelled Connection."},
		{Code: codeOmniaClassRoleMissing, Severity: diag.Error,
			Purpose: "The input's SandboxClass named after an agent's sandbox provider does not declare the role an agent connector binds.",
			Help:    "Add the connector's name as a role to the SandboxClass's spec.connections."},
		{Code: codeOmniaNameTaken, Severity: diag.Error,
			Purpose: "An object the omnia target compiles from an agent has the name of an input object or of another compiled object.",
			Help:    "Rename the agent, or the object in the way."},
		{Code: codeOmniaRuntimeMissing, Severity: diag.Error,
			Purpose: "An agent.yaml agent with a sandbox has no AgentRuntime of its name in its namespace in the input. The operator runs an agent from its AgentRuntime, whose required `promptPackRef` and `facades` keyhole cannot invent, so the agent's sandbox bindings have nowhere to go.",
			Help:    "Add the agent's AgentRuntime (same name, same namespace, without spec.sandbox) to the repository; the omnia target fills in its spec.sandbox."},
		{Code: codeOmniaRuntimeBound, Severity: diag.Error,
			Purpose: "The AgentRuntime an agent.yaml agent composes with already has a spec.sandbox; the agent's bindings would replace it.",
			Help:    "Bind the sandbox in one place: remove spec.sandbox from the AgentRuntime, or the sandbox connectors from agent.yaml."},
		{Code: codeOmniaPathPatterns, Severity: diag.Error,
			Purpose: "A Connection's rule uses pathPatterns, which keyhole's own proxy enforces but the operator's Connection does not have: the operator would drop them and its proxy refuse what they allow.",
			Help:    "Write the rule with pathPrefixes for the omnia target, or keep the default kubernetes target (or agent-sandbox), whose proxy matches patterns."},
		{Code: codeOmniaEncodedSlash, Severity: diag.Error,
			Purpose: "A Connection's rule sets `encodedSlash`, which keyhole's own proxy enforces but the operator's Connection does not have: the operator would drop it and its proxy match the rule's paths without it, refusing what it allows (npm's scoped package documents, a GitLab project named by its path) or reading a prefix that spells `%2F` otherwise.",
			Help:    "Keep the default kubernetes target (or agent-sandbox), whose proxy reads the field; for the omnia target, allow `GET` and `HEAD` under a prefix above the names (`/` for an npm registry), or name GitLab projects by their numeric IDs."},
		{Code: codeOmniaCredentialKind, Severity: diag.Error,
			Purpose: "A Connection's credential is of a kind only keyhole's own proxy uses (`githubApp`, `oauth2` or `googleServiceAccount`, which it mints tokens from, or `awsSigV4`, which it signs requests with), which the operator's Connection does not have: its `credential.kind` takes a Secret only, so its proxy would inject nothing, or the root material (an App's private key, a client's secret, a service account's key); and it says a credential that signs requests cannot be injected.",
			Help:    "Keep the default kubernetes target (or agent-sandbox), whose proxy mints the tokens and signs the requests; for the omnia target, use kind `secret` with a token of the scope you choose, or place an AWS key in the sandbox with `env` or `files`."},
		{Code: codeOmniaHostSplit, Severity: diag.Error,
			Purpose: "Two inject entries of a Connection cover one host, splitting its credential's forms by rule (a header on the API, basic auth on git's smart-HTTP paths), which keyhole's own proxy enforces but the operator's Connection does not have: its host takes one injection, so its proxy would send one form on every path, or refuse the Connection.",
			Help:    "Keep the default kubernetes target (or agent-sandbox), whose proxy chooses the form by the rule a request matches; for the omnia target, give the host one entry, the form of the requests the sandbox needs (basic auth for git over HTTPS, the header for the API)."},
		{Code: codeOmniaAudit, Severity: diag.Error,
			Purpose: "A Connection sets `spec.enforcement: audit`, which keyhole's own proxy enforces but the operator's Connection does not have: the operator would drop it and its proxy refuse what the rules miss, or, were the field carried, a user would believe the Connection audited where nothing does.",
			Help:    "Keep the default kubernetes target (or agent-sandbox), whose proxy has audit mode, for the rollout; for the omnia target, set `enforcement: enforce` or remove the field."},
		{Code: codeOmniaWebSocket, Severity: diag.Error,
			Purpose: "A Connection's rule sets `websocket: true`, which keyhole's own proxy enforces but the operator's Connection does not have: the operator would drop it, and the WebSocket the rule allows would never open through its proxy.",
			Help:    "Keep the default kubernetes target (or agent-sandbox), whose proxy relays WebSockets on the paths a rule allows."},
		{Code: codeOmniaHTTP2Host, Severity: diag.Error,
			Purpose: "A Connection's host speaks only HTTP/2 (a gRPC endpoint: a `grpc.` host, or one under `grpc.io`), which keyhole's own proxy serves but the operator's does not: its proxy speaks HTTP/1.1 to the sandbox, so a gRPC client fails against the host.",
			Help:    "Keep the default kubernetes target (or agent-sandbox), whose proxy speaks HTTP/2 and gRPC to injected hosts; for the omnia target, place the credential with `env` or `files`."},
		{Code: codeOmniaMCP, Severity: diag.Error,
			Purpose: "A Connection's rule has an `mcp` condition, which keyhole's own proxy enforces but the operator's Connection does not have: the operator would drop it, and the rule would let every MCP tool through, or its proxy refuse them all.",
			Help:    "Keep the default kubernetes target (or agent-sandbox), whose proxy holds MCP requests to the tools a rule lists."},
		{Code: codeOmniaConnectorWritable, Severity: diag.Error,
			Purpose: "An agent.yaml connector says `read_only: false`; the omnia target compiles an agent's connectors into Connections with the catalog's read-only rules, and has no way to carry the Connection's own rules instead.",
			Help:    "Bind the Connection from the agent's AgentRuntime (`spec.sandbox.connections`), or keep the default kubernetes target."},
		{Code: codeOmniaSandboxUnsupported, Severity: diag.Error,
			Purpose: "The declared operator version has no sandbox feature, so it cannot take a Connection, a SandboxClass or an agent's sandbox bindings.",
			Help:    "Declare an operator version that serves the sandbox feature, or keep the default kubernetes target, whose own egress proxy needs no operator."},
	}
}

func omniaSeverity(code string) diag.Severity { return diag.SeverityOf(OmniaRules(), code) }

// isOmniaKind reports whether the omnia target emits objects of kind.
func isOmniaKind(kind string) bool {
	switch kind {
	case "Connection", "SandboxClass", "AgentRuntime", "ToolRegistry":
		return true
	}
	return false
}

// dnsSubdomain is a Kubernetes object name, which the file name embeds.
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// omniaObject is one object the omnia target writes.
type omniaObject struct {
	kind, namespace, name string
	o                     obj
	// src says where the object comes from, for diagnostics.
	src diag.Object
	pos diag.Pos
	// compiled is true for an object compiled from an agent rather than
	// read from the input.
	compiled bool
}

func (o omniaObject) path() string {
	return path.Join(OmniaDir, o.namespace, strings.ToLower(o.kind)+"-"+o.name+".yaml")
}

// omniaKustomizationHeader heads the omnia target's kustomization.yaml.
const omniaKustomizationHeader = `# Rendered by keyhole render --target omnia: the omnia.altairalabs.ai
# resources, for a cluster whose operator runs the sandboxes.
# AgentRuntime and ToolRegistry are the operator's kinds, served by its own
# CRDs; Connection and SandboxClass by keyhole's (keyhole schema --crds).
# Secrets are never rendered: they hold values. The cluster gets each
# Secret a Connection names from its SealedSecret, ExternalSecret or kubectl.
`

// RenderOmnia renders p as omnia.altairalabs.ai resources: the input's
// Connection, SandboxClass, AgentRuntime and ToolRegistry objects,
// normalized, plus what each agent.yaml agent with a sandbox compiles
// into (a SandboxClass per provider, a Connection per sandbox connector,
// an AgentRuntime per agent). No Secret is emitted. The diagnostics say
// what the operator's resources cannot express; when they hold an error
// no files are returned.
func RenderOmnia(p compiler.Plan, opts Options) ([]File, diag.List, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	if len(p.Objects) == 0 && len(p.Agents) == 0 {
		return nil, nil, fmt.Errorf("%w: the input has no omnia object and no agent with a sandbox", ErrEmpty)
	}
	op := p.Operator
	if op.Version == "" {
		op = schema.DefaultOperator() // a Plan built without one
	}
	r := omniaRender{opts: opts, op: op, taken: map[string]diag.Object{}, classes: map[string]*omniaObject{}}
	for _, o := range p.Objects {
		if err := r.input(o); err != nil {
			return nil, nil, err
		}
	}
	for _, a := range p.Agents {
		if err := r.agent(a); err != nil {
			return nil, nil, err
		}
	}
	r.diags.Sort()
	if r.diags.HasErrors() {
		return nil, r.diags, nil
	}
	var files []File
	var resources []string
	for _, o := range r.objs {
		data, err := encodeObject(o.o)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s/%s: %w", o.kind, o.namespace, o.name, err)
		}
		files = append(files, File{Path: o.path(), Data: data})
		resources = append(resources, o.path())
	}
	files, err = withKustomization(files, omniaKustomizationHeader, resources)
	if err != nil {
		return nil, nil, err
	}
	return files, r.diags, nil
}

// omniaRender is the state of one omnia render.
type omniaRender struct {
	opts Options
	// op is the operator the input was checked for.
	op    schema.Operator
	objs  []*omniaObject
	diags diag.List
	// taken maps each written path to the object that took it.
	taken map[string]diag.Object
	// classes maps namespace/name to each SandboxClass, input or compiled.
	classes map[string]*omniaObject
}

func (r *omniaRender) report(code string, src diag.Object, pos diag.Pos, format string, args ...any) {
	r.diags = append(r.diags, diag.Diagnostic{Code: code, Severity: omniaSeverity(code), Pos: pos, Object: src, Message: fmt.Sprintf(format, args...)})
}

// add records an object, reporting a name already taken. ok is false
// when it was.
func (r *omniaRender) add(o *omniaObject) (bool, error) {
	if !dnsSubdomain.MatchString(o.name) || len(o.name) > 253 {
		return false, fmt.Errorf("%w: %s %q is not a valid object name", ErrInvalidPlan, o.kind, o.name)
	}
	if !dnsLabel.MatchString(o.namespace) || len(o.namespace) > 63 {
		return false, fmt.Errorf("%w: %s %s: namespace %q is not a DNS label", ErrInvalidPlan, o.kind, o.name, o.namespace)
	}
	p := o.path()
	if prev, ok := r.taken[p]; ok {
		r.report(codeOmniaNameTaken, o.src, o.pos, "%s %s/%s would be written for %s, but %s already has that name",
			o.kind, o.namespace, o.name, o.src, prev)
		return false, nil
	}
	r.taken[p] = o.src
	r.objs = append(r.objs, o)
	if o.kind == "SandboxClass" {
		r.classes[o.namespace+"/"+o.name] = o
	}
	return true, nil
}

// input normalizes one input object: apiVersion, kind, the reduced
// metadata and the spec, which the schema has already closed where
// keyhole owns it; the operator's open spec fields are carried unchanged.
// status is the operator's to write and is dropped.
func (r *omniaRender) input(in compiler.Object) error {
	if !isOmniaKind(in.Source.Kind) {
		return nil
	}
	node, err := in.Tree()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidPlan, in.Source, err)
	}
	if node == nil {
		return nil
	}
	if !r.op.Sandbox && (in.Source.Kind == "Connection" || in.Source.Kind == "SandboxClass") {
		r.report(codeOmniaSandboxUnsupported, in.Source, in.Pos,
			"%s has no sandbox feature and serves no %s; keep the default kubernetes target for it, whose egress proxy needs no operator, or declare an operator version that serves the sandbox feature",
			r.op, in.Source.Kind)
		return nil
	}
	raw, spec, err := decodeInput(in, node)
	if err != nil {
		return err
	}
	if in.Source.Kind == "Connection" {
		sp, _ := spec.(obj)
		switch kind, _ := at(sp, "credential")["kind"].(string); {
		case kind == compiler.CredentialKindAWSSigV4:
			r.report(codeOmniaCredentialKind, in.Source, in.Pos,
				"credential kind %s is keyhole's: the operator's Connection has only kind secret, and says a credential that signs requests (AWS SigV4) cannot be injected, so its proxy would not sign them; keep the default kubernetes target, or place the key in the sandbox with env or files", kind)
		case kind != "" && kind != compiler.CredentialKindSecret:
			r.report(codeOmniaCredentialKind, in.Source, in.Pos,
				"credential kind %s is keyhole's: the operator's Connection has only kind secret, so its proxy would not mint the token; keep the default kubernetes target, or use kind secret", kind)
		}
		for _, h := range items(sp, "hosts") {
			if name, _ := h.(string); compiler.HTTP2OnlyHost(name) {
				r.report(codeOmniaHTTP2Host, in.Source, in.Pos,
					"%s speaks only HTTP/2 (gRPC), which the operator's proxy does not speak to the sandbox: a gRPC client would fail against it; keep the default kubernetes target, whose proxy speaks HTTP/2, or place the credential with env or files", name)
			}
		}
		if e, _ := sp["enforcement"].(string); e == compiler.EnforcementAudit {
			r.report(codeOmniaAudit, in.Source, in.Pos,
				"spec.enforcement: audit is keyhole's: the operator's Connection has no audit mode, so its proxy would refuse what the rules miss instead of forwarding it without the credential; keep the default kubernetes target for the rollout, or set enforcement: enforce")
		}
		injectedBy := map[string]int{}
		for i, entry := range items(at(sp, "placement"), "inject") {
			e, _ := entry.(obj)
			for _, h := range items(e, "hosts") {
				name, _ := h.(string)
				if k, ok := injectedBy[name]; ok && k != i {
					r.report(codeOmniaHostSplit, in.Source, in.Pos,
						"inject entries %d and %d both cover %s, splitting its credential's forms by rule, which the operator's Connection does not have: its host takes one injection; keep the default kubernetes target, or give the host one form", k, i, name)
					continue
				}
				injectedBy[name] = i
			}
			for j, rule := range items(e, "rules") {
				ru, _ := rule.(obj)
				if len(items(ru, "pathPatterns")) > 0 {
					r.report(codeOmniaPathPatterns, in.Source, in.Pos,
						"inject entry %d, rule %d uses pathPatterns, which the operator's Connection does not have: its proxy would drop them and refuse what they allow; write the rule with pathPrefixes, or keep the default kubernetes target", i, j)
				}
				if _, ok := ru["encodedSlash"]; ok {
					r.report(codeOmniaEncodedSlash, in.Source, in.Pos,
						"inject entry %d, rule %d sets encodedSlash, which the operator's Connection does not have: its proxy would drop it and match the rule's paths without it, refusing what it allows; keep the default kubernetes target, or allow GET and HEAD under a prefix above the names", i, j)
				}
				if _, ok := ru["mcp"]; ok {
					r.report(codeOmniaMCP, in.Source, in.Pos,
						"inject entry %d, rule %d has an mcp condition, which the operator's Connection does not have: the operator would drop it and let every tool of the MCP server through; keep the default kubernetes target", i, j)
				}
				if ws, _ := ru["websocket"].(bool); ws {
					r.report(codeOmniaWebSocket, in.Source, in.Pos,
						"inject entry %d, rule %d sets websocket: true, which the operator's Connection does not have: the operator would drop it and the WebSocket would never open; keep the default kubernetes target", i, j)
				}
			}
		}
	}
	ns := cmp.Or(in.Source.Namespace, r.opts.DefaultNamespace)
	o := carried(in, schema.Group, in.Source.Kind, ns, raw, spec)
	_, err = r.add(&omniaObject{kind: in.Source.Kind, namespace: ns, name: in.Source.Name, o: o, src: in.Source, pos: in.Pos})
	return err
}
