package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/engines"
	"keyhole.dev/keyhole/source/fixture"
)

// goldenOmniaDir holds the omnia target's expected renders, apart from
// golden/, whose directories WriteDir replaces whole.
const goldenOmniaDir = "../golden-omnia"

// loadOmniaCRDs compiles the CRDs an omnia cluster serves into a
// validator per kind, made strict like the API server's field validation:
// keyhole's own (schema.CRDs: Connection, SandboxClass) and the
// operator's, as published (schema.OperatorCRDs: AgentRuntime,
// ToolRegistry), converted here independently of the check's own
// converter.
var loadOmniaCRDs = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft4
	operator, err := schema.OperatorCRDs(schema.OperatorVersions()[0])
	if err != nil {
		return nil, err
	}
	kinds := map[string]string{}
	for _, stream := range [][]byte{schema.CRDs(), operator} {
		dec := yaml.NewDecoder(bytes.NewReader(stream))
		for {
			var crd crdDoc
			if err := dec.Decode(&crd); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, err
			}
			ids, err := addCRD(c, "crd/"+crd.Spec.Names.Kind, &crd)
			if err != nil {
				return nil, err
			}
			for gvk, id := range ids {
				if _, dup := kinds[gvk]; dup {
					return nil, fmt.Errorf("two CRDs define %s", gvk)
				}
				kinds[gvk] = id
			}
		}
	}
	out := map[string]*jsonschema.Schema{}
	for gvk, id := range kinds {
		s, err := c.Compile(id)
		if err != nil {
			return nil, fmt.Errorf("compiling %s: %w", gvk, err)
		}
		out[gvk] = s
	}
	if len(out) != 4 {
		return nil, fmt.Errorf("keyhole's and the operator's CRDs define %d kinds, want 4", len(out))
	}
	return out, nil
})

// validateOmnia checks one emitted object against the CRD of its kind.
// With sandbox, an operator kind's spec.sandbox (the sandbox feature,
// which no published operator CRD declares yet) is taken out first, so
// that everything else must pass the operator's CRD as published;
// without it, the object must pass as it is.
func validateOmnia(data []byte, sandbox bool) error {
	crds, err := loadOmniaCRDs()
	if err != nil {
		return err
	}
	o, v, err := jsonValue(data)
	if err != nil {
		return err
	}
	apiVersion, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	sch := crds[apiVersion+"/"+kind]
	if sch == nil {
		return fmt.Errorf("no CRD for %s %s", apiVersion, kind)
	}
	if sandbox && (kind == "AgentRuntime" || kind == "ToolRegistry") {
		if spec, ok := v.(map[string]any)["spec"].(map[string]any); ok {
			delete(spec, "sandbox")
		}
	}
	return sch.Validate(v)
}

