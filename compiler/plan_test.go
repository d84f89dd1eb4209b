package compiler

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/policy"
	"keyhole.dev/keyhole/schema"
)

// TestPlanObjectsAndAgents: the Plan lists the input's omnia objects in
// input order and never a Secret, and resolves each agent with a sandbox
// to the names a target needs to re-express it (never a value).
func TestPlanObjectsAndAgents(t *testing.T) {
	tests := map[string]struct {
		dir         string
		wantObjects []string
		wantAgents  []string
	}{
		"kubernetes objects": {
			dir:         "../examples/github-acme",
			wantObjects: []string{"AgentRuntime/agents/support", "Connection/agents/github-acme", "SandboxClass/agents/workspace"},
		},
		"an agent.yaml agent": {
			dir:         "../examples/agent-sandbox",
			wantObjects: []string{"AgentRuntime/agents/support", "Connection/agents/company"},
			wantAgents:  []string{"support agents daytona ghcr.io/acme/agent-sandbox:2.0.1 github:Connection/agents/company:company-github-token:token:github.com=user"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := compileDir(t, tc.dir, Options{})
			if res.Diagnostics.HasErrors() {
				t.Fatalf("does not check:\n%v", res.Diagnostics)
			}
			var objs []string
			for _, o := range res.Plan.Objects {
				objs = append(objs, o.Source.String())
				if n, err := o.Tree(); err != nil || n == nil || o.Pos.File == "" {
					t.Errorf("%s has no tree (%v) or position", o.Source, err)
				}
			}
			if strings.Join(objs, " ") != strings.Join(tc.wantObjects, " ") {
				t.Errorf("objects = %v, want %v", objs, tc.wantObjects)
			}
			var agents []string
			for _, a := range res.Plan.Agents {
				s := a.Name + " " + a.Namespace + " " + a.Sandbox + " " + a.Image
				for _, c := range a.Connectors {
					s += " " + c.Name + ":" + c.Connection.String() + ":" + c.SecretName + ":" + c.Key
					for h, k := range c.UsernameKeys {
						s += ":" + h + "=" + k
					}
				}
				agents = append(agents, s)
			}
			if strings.Join(agents, "\n") != strings.Join(tc.wantAgents, "\n") {
				t.Errorf("agents = %q, want %q", agents, tc.wantAgents)
			}
		})
	}
}

// TestSubstituteHeaders: an agent connector's placeholder is substituted
// only in the headers the catalog says its clients send the credential
// in, so a placeholder in any other header goes out as is.
func TestSubstituteHeaders(t *testing.T) {
	cat, err := schema.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		connector, host string
		want            []string
	}{
		"github API bearer":       {connector: "github", host: "api.github.com", want: []string{"Authorization"}},
		"github git basic":        {connector: "github", host: "github.com", want: []string{"Authorization"}},
		"gitlab header and basic": {connector: "gitlab", host: "gitlab.com", want: []string{"PRIVATE-TOKEN", "Authorization"}},
		"anthropic api key":       {connector: "anthropic", host: "api.anthropic.com", want: []string{"x-api-key"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, h := range cat[tc.connector].Hosts {
				if h.Host == tc.host {
					if got := substituteHeaders(h.Inject); !slices.Equal(got, tc.want) {
						t.Fatalf("substituteHeaders = %q, want %q", got, tc.want)
					}
					return
				}
			}
			t.Fatalf("the catalog has no host %s for %s", tc.host, tc.connector)
		})
	}
	if got := substituteHeaders(schema.ConnectorInject{
		Header: &schema.ConnectorHeader{Name: "authorization"}, Basic: &schema.ConnectorBasic{Username: "u"},
	}); !slices.Equal(got, []string{"authorization"}) {
		t.Errorf("a header named twice in two casings: %q, want it once", got)
	}
}

