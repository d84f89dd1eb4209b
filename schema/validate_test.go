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
				{Line: 9, Column: 11, Path: "spec.credential.kind", Message: `want "secret", got "vault"`},
				{Line: 14, Column: 15, Path: "spec.placement.files[0].path", Message: `"relative/path" is not an absolute path: want a path starting with /`},
				{Line: 18, Column: 14, Path: "spec.placement.env[0].key", Message: `"bad key" is not a Secret key: want letters, digits, '-', '_' and '.'`},
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
