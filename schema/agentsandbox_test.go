package schema

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestValidateAgentSandboxFixtures checks agent-sandbox documents against
// the shipped CRDs: what its API server refuses is reported at its
// position, what it accepts is not.
func TestValidateAgentSandboxFixtures(t *testing.T) {
	tests := map[string]struct {
		kind Kind
		file string
		want []string
	}{
		"template valid": {kind: KindSandboxTemplate, file: "agentsandbox/template-valid.yaml"},
		"claim valid":    {kind: KindSandboxClaim, file: "agentsandbox/claim-valid.yaml"},
		"sandbox valid":  {kind: KindSandbox, file: "agentsandbox/sandbox-valid.yaml"},
		"template misspelt, mistyped, outside its enum": {
			kind: KindSandboxTemplate, file: "agentsandbox/template-errors.yaml",
			want: []string{
				`6:3: spec.networkPolicyManagment: unknown field "networkPolicyManagment" (did you mean "networkPolicyManagement"?)`,
				`7:27: spec.envVarsInjectionPolicy: "Sometimes" is not allowed here; want one of Allowed, Overrides, Disallowed`,
				`13:35: spec.podTemplate.spec.containers[0].ports[0].containerPort: want an integer, got a string`,
			},
		},
		"template without its pod": {
			kind: KindSandboxTemplate, file: "agentsandbox/template-missing.yaml",
			want: []string{`6:3: spec: missing required field "podTemplate"`},
		},
		"claim naming a template, not a warm pool": {
			kind: KindSandboxClaim, file: "agentsandbox/claim-errors.yaml",
			want: []string{
				`6:3: spec: missing required field "warmPoolRef"`,
				`6:3: spec.sandboxTemplateRef: unknown field "sandboxTemplateRef"; want one of additionalPodMetadata, env, lifecycle, volumeClaimTemplates, warmPoolRef`,
			},
		},
		"warm pool below its minimum": {
			kind: KindSandboxWarmPool, file: "agentsandbox/warmpool-errors.yaml",
			want: []string{`6:13: spec.replicas: must be >= 0 but found -1`},
		},
	}
	v := newValidator(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := strs(v.ValidateAgentSandbox(tc.kind, parseFile(t, tc.file)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestLookupAgentSandbox: each kind at its own API version, and no other.
func TestLookupAgentSandbox(t *testing.T) {
	for _, k := range AgentSandboxKinds() {
		if got, ok := LookupAgentSandbox(AgentSandboxAPIVersion(k), string(k)); !ok || got != k {
			t.Errorf("%s at %s: got %q, %v", k, AgentSandboxAPIVersion(k), got, ok)
		}
	}
	for _, c := range [][2]string{
		{"agents.x-k8s.io/v1beta1", "SandboxTemplate"},
		{"extensions.agents.x-k8s.io/v1beta1", "Sandbox"},
		{"extensions.agents.x-k8s.io/v1alpha1", "SandboxTemplate"},
		{"extensions.agents.x-k8s.io/v1beta1", "Connection"},
	} {
		if _, ok := LookupAgentSandbox(c[0], c[1]); ok {
			t.Errorf("%s %s: want not found", c[0], c[1])
		}
	}
	crds, err := AgentSandboxCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(crds), "kind: CustomResourceDefinition"); n != 4 {
		t.Errorf("AgentSandboxCRDs holds %d CRDs, want 4", n)
	}
}

// TestAgentSandboxProvenance keeps agent-sandbox's files as they were
// copied: each hash in agentsandbox/README.md must match its file, and
// every file of the release directory must be listed there.
func TestAgentSandboxProvenance(t *testing.T) {
	if n := checkProvenance(t, "agentsandbox", AgentSandboxVersion)[AgentSandboxVersion]; n != 5 {
		t.Errorf("agentsandbox/%s holds %d files, want the four CRDs and LICENSE", AgentSandboxVersion, n)
	}
}

// FuzzValidateAgentSandbox: any YAML document gets violations with a
// message and a position, in bounded time, for each kind, never a panic.
func FuzzValidateAgentSandbox(f *testing.F) {
	v := newValidator(f)
	fuzzViolations(f, "ValidateAgentSandbox", AgentSandboxKinds(), []string{
		"spec: {podTemplate: {spec: {containers: [{name: a, image: b}]}}}\n",
		"spec: {podTemplate: {spec: {containers: [{name: a, ports: [{containerPort: x}]}]}}, networkPolicyManagement: Off}\n",
		"spec: {warmPoolRef: {name: p}, env: [{name: A, value: b}, {name: A}]}\n",
		"spec: {replicas: -1, sandboxTemplateRef: {}}\n",
		"spec: {podTemplate: &p {spec: {containers: []}}, networkPolicy: {egress: [{ports: [{port: '1e3'}]}]}}\n",
		"spec: [1, 2]\n",
		"status: {x: 1}\nspec: null\n",
	}, func(k Kind, n *yaml.Node) []Violation { return v.ValidateAgentSandbox(k, n) })
}