// TestInternalHosts: a Connection with allowInternalAddresses puts its
// hosts in the proxy config's internalHosts, so the proxy may dial them
// at internal addresses; without it, none is there.
func TestInternalHosts(t *testing.T) {
	conn, err := os.ReadFile("../examples/github-acme/connection.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		edit func(string) string
		want []string
	}{
		"by default": {edit: func(s string) string { return s }},
		"allowInternalAddresses": {edit: func(s string) string {
			return strings.Replace(s, "spec:\n", "spec:\n  allowInternalAddresses: true\n", 1)
		}, want: []string{"api.github.com", "github.com"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"agentruntime.yaml", "sandboxclass.yaml", "secret.yaml"} {
				b, err := os.ReadFile(filepath.Join("../examples/github-acme", f))
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, f), b, 0o644)
			}
			os.WriteFile(filepath.Join(dir, "connection.yaml"), []byte(tc.edit(string(conn))), 0o644)
			res := compileDir(t, dir, Options{})
			if res.Diagnostics.HasErrors() || len(res.Plan.Sandboxes) != 1 {
				t.Fatalf("does not check:\n%v", res.Diagnostics)
			}
			p := res.Plan.Sandboxes[0].Proxy
			if !slices.Equal(p.InternalHosts, tc.want) {
				t.Fatalf("internalHosts %q, want %q", p.InternalHosts, tc.want)
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("the proxy would refuse its config: %v", err)
			}
		})
	}
}

// TestAgentReadOnlyPerHost decides requests with the proxy's own
// function on the config an agent's read-only github connector compiles
// to: each POST that reads is allowed only on the host that serves it,
// so git's upload-pack pattern and the GraphQL rule reach nothing else.
func TestAgentReadOnlyPerHost(t *testing.T) {
	res := compileDir(t, "../examples/agent-sandbox", Options{})
	if res.Diagnostics.HasErrors() {
		t.Fatalf("does not check:\n%v", res.Diagnostics)
	}
	if len(res.Plan.Sandboxes) != 1 {
		t.Fatalf("%d sandboxes, want 1", len(res.Plan.Sandboxes))
	}
	p, err := policy.NewPolicy(&res.Plan.Sandboxes[0].Proxy)
	if err != nil {
		t.Fatal(err)
	}
	const query, mutation = `{"query":"{ viewer { login } }"}`, `{"query":"mutation { x }"}`
	tests := map[string]struct {
		method, url, body string
		allowed           bool
	}{
		"git fetch on github.com":             {"POST", "https://github.com/acme/widgets.git/git-upload-pack", "", true},
		"upload-pack pattern on the API":      {"POST", "https://api.github.com/orgs/acme/git-upload-pack", "", false},
		"upload-pack pattern on uploads":      {"POST", "https://uploads.github.com/repos/acme/git-upload-pack", "", false},
		"LFS download on github.com":          {"POST", "https://github.com/acme/widgets.git/info/lfs/objects/batch", `{"operation":"download"}`, true},
		"LFS batch pattern on the API":        {"POST", "https://api.github.com/acme/widgets/info/lfs/objects/batch", `{"operation":"download"}`, false},
		"GraphQL query on the API":            {"POST", "https://api.github.com/graphql", query, true},
		"GraphQL mutation on the API":         {"POST", "https://api.github.com/graphql", mutation, false},
		"GraphQL query on github.com":         {"POST", "https://github.com/graphql", query, false},
		"GraphQL query on uploads.github.com": {"POST", "https://uploads.github.com/graphql", query, false},
		"read on each host":                   {"GET", "https://uploads.github.com/x", "", true},
		"push":                                {"POST", "https://github.com/acme/widgets.git/git-receive-pack", "", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := p.DecideURL(tc.method, tc.url, []byte(tc.body))
			if got := d.Action == policy.ActionInject; got != tc.allowed {
				t.Errorf("%s %s: action %s (%s), want allowed=%v", tc.method, tc.url, d.Action, d.Message, tc.allowed)
			}
		})
	}
}