// mustRenderTarget renders p for a target other than kubernetes (render
// is RenderOmnia or RenderAgentSandbox) with default options, and fails
// on an error or a render-time error diagnostic.
func mustRenderTarget(t *testing.T, render func(compiler.Plan, Options) ([]File, diag.List, error), p compiler.Plan) ([]File, diag.List) {
	t.Helper()
	files, ds, err := render(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.HasErrors() {
		t.Fatalf("render-time errors:\n%v", ds)
	}
	return files, ds
}

// renderTargetTwice compiles the example dir and renders it for a target
// other than kubernetes, twice, failing unless both are the same bytes.
func renderTargetTwice(t *testing.T, render func(compiler.Plan, Options) ([]File, diag.List, error), dir string) []File {
	t.Helper()
	return renderTwice(t, func() []File {
		files, _ := mustRenderTarget(t, render, compileDir(t, dir))
		return files
	})
}

// compileBack compiles the emitted objects, with the Secrets of the
// example they came from (the omnia target never emits a Secret), as
// keyhole check does, and fails on any error or warning.
func compileBack(t *testing.T, exampleDir string, files []File) compiler.Result {
	t.Helper()
	var docs []*source.Document
	for _, f := range files {
		if f.Path == "kustomization.yaml" {
			continue
		}
		ds, diags := source.Parse(f.Path, f.Data)
		if len(diags) > 0 {
			t.Fatalf("%s: %v", f.Path, diags)
		}
		docs = append(docs, ds...)
	}
	in, _, err := source.Load([]string{exampleDir}, source.Options{Engines: engines.All()})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range in {
		if d.Node != nil && d.Object().Kind == "Secret" {
			docs = append(docs, d)
		}
	}
	v := fixture.Validator(t)
	res := compiler.Compile(docs, v, compiler.Options{})
	// The omnia target's own findings are its render-time warnings; what
	// it emits must check without any, errors or warnings.
	if res.Diagnostics.HasErrors() || res.Diagnostics.Count(diag.Warning) > 0 {
		t.Fatalf("the emitted objects do not check clean:\n%v", res.Diagnostics)
	}
	return res
}

// TestOmniaGolden renders every example with the omnia target, compares
// it with golden-omnia/<example>/ (KEYHOLE_UPDATE=1 rewrites it), renders
// twice identically, validates every object against keyhole's CRDs or,
// for the operator's kinds, the operator's published CRDs, and compiles
// the objects back, clean (which checks the operator's kinds against its
// CRDs again, CEL rules included).
func TestOmniaGolden(t *testing.T) {
	for _, ex := range examples(t) {
		t.Run(ex, func(t *testing.T) {
			dir := filepath.Join(examplesDir, ex)
			files := renderTargetTwice(t, RenderOmnia, dir)
			n := 0
			for _, f := range files {
				if f.Path == "kustomization.yaml" {
					continue
				}
				if !strings.HasPrefix(f.Path, OmniaDir+"/") {
					t.Errorf("%s is outside %s/", f.Path, OmniaDir)
				}
				if err := validateOmnia(f.Data, true); err != nil {
					t.Errorf("%s: %v", f.Path, err)
				}
				n++
			}
			if n == 0 {
				t.Fatal("no object emitted")
			}
			compileBack(t, dir, files)
			out := filepath.Join(goldenOmniaDir, ex)
			checkDir(t, out, files)
		})
	}
}

// TestOmniaAgentExample: the example agent.yaml compiles into the
// Connection, SandboxClass and AgentRuntime docs/render.md names; compiled back, the
// sandbox holds GITHUB_TOKEN as the operator's placeholder for that
// Connection, and its proxy injects only the read-only rules.
func TestOmniaAgentExample(t *testing.T) {
	dir := filepath.Join(examplesDir, "agent-sandbox")
	files, ds := mustRenderTarget(t, RenderOmnia, compileDir(t, dir))
	objs := objects(t, files)
	conn := find(t, objs, "Connection", "support-github")
	class := find(t, objs, "SandboxClass", "daytona")
	rt := find(t, objs, "AgentRuntime", "support")
	if got := conn["spec"].(obj)["credential"].(obj)["secretRef"].(obj)["name"]; got != "company-github-token" {
		t.Errorf("secretRef.name = %v", got)
	}
	if got := fmt.Sprint(class["spec"].(obj)["connections"]); got != "[map[role:github]]" {
		t.Errorf("SandboxClass roles = %s", got)
	}
	want := "[map[connection:support-github role:github sandbox:daytona]]"
	if got := fmt.Sprint(rt["spec"].(obj)["sandbox"].(obj)["connections"]); got != want {
		t.Errorf("AgentRuntime bindings = %s, want %s", got, want)
	}
	codes := map[string]int{}
	for _, d := range ds {
		codes[d.Code]++
		if d.Severity != diag.Warning {
			t.Errorf("%v is not a warning", d)
		}
	}
	if codes[codeOmniaRuleDropped] != 3 || len(ds) != 3 {
		t.Errorf("diagnostics = %v, want three OmniaRuleDropped (git-upload-pack, LFS batch, GraphQL queries)", ds)
	}
	if !strings.Contains(ds.Error(), "git clone and fetch over HTTPS will be refused") {
		t.Errorf("no diagnostic says git clone is refused:\n%v", ds)
	}
	res := compileBack(t, dir, files)
	var sb *compiler.Sandbox
	for i := range res.Plan.Sandboxes {
		if res.Plan.Sandboxes[i].Name == "support-daytona" {
			sb = &res.Plan.Sandboxes[i]
		}
	}
	if sb == nil {
		t.Fatalf("compiled back, no sandbox support-daytona: %+v", res.Plan.Sandboxes)
	}
	if len(sb.Env) != 1 || sb.Env[0].Name != "GITHUB_TOKEN" || sb.Env[0].Value != "omnia-injected-support-github" {
		t.Errorf("env = %+v, want GITHUB_TOKEN=omnia-injected-support-github", sb.Env)
	}
	for _, h := range sb.Proxy.Hosts {
		if len(h.Rules) != 1 || !slices.Equal(h.Rules[0].Methods, []string{"GET", "HEAD"}) {
			t.Errorf("host %s rules = %+v, want GET, HEAD only", h.Name, h.Rules)
		}
	}
	if len(sb.Proxy.Hosts) != 3 {
		t.Errorf("hosts = %+v, want the catalog's three", sb.Proxy.Hosts)
	}
}

// TestOmniaNoSecret: no example's Secret is emitted, nor its canary
// value, in the files, the stream or the written directory; the
// kustomization says why.
func TestOmniaNoSecret(t *testing.T) {
	noSecretRendered(t, RenderOmnia, func(t *testing.T, files []File) {
		if k := fileMap(files)["kustomization.yaml"]; !bytes.Contains(k, []byte("Secrets are never rendered")) {
			t.Errorf("kustomization.yaml does not say Secrets are left out:\n%s", k)
		}
	})
}

// omniaConn is a labelled Connection for the diagnostics tests.
func omniaConn(usernameKeys map[string]string, readOnly []schema.Rule) compiler.AgentConnector {
	catalog, err := schema.Catalog()
	if err != nil {
		panic(err)
	}
	c := catalog["github"]
	if readOnly != nil {
		c.ReadOnly = readOnly
	}
	return compiler.AgentConnector{
		Name: "github", Connector: c, Connection: diag.Object{Kind: "Connection", Namespace: "agents", Name: "company"},
		SecretName: "company-github-token", Key: "token", UsernameKeys: usernameKeys,
	}
}

func omniaAgent(name string, conns ...compiler.AgentConnector) compiler.Agent {
	return compiler.Agent{Name: name, Namespace: "agents", Sandbox: "daytona", Connectors: conns,
		Source: diag.Object{Kind: "Agent", Name: name}, Pos: diag.Pos{File: "agents/" + name + "/agent.yaml", Line: 1, Column: 1}}
}

// inputObject parses one YAML object into a Plan object.
func inputObject(t *testing.T, src string) compiler.Object {
	t.Helper()
	docs, ds := source.Parse("in.yaml", []byte(src))
	if len(ds) > 0 || len(docs) != 1 {
		t.Fatalf("parsing %q: %v", src, ds)
	}
	return compiler.Object{Source: docs[0].Object(), Pos: docs[0].Pos, Node: docs[0].Node}
}

// agentRuntime is the input AgentRuntime an agent named name composes
// with: the operator's required fields, no spec.sandbox.
func agentRuntime(t *testing.T, name string) compiler.Object {
	t.Helper()
	return inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: AgentRuntime\nmetadata: {name: "+name+", namespace: agents}\n"+
		"spec: {promptPackRef: {name: "+name+"}, facades: [{type: websocket}]}\n")
}

