package schema

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// canary is planted in Secret fixtures; no violation may ever contain it.
const canary = "canary"

// validator is built once per test binary; NewValidator is what every
// test exercises first.
var sharedValidator = sync.OnceValues(NewValidator)

func newValidator(t testing.TB) *Validator {
	t.Helper()
	v, err := sharedValidator()
	if err != nil {
		t.Fatalf("NewValidator: %v", err)
	}
	return v
}

func parseFile(t testing.TB, name string) *yaml.Node {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, string(b))
}

func parse(t testing.TB, src string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatalf("parsing YAML: %v", err)
	}
	return &n
}

func TestValidateFixtures(t *testing.T) {
	tests := map[string]struct {
		kind Kind
		file string
		want []Violation
	}{
		"connection valid": {
			kind: KindConnection,
			file: "connection/valid.yaml",
		},
		"connection misspelt and malformed fields": {
			kind: KindConnection,
			file: "connection/errors.yaml",
			want: []Violation{
				{Line: 5, Column: 3, Path: "metadata.namspace", Message: `unknown field "namspace" (did you mean "namespace"?)`},
				{Line: 7, Column: 3, Path: "spec.hsots", Message: `unknown field "hsots" (did you mean "hosts"?)`},
				{Line: 10, Column: 16, Path: "spec.credential.secretRef", Message: `missing required field "name"`},
				{Line: 13, Column: 17, Path: "spec.placement.inject[0].hosts[0]", Message: `"API.github.com" is not a host: want a lowercase DNS name without scheme, port or path`},
				{Line: 13, Column: 33, Path: "spec.placement.inject[0].hosts[1]", Message: `"https://x.com" is not a host: want a lowercase DNS name without scheme, port or path`},
				{Line: 14, Column: 17, Path: "spec.placement.inject[0].header", Message: `"Bad Header" is not a header name: want an RFC 9110 token such as Authorization, without spaces or colons`},
				{Line: 15, Column: 26, Path: "spec.placement.inject[0].placeholderEnv[0]", Message: `"1BAD" is not an environment variable name: want letters, digits and underscores, not starting with a digit`},
				{Line: 17, Column: 28, Path: "spec.placement.inject[0].rules[0].methods[1]", Message: `"FETCH" is not an HTTP method; want one of GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH`},
				{Line: 18, Column: 28, Path: "spec.placement.inject[0].rules[0].pathPrefixes[0]", Message: `"repos" is not a path prefix: want an absolute path starting with /, without query or fragment`},
				{Line: 19, Column: 22, Path: "spec.placement.inject[0].rules[1].methods", Message: `want at least one item, got none`},
				{Line: 20, Column: 27, Path: "spec.placement.inject[0].rules[1].pathPrefixes", Message: `want a list, got a string`},
			},
		},
		"connection missing name, wrong kind, bad placements": {
			kind: KindConnection,
			file: "connection/missing.yaml",
			want: []Violation{
				{Line: 2, Column: 7, Path: "kind", Message: `want "Connection", got "Conection"`},
				{Line: 4, Column: 3, Path: "metadata", Message: `missing required field "name"`},
				{Line: 7, Column: 10, Path: "spec.hosts", Message: `want at least one item, got none`},
				{Line: 9, Column: 11, Path: "spec.credential.kind", Message: `"vault" is not allowed here; want one of secret, githubApp, awsSigV4, oauth2, googleServiceAccount`},
				{Line: 14, Column: 15, Path: "spec.placement.files[0].path", Message: `"relative/path" is not an absolute path: want a path starting with /`},
				{Line: 18, Column: 14, Path: "spec.placement.env[0].key", Message: `Secret key "bad key" holds ' '; Kubernetes allows only letters, digits, '-', '_' and '.'`},
			},
		},
		"connection document is a list": {
			kind: KindConnection,
			file: "connection/not-a-mapping.yaml",
			want: []Violation{
				{Line: 1, Column: 1, Path: "", Message: `want a mapping, got a list`},
			},
		},
		"secret valid": {
			kind: KindSecret,
			file: "secret/valid.yaml",
		},
		"secret bad values are named by key, never quoted": {
			kind: KindSecret,
			file: "secret/errors.yaml",
			want: []Violation{
				{Line: 4, Column: 9, Path: "metadata.name", Message: `"Acme_Token" is not a Kubernetes name: want at most 253 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit`},
				{Line: 6, Column: 10, Path: "data.token", Message: `the value of data key "token" is not valid base64`},
				{Line: 9, Column: 10, Path: "stringData.other", Message: `want a string, got a list`},
				{Line: 10, Column: 12, Path: "immutable", Message: `want true or false, got a string`},
				{Line: 11, Column: 1, Path: "extra", Message: `unknown field "extra"; want one of apiVersion, data, immutable, kind, metadata, stringData, type`},
			},
		},
		"sandbox class valid": {
			kind: KindSandboxClass,
			file: "sandboxclass/valid.yaml",
		},
		"sandbox class misspelt and unknown fields": {
			kind: KindSandboxClass,
			file: "sandboxclass/errors.yaml",
			want: []Violation{
				{Line: 6, Column: 3, Path: "spec.imgae", Message: `unknown field "imgae" (did you mean "image"?)`},
				{Line: 8, Column: 13, Path: "spec.connections[0].role", Message: `"VCS" is not a DNS label: want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
				{Line: 9, Column: 7, Path: "spec.connections[1]", Message: `missing required field "role"`},
				{Line: 10, Column: 7, Path: "spec.connections[2].rol", Message: `unknown field "rol" (did you mean "role"?)`},
				{Line: 11, Column: 3, Path: "spec.replicas", Message: `unknown field "replicas"; want one of connections, description, image`},
			},
		},
		"agent runtime valid with operator fields in spec": {
			kind: KindAgentRuntime,
			file: "agentruntime/valid.yaml",
		},
		"agent runtime closed sandbox binding": {
			kind: KindAgentRuntime,
			file: "agentruntime/errors.yaml",
			want: []Violation{
				{Line: 8, Column: 14, Path: "spec.sandbox.enabled", Message: `want true or false, got a string`},
				{Line: 9, Column: 5, Path: "spec.sandbox.conections", Message: `unknown field "conections" (did you mean "connections"?)`},
				{Line: 12, Column: 9, Path: "spec.sandbox.connections[0]", Message: `missing required field "connection"`},
				{Line: 13, Column: 19, Path: "spec.sandbox.connections[1].sandbox", Message: `"Workspace" is not a Kubernetes name: want at most 253 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit`},
				{Line: 13, Column: 66, Path: "spec.sandbox.connections[1].extra", Message: `unknown field "extra"; want one of connection, role, sandbox`},
			},
		},
		"agent runtime with a YAML 1.1 boolean says how to write it": {
			kind: KindAgentRuntime,
			file: "agentruntime/yaml11-bool.yaml",
			want: []Violation{
				{Line: 9, Column: 14, Path: "spec.sandbox.enabled", Message: `want true or false, got a string: YAML 1.2 reads an unquoted yes as a string (kubectl, with YAML 1.1, as true); write true`},
			},
		},
		"tool registry valid": {
			kind: KindToolRegistry,
			file: "toolregistry/valid.yaml",
		},
		"tool registry sandbox of the wrong type": {
			kind: KindToolRegistry,
			file: "toolregistry/errors.yaml",
			want: []Violation{
				{Line: 6, Column: 12, Path: "spec.sandbox", Message: `want a mapping, got a list`},
			},
		},
		"example agent.yaml": {
			kind: KindAgent,
			file: "agent/agent.yaml",
		},
		"agent.yaml bad mode, types and fields": {
			kind: KindAgent,
			file: "agent/errors.yaml",
			want: []Violation{
				{Line: 1, Column: 1, Path: "", Message: `missing required field "llm"`},
				{Line: 2, Column: 7, Path: "mode", Message: `"video" is not allowed here; want one of text, voice`},
				{Line: 3, Column: 10, Path: "sandbox", Message: `want a string, got a boolean`},
				{Line: 4, Column: 1, Path: "conectors", Message: `unknown field "conectors" (did you mean "connectors"?)`},
				{Line: 8, Column: 14, Path: "connectors[0].sandbox", Message: `want true or false, got a string`},
				{Line: 9, Column: 5, Path: "connectors[0].tool", Message: `unknown field "tool" (did you mean "tools"?)`},
				{Line: 10, Column: 5, Path: "connectors[1]", Message: `missing required field "name"`},
				{Line: 11, Column: 18, Path: "allowed_domains", Message: `want a list, got a string`},
			},
		},
		"connector extension valid": {
			kind: KindConnector,
			file: "connector/valid.yaml",
		},
		"connector extension bad formats and inject shapes": {
			kind: KindConnector,
			file: "connector/errors.yaml",
			want: []Violation{
				{Line: 2, Column: 6, Path: "env", Message: `"GHE-TOKEN" is not an environment variable name: want letters, digits and underscores, not starting with a digit`},
				{Line: 4, Column: 11, Path: "hosts[0].host", Message: `"ghe.acme.internal:8443" is not a host: want a lowercase DNS name without scheme, port or path`},
				{Line: 5, Column: 13, Path: "hosts[0].inject", Message: `want at least one of the fields "header" or "basic"`},
				{Line: 8, Column: 7, Path: "hosts[1].inject.heder", Message: `unknown field "heder" (did you mean "header"?)`},
				{Line: 11, Column: 22, Path: "hosts[2].inject.header.name", Message: `"Authorization:" is not a header name: want an RFC 9110 token such as Authorization, without spaces or colons`},
				{Line: 14, Column: 25, Path: "hosts[3].inject.basic.username", Message: `must not be empty`},
				{Line: 16, Column: 15, Path: "readOnly[0].methods[0]", Message: `"get" is not an HTTP method; want one of GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH`},
				{Line: 17, Column: 20, Path: "readOnly[0].pathPatterns[0]", Message: `"/**/x" is not a path pattern: want an absolute path whose segments may be * (one segment) and whose last may be ** (the rest); with encodedSlash: segment, a segment may be pieces joined by %2F, each a literal or *`},
				{Line: 17, Column: 29, Path: "readOnly[0].pathPatterns[1]", Message: `"relative" is not a path pattern: want an absolute path whose segments may be * (one segment) and whose last may be ** (the rest); with encodedSlash: segment, a segment may be pieces joined by %2F, each a literal or *`},
				{Line: 19, Column: 18, Path: "readOnly[0].body.operation", Message: `want a list, got a string`},
			},
		},
	}
	v := newValidator(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := v.Validate(tc.kind, parseFile(t, tc.file))
			if !slices.Equal(got, tc.want) {
				t.Errorf("Validate(%s, %s):\ngot:\n%s\nwant:\n%s", tc.kind, tc.file, lines(got), lines(tc.want))
			}
			for _, g := range got {
				if strings.Contains(g.Message, canary) {
					t.Errorf("violation leaks a secret value: %s", g)
				}
			}
		})
	}
}

func lines(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("\t" + v.String() + "\n")
	}
	return b.String()
}

func TestLookup(t *testing.T) {
	tests := map[string]struct {
		apiVersion, kind string
		want             Kind
		ok               bool
	}{
		"connection":         {apiVersion: Group, kind: "Connection", want: KindConnection, ok: true},
		"sandbox class":      {apiVersion: Group, kind: "SandboxClass", want: KindSandboxClass, ok: true},
		"agent runtime":      {apiVersion: Group, kind: "AgentRuntime", want: KindAgentRuntime, ok: true},
		"tool registry":      {apiVersion: Group, kind: "ToolRegistry", want: KindToolRegistry, ok: true},
		"secret":             {apiVersion: "v1", kind: "Secret", want: KindSecret, ok: true},
		"agent.yaml":         {apiVersion: "", kind: "Agent", want: KindAgent, ok: true},
		"catalog connector":  {apiVersion: "", kind: "Connector", want: KindConnector, ok: true},
		"secret in omnia":    {apiVersion: Group, kind: "Secret"},
		"connection in v1":   {apiVersion: "v1", kind: "Connection"},
		"other version":      {apiVersion: "omnia.altairalabs.ai/v1", kind: "Connection"},
		"configmap":          {apiVersion: "v1", kind: "ConfigMap"},
		"sealed secret":      {apiVersion: "bitnami.com/v1alpha1", kind: "SealedSecret"},
		"lower-case kind":    {apiVersion: Group, kind: "connection"},
		"agent with version": {apiVersion: "v1", kind: "Agent"},
		"empty":              {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := Lookup(tc.apiVersion, tc.kind)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Lookup(%q, %q) = %q, %v; want %q, %v", tc.apiVersion, tc.kind, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestKinds: Kinds is every kind Lookup returns, each once, and
// GroupKinds those of Group; neither lets a caller change the list.
func TestKinds(t *testing.T) {
	apiVersions := []string{Group, "v1", ""}
	for _, k := range Kinds() {
		var found []string
		for _, av := range apiVersions {
			if got, ok := Lookup(av, string(k)); ok && got == k {
				found = append(found, av)
			}
		}
		if len(found) != 1 {
			t.Errorf("kind %s is looked up under %q, want one apiVersion", k, found)
			continue
		}
		if inGroup := slices.Contains(GroupKinds(), k); inGroup != (found[0] == Group) {
			t.Errorf("kind %s: in GroupKinds %v, looked up under %q", k, inGroup, found[0])
		}
	}
	if n := len(Kinds()); n != 9 {
		t.Errorf("%d kinds, want 9", n)
	}
	Kinds()[0], GroupKinds()[0] = "changed", "changed"
	if Kinds()[0] != KindConnection || GroupKinds()[0] != KindConnection {
		t.Error("a caller changed the list of kinds")
	}
}