// TestOmniaDiagnostics: each render-time finding, by code and severity;
// an error means no files.
func TestOmniaDiagnostics(t *testing.T) {
	basic := map[string]string{"github.com": "user"}
	tests := map[string]struct {
		plan  func(t *testing.T) compiler.Plan
		codes []string
	}{
		"clean when the rules are all expressible": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{agentRuntime(t, "a")}, Agents: []compiler.Agent{omniaAgent("a", omniaConn(basic, []schema.Rule{{Methods: []string{"GET"}, PathPrefixes: []string{"/"}}}))}}
			},
		},
		"git, LFS and GraphQL rules dropped": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{agentRuntime(t, "a")}, Agents: []compiler.Agent{omniaAgent("a", omniaConn(basic, nil))}}
			},
			codes: []string{codeOmniaRuleDropped, codeOmniaRuleDropped, codeOmniaRuleDropped},
		},
		"a Connection's path patterns": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"+
					"spec: {hosts: [api.github.com], credential: {kind: secret, secretRef: {name: s}}, placement: {inject: [{hosts: [api.github.com], header: Authorization, value: 'Bearer {{ .token }}', "+
					"rules: [{methods: [GET], pathPrefixes: [/user]}, {methods: [GET], pathPatterns: [/repos/acme/*/issues]}]}]}}\n")}}
			},
			codes: []string{codeOmniaPathPatterns},
		},
		"a Connection's GitHub App credential": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"+
					"spec: {hosts: [api.github.com], credential: {kind: githubApp, secretRef: {name: s}, githubApp: {appId: 1, installationId: 2}}, placement: {inject: [{hosts: [api.github.com], "+
					"rules: [{methods: [GET], pathPrefixes: [/repos/acme/widgets/pulls]}]}]}}\n")}}
			},
			codes: []string{codeOmniaCredentialKind},
		},
		"a Connection's OAuth 2.0 credential": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"+
					"spec: {hosts: [api.acme.example, auth.acme.example], credential: {kind: oauth2, secretRef: {name: s}, oauth2: {tokenUrl: 'https://auth.acme.example/token'}}, placement: {inject: [{hosts: [api.acme.example]}]}}\n")}}
			},
			codes: []string{codeOmniaCredentialKind},
		},
		"a Connection's Google service account credential": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"+
					"spec: {hosts: [storage.googleapis.com, oauth2.googleapis.com], credential: {kind: googleServiceAccount, secretRef: {name: s}, googleServiceAccount: {scopes: [openid]}}, placement: {inject: [{hosts: [storage.googleapis.com]}]}}\n")}}
			},
			codes: []string{codeOmniaCredentialKind},
		},
		"a Connection's encodedSlash": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"+
					"spec: {hosts: [registry.npmjs.org], credential: {kind: secret, secretRef: {name: s}}, placement: {inject: [{hosts: [registry.npmjs.org], header: Authorization, value: 'Bearer {{ .token }}', "+
					"rules: [{methods: [GET], pathPrefixes: [/@acme]}, {methods: [GET], encodedSlash: segment, pathPrefixes: ['/@acme%2Fwidgets']}]}]}}\n")}}
			},
			codes: []string{codeOmniaEncodedSlash},
		},
		"a Connection's host split between two forms": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"+
					"spec: {hosts: [gitlab.acme.dev], credential: {kind: secret, secretRef: {name: s}}, placement: {inject: ["+
					"{hosts: [gitlab.acme.dev], header: PRIVATE-TOKEN, value: '{{ .token }}', rules: [{methods: [GET], pathPrefixes: [/api/v4]}]}, "+
					"{hosts: [gitlab.acme.dev], basic: {usernameKey: user, passwordKey: token}, rules: [{methods: [GET], pathPrefixes: [/acme/widgets.git/info/refs]}, {methods: [POST], pathPrefixes: [/acme/widgets.git/git-upload-pack]}]}]}}\n")}}
			},
			codes: []string{codeOmniaHostSplit},
		},
		"a Connection's websocket": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"+
					"spec: {hosts: [api.openai.com], credential: {kind: secret, secretRef: {name: s}}, placement: {inject: [{hosts: [api.openai.com], header: Authorization, value: 'Bearer {{ .token }}', "+
					"rules: [{methods: [GET], pathPrefixes: [/v1/models]}, {methods: [GET], pathPrefixes: [/v1/realtime], websocket: true}]}]}}\n")}}
			},
			codes: []string{codeOmniaWebSocket},
		},
		"a Connection's gRPC host": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"+
					"spec: {hosts: [grpc.acme.dev], credential: {kind: secret, secretRef: {name: s}}, placement: {inject: [{hosts: [grpc.acme.dev], header: Authorization, value: 'Bearer {{ .token }}', "+
					"rules: [{methods: [POST], pathPrefixes: [/acme.v1.Widgets]}]}]}}\n")}}
			},
			codes: []string{codeOmniaHTTP2Host},
		},
		"a Connection in audit mode": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"+
					"spec: {hosts: [api.github.com], enforcement: audit, credential: {kind: secret, secretRef: {name: s}}, placement: {inject: [{hosts: [api.github.com], header: Authorization, value: 'Bearer {{ .token }}', "+
					"rules: [{methods: [GET], pathPrefixes: [/repos/acme/widgets]}]}]}}\n")}}
			},
			codes: []string{codeOmniaAudit},
		},
		"a Connection that enforces": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"+
					"spec: {hosts: [api.github.com], enforcement: enforce, credential: {kind: secret, secretRef: {name: s}}, placement: {inject: [{hosts: [api.github.com], header: Authorization, value: 'Bearer {{ .token }}', "+
					"rules: [{methods: [GET], pathPrefixes: [/repos/acme/widgets]}]}]}}\n")}}
			},
		},
		"a Connection's mcp": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"+
					"spec: {hosts: [api.githubcopilot.com], credential: {kind: secret, secretRef: {name: s}}, placement: {inject: [{hosts: [api.githubcopilot.com], header: Authorization, value: 'Bearer {{ .token }}', "+
					"rules: [{methods: [POST], pathPrefixes: [/mcp], mcp: {methods: [tools/call], tools: [get_me]}}]}]}}\n")}}
			},
			codes: []string{codeOmniaMCP},
		},
		"a connector rule with encodedSlash dropped": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{agentRuntime(t, "a")}, Agents: []compiler.Agent{omniaAgent("a", omniaConn(basic, []schema.Rule{
					{Methods: []string{"GET"}, PathPrefixes: []string{"/"}},
					{Methods: []string{"GET"}, PathPrefixes: []string{"/@acme%2Fwidgets"}, EncodedSlash: "segment"},
				}))}}
			},
			codes: []string{codeOmniaRuleDropped},
		},
		"a connector that is not read-only": {
			plan: func(t *testing.T) compiler.Plan {
				c := omniaConn(basic, []schema.Rule{{Methods: []string{"GET"}, PathPrefixes: []string{"/"}}})
				c.Writable = true
				return compiler.Plan{Objects: []compiler.Object{agentRuntime(t, "a")}, Agents: []compiler.Agent{omniaAgent("a", c)}}
			},
			codes: []string{codeOmniaConnectorWritable},
		},
		"basic host without a user name key": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{agentRuntime(t, "a")}, Agents: []compiler.Agent{omniaAgent("a", omniaConn(nil, []schema.Rule{{Methods: []string{"GET"}, PathPrefixes: []string{"/"}}}))}}
			},
			codes: []string{codeOmniaBasicUsernameMiss},
		},
		"no rule expressible": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{Objects: []compiler.Object{agentRuntime(t, "a")}, Agents: []compiler.Agent{omniaAgent("a", omniaConn(basic, []schema.Rule{{Methods: []string{"GET"}, PathPatterns: []string{"/*/x"}}}))}}
			},
			codes: []string{codeOmniaReadOnlyUnexpressed, codeOmniaRuleDropped},
		},
		"input class lacks the role": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{
					Objects: []compiler.Object{agentRuntime(t, "a"), inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: SandboxClass\nmetadata: {name: daytona, namespace: agents}\nspec: {connections: [{role: vcs}]}\n")},
					Agents:  []compiler.Agent{omniaAgent("a", omniaConn(basic, []schema.Rule{{Methods: []string{"GET"}, PathPrefixes: []string{"/"}}}))},
				}
			},
			codes: []string{codeOmniaClassRoleMissing},
		},
		"compiled name taken by an input object": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{
					Objects: []compiler.Object{agentRuntime(t, "a"), inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: a-github, namespace: agents}\nspec: {}\n")},
					Agents:  []compiler.Agent{omniaAgent("a", omniaConn(basic, []schema.Rule{{Methods: []string{"GET"}, PathPrefixes: []string{"/"}}}))},
				}
			},
			codes: []string{codeOmniaNameTaken},
		},
		"no AgentRuntime for the agent": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{
					Objects: []compiler.Object{agentRuntime(t, "b")},
					Agents:  []compiler.Agent{omniaAgent("a", omniaConn(basic, []schema.Rule{{Methods: []string{"GET"}, PathPrefixes: []string{"/"}}}))},
				}
			},
			codes: []string{codeOmniaRuntimeMissing},
		},
		"the agent's AgentRuntime binds its sandbox itself": {
			plan: func(t *testing.T) compiler.Plan {
				return compiler.Plan{
					Objects: []compiler.Object{inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: AgentRuntime\nmetadata: {name: a, namespace: agents}\n"+
						"spec: {promptPackRef: {name: a}, facades: [{type: websocket}], sandbox: {enabled: true}}\n")},
					Agents: []compiler.Agent{omniaAgent("a", omniaConn(basic, []schema.Rule{{Methods: []string{"GET"}, PathPrefixes: []string{"/"}}}))},
				}
			},
			codes: []string{codeOmniaRuntimeBound},
		},
		"an operator without the sandbox feature": {
			plan: func(t *testing.T) compiler.Plan {
				op, err := schema.LookupOperator("v0.9.0-beta.17")
				if err != nil {
					t.Fatal(err)
				}
				return compiler.Plan{
					Operator: op,
					Objects: []compiler.Object{agentRuntime(t, "a"),
						inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: SandboxClass\nmetadata: {name: daytona, namespace: agents}\nspec: {}\n"),
						inputObject(t, "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\nspec: {}\n")},
					Agents: []compiler.Agent{omniaAgent("a", omniaConn(basic, []schema.Rule{{Methods: []string{"GET"}, PathPrefixes: []string{"/"}}}))},
				}
			},
			codes: []string{codeOmniaSandboxUnsupported, codeOmniaSandboxUnsupported, codeOmniaSandboxUnsupported},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			files, ds, err := RenderOmnia(tc.plan(t), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var codes []string
			for _, d := range ds {
				codes = append(codes, d.Code)
				if d.Severity != omniaSeverity(d.Code) || d.Pos.File == "" || d.Message == "" {
					t.Errorf("malformed diagnostic %+v", d)
				}
			}
			slices.Sort(codes)
			want := slices.Clone(tc.codes)
			slices.Sort(want)
			if !slices.Equal(codes, want) {
				t.Errorf("codes = %v, want %v\n%v", codes, want, ds)
			}
			if ds.HasErrors() != (files == nil) {
				t.Errorf("errors: %v, files: %d; want files exactly when there is no error", ds.HasErrors(), len(files))
			}
		})
	}
}

// TestOmniaCarriesOperatorFields: the operator's own spec fields of an
// AgentRuntime are carried with their types (numbers, nulls, booleans,
// nested lists); status and keyhole's annotation are dropped.
func TestOmniaCarriesOperatorFields(t *testing.T) {
	in := inputObject(t, `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: AgentRuntime
metadata:
  name: rt
  namespace: agents
  labels: {team: "007"}
  annotations: {keyhole.dev/ignore: BindingRoleUnknown, note: "keep: me"}
  uid: abc
spec:
  replicas: 3
  temperature: 0.5
  budget: 1.0e+3
  big: 18446744073709551615
  unset: null
  on: true
  date: 2024-01-02
  text: "yes"
  models: [{name: m, weight: 2}]
  sandbox: {enabled: false}
status: {phase: Ready}
`)
	files, ds := mustRenderTarget(t, RenderOmnia, compiler.Plan{Objects: []compiler.Object{in}})
	if len(ds) > 0 {
		t.Fatalf("diagnostics: %v", ds)
	}
	data := fileMap(files)["omnia/agents/agentruntime-rt.yaml"]
	var got map[string]any
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	var want map[string]any
	wantSrc := `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: AgentRuntime
metadata: {name: rt, namespace: agents, labels: {team: "007"}, annotations: {note: "keep: me"}}
spec: {replicas: 3, temperature: 0.5, budget: 1000.0, big: 18446744073709551615, unset: null, "on": true,
  date: "2024-01-02", text: "yes", models: [{name: m, weight: 2}], sandbox: {enabled: false}}
`
	if err := yaml.Unmarshal([]byte(wantSrc), &want); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		t.Errorf("got\n%s\nwant %#v", data, want)
	}
}

// TestForTarget: the target table, and an unknown name listing the
// valid ones.
func TestForTarget(t *testing.T) {
	tests := map[string]struct {
		name string
		ok   bool
	}{
		"kubernetes": {name: TargetKubernetes, ok: true},
		"omnia":      {name: TargetOmnia, ok: true},
		"unknown":    {name: "helm"},
		"empty":      {name: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := ForTarget(tc.name)
			if tc.ok != (err == nil) || tc.ok != (r != nil) {
				t.Fatalf("ForTarget(%q) = %v", tc.name, err)
			}
			if !tc.ok && (!errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "kubernetes, omnia")) {
				t.Errorf("error %v does not list the targets", err)
			}
		})
	}
	if _, _, err := RenderOmnia(compiler.Plan{}, Options{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty plan: %v, want ErrEmpty", err)
	}
}

// FuzzOmniaCarry: whatever an operator's open spec holds, the omnia
// target carries it or refuses it with an error; it never panics, what it
// writes decodes, and carrying that again gives the same bytes.
func FuzzOmniaCarry(f *testing.F) {
	f.Add("replicas: 3\nx: 0.5\n")
	f.Add("a: [1, null, {b: .inf}]\n")
	f.Add("k: \"yes\"\nn: -0.0\nm: 1e300\nd: 2001-12-14\n")
	f.Add("a: &x {b: 1}\nc: *x\n<<: {z: 1}\n")
	f.Fuzz(func(t *testing.T, spec string) {
		carry := func(src []byte) ([]byte, bool) {
			var node yaml.Node
			if yaml.Unmarshal(src, &node) != nil || len(node.Content) != 1 || node.Content[0].Kind != yaml.MappingNode {
				return nil, false
			}
			var raw any
			if node.Decode(&raw) != nil {
				return nil, false
			}
			v, err := plainValue(&node)
			if err != nil {
				return nil, false
			}
			out, err := emitYAML(v)
			return out, err == nil
		}
		out, ok := carry([]byte(spec))
		if !ok {
			return
		}
		again, ok := carry(out)
		if !ok {
			t.Fatalf("what was carried cannot be carried again:\n%s", out)
		}
		if !bytes.Equal(out, again) {
			t.Fatalf("carrying twice differs:\n%s\n---\n%s", out, again)
		}
	})
}

// TestOmniaCRDsCatchMistakes: the CRD validator the omnia tests use is
// strict enough to matter: a misspelt field, a wrong type and a missing
// required field each fail, and a well-formed object passes.
func TestOmniaCRDsCatchMistakes(t *testing.T) {
	const head = "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c, namespace: agents}\n"
	const rt = "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: AgentRuntime\nmetadata: {name: r, namespace: agents}\n"
	tests := map[string]struct {
		doc string
		ok  bool
	}{
		"well formed":                                {doc: head + "spec: {hosts: [a.example], credential: {kind: secret, secretRef: {name: s}}, placement: {inject: [{hosts: [a.example], header: X, value: v}]}}\n", ok: true},
		"misspelt field":                             {doc: head + "spec: {hosts: [a.example], credential: {kind: secret, secretRef: {name: s}}, placement: {injcet: []}}\n"},
		"wrong type":                                 {doc: head + "spec: {hosts: a.example, credential: {kind: secret, secretRef: {name: s}}, placement: {}}\n"},
		"missing field":                              {doc: head + "spec: {hosts: [a.example], placement: {}}\n"},
		"unknown kind":                               {doc: "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Gadget\nmetadata: {name: x}\n"},
		"rule with an empty list of prefixes":        {doc: head + "spec: {hosts: [a.example], credential: {kind: secret, secretRef: {name: s}}, placement: {inject: [{hosts: [a.example], header: X, value: v, rules: [{methods: [GET], pathPrefixes: []}]}]}}\n"},
		"rule with a malformed pattern":              {doc: head + "spec: {hosts: [a.example], credential: {kind: secret, secretRef: {name: s}}, placement: {inject: [{hosts: [a.example], header: X, value: v, rules: [{methods: [GET], pathPatterns: [a/**/b]}]}]}}\n"},
		"operator's kind, well formed":               {doc: rt + "spec: {promptPackRef: {name: p}, facades: [{type: websocket, port: 8080}]}\n", ok: true},
		"operator's kind, required field missing":    {doc: rt + "spec: {facades: [{type: websocket}]}\n"},
		"operator's kind, misspelt field":            {doc: rt + "spec: {promptPackRef: {name: p}, facades: [{type: websocket}], replica: 2}\n"},
		"operator's kind, spec.sandbox as published": {doc: rt + "spec: {promptPackRef: {name: p}, facades: [{type: websocket}], sandbox: {enabled: true}}\n"},
		"operator's ToolRegistry without handlers":   {doc: "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: ToolRegistry\nmetadata: {name: t}\nspec: {}\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := validateOmnia([]byte(tc.doc), false); (err == nil) != tc.ok {
				t.Errorf("validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// FuzzRenderOmnia feeds arbitrary names and an arbitrary input object
// through RenderOmnia. It must never panic; when it renders, every file
// decodes as YAML and holds the object its path names.
func FuzzRenderOmnia(f *testing.F) {
	f.Add("support", "agents", "daytona", "github", "token", "company-github-token", "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: SandboxClass\nmetadata: {name: daytona, namespace: agents}\nspec: {}\n")
	f.Add("a", "", "b", "x", "k", "s", "kind: AgentRuntime\nmetadata: {name: a}\nspec: {x: [1.5, null, ~]}\n")
	f.Add("A_b", "n", "c", "d", "e", "f", "kind: Connection\nmetadata: {name: ../x}\n")
	f.Fuzz(func(t *testing.T, agent, ns, sandbox, key, secret, connector, input string) {
		p := compiler.Plan{Agents: []compiler.Agent{omniaAgent(agent, omniaConn(map[string]string{"github.com": "user"}, nil))}}
		a := &p.Agents[0]
		a.Namespace, a.Sandbox = ns, sandbox
		a.Connectors[0].Name, a.Connectors[0].Key, a.Connectors[0].SecretName = connector, key, secret
		if docs, ds := source.Parse("in.yaml", []byte(input)); len(ds) == 0 && len(docs) == 1 && docs[0].Node != nil {
			p.Objects = []compiler.Object{{Source: docs[0].Object(), Pos: docs[0].Pos, Node: docs[0].Node}}
		}
		// The agent's own AgentRuntime, which the render binds the sandbox in.
		rt := fmt.Sprintf("apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: AgentRuntime\nmetadata: {name: %q, namespace: %q}\nspec: {}\n", agent, ns)
		if docs, ds := source.Parse("rt.yaml", []byte(rt)); len(ds) == 0 && len(docs) == 1 && docs[0].Node != nil {
			p.Objects = append(p.Objects, compiler.Object{Source: docs[0].Object(), Pos: docs[0].Pos, Node: docs[0].Node})
		}
		files, _, err := RenderOmnia(p, Options{})
		if err != nil {
			return
		}
		for _, f := range files {
			var o obj
			if err := yaml.Unmarshal(f.Data, &o); err != nil {
				t.Fatalf("%s: %v\n%s", f.Path, err, f.Data)
			}
			if f.Path == "kustomization.yaml" {
				continue
			}
			md, _ := o["metadata"].(obj)
			kind, _ := o["kind"].(string)
			name, _ := md["name"].(string)
			space, _ := md["namespace"].(string)
			if want := OmniaDir + "/" + space + "/" + strings.ToLower(kind) + "-" + name + ".yaml"; f.Path != want {
				t.Fatalf("%s holds %s", f.Path, want)
			}
		}
	})
}

// TestOmniaInjectShapes: how each catalog connector's hosts become
// inject entries: header hosts grouped by header with the placeholder
// variable on the first, basic hosts with the labelled Connection's user
// name key, and a host taking either (gitlab.com) getting the header.
func TestOmniaInjectShapes(t *testing.T) {
	catalog, err := schema.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		connector string
		want      string
	}{
		"github": {connector: "github",
			want: "[map[header:Authorization hosts:[api.github.com uploads.github.com] placeholderEnv:[GITHUB_TOKEN] value:Bearer {{ .token }}] map[basic:map[passwordKey:token usernameKey:user] hosts:[github.com]]]"},
		"gitlab": {connector: "gitlab",
			want: "[map[header:PRIVATE-TOKEN hosts:[gitlab.com] placeholderEnv:[GITLAB_TOKEN] value:{{ .token }}]]"},
		"anthropic": {connector: "anthropic",
			want: "[map[header:x-api-key hosts:[api.anthropic.com] placeholderEnv:[ANTHROPIC_API_KEY] value:{{ .token }}]]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := omniaConn(map[string]string{"github.com": "user", "gitlab.com": "user"}, nil)
			c.Name, c.Connector = tc.connector, catalog[tc.connector]
			files, _ := mustRenderTarget(t, RenderOmnia, compiler.Plan{Objects: []compiler.Object{agentRuntime(t, "a")}, Agents: []compiler.Agent{omniaAgent("a", c)}})
			conn := find(t, objects(t, files), "Connection", "a-"+tc.connector)
			inject := conn["spec"].(obj)["placement"].(obj)["inject"].([]any)
			for _, e := range inject {
				if e.(obj)["rules"] == nil {
					t.Errorf("entry %v has no rules", e)
				}
				delete(e.(obj), "rules")
			}
			if got := fmt.Sprint(inject); got != tc.want {
				t.Errorf("inject =\n%s\nwant\n%s", got, tc.want)
			}
			for p, data := range fileMap(files) {
				if p != "kustomization.yaml" {
					if err := validateOmnia(data, true); err != nil {
						t.Errorf("%s: %v", p, err)
					}
				}
			}
		})
	}
}

// TestOmniaWithoutSandboxFeature: for a declared operator release without
// the sandbox feature, what the omnia target emits must pass the
// operator's CRDs as published, spec.sandbox included (there is none);
// the same repository with an agent.yaml agent is refused at render time.
func TestOmniaWithoutSandboxFeature(t *testing.T) {
	dir := filepath.Join("testdata", "omnia-without-sandbox")
	p := compileDir(t, dir)
	if p.Operator.Sandbox || p.Operator.Version != "v0.9.0-beta.17" {
		t.Fatalf("Plan.Operator = %+v, want the declared release without the sandbox feature", p.Operator)
	}
	files, _ := mustRenderTarget(t, RenderOmnia, p)
	n := 0
	for path, data := range fileMap(files) {
		if path == "kustomization.yaml" {
			continue
		}
		if err := validateOmnia(data, false); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("emitted %d objects, want the AgentRuntime and the ToolRegistry", n)
	}
	compileBack(t, dir, files)

	p.Agents = []compiler.Agent{omniaAgent("support", omniaConn(map[string]string{"github.com": "user"}, nil))}
	files, ds, err := RenderOmnia(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if files != nil || len(ds) != 1 || ds[0].Code != codeOmniaSandboxUnsupported {
		t.Errorf("an agent with a sandbox on a release without the feature: files %d, diagnostics %v", len(files), ds)
	}
}

// TestOmniaRulesPerHost: each host of the Connection gets only the
// catalog rules that hold on it, so two header hosts with different
// rules get an inject entry each, and a host no expressible rule holds
// on makes the connector unexpressible rather than unrestricted.
func TestOmniaRulesPerHost(t *testing.T) {
	basic := map[string]string{"github.com": "user"}
	perHost := []schema.Rule{
		{Methods: []string{"GET"}, PathPrefixes: []string{"/"}},
		{Methods: []string{"POST"}, PathPrefixes: []string{"/repos/acme/widgets/issues"}, Hosts: []string{"api.github.com"}},
	}
	p := compiler.Plan{Objects: []compiler.Object{agentRuntime(t, "a")}, Agents: []compiler.Agent{omniaAgent("a", omniaConn(basic, perHost))}}
	files, _ := mustRenderTarget(t, RenderOmnia, p)
	conn, ok := objects(t, files)["omnia/agents/connection-a-github.yaml"]
	if !ok {
		t.Fatalf("no Connection among %v", slices.Collect(maps.Keys(fileMap(files))))
	}
	got := map[string]string{}
	for _, e := range conn["spec"].(obj)["placement"].(obj)["inject"].([]any) {
		e := e.(obj)
		rules, err := json.Marshal(e["rules"])
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range e["hosts"].([]any) {
			got[h.(string)] = string(rules)
		}
	}
	get := `{"methods":["GET"],"pathPrefixes":["/"]}`
	want := map[string]string{
		"api.github.com":     `[` + get + `,{"methods":["POST"],"pathPrefixes":["/repos/acme/widgets/issues"]}]`,
		"uploads.github.com": `[` + get + `]`,
		"github.com":         `[` + get + `]`,
	}
	if !maps.Equal(got, want) {
		t.Errorf("rules per host = %v, want %v", got, want)
	}

	// No rule holds on uploads.github.com: refused, never left open.
	onlyAPI := []schema.Rule{{Methods: []string{"GET"}, PathPrefixes: []string{"/"}, Hosts: []string{"api.github.com", "github.com"}}}
	p = compiler.Plan{Objects: []compiler.Object{agentRuntime(t, "a")}, Agents: []compiler.Agent{omniaAgent("a", omniaConn(basic, onlyAPI))}}
	_, ds, err := RenderOmnia(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !ds.HasErrors() || !strings.Contains(ds.Error(), "uploads.github.com") {
		t.Errorf("a host without rules is not refused by name:\n%v", ds)
	}
}
