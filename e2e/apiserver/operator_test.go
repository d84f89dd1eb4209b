//go:build e2e

package apiserver

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/cli"
	"keyhole.dev/keyhole/render"
)

// The operator's CRDs installed by installCRDs are the newest keyhole
// carries (schema.OperatorVersions()[0]), which has no sandbox feature: no
// published operator CRD declares spec.sandbox yet. What keyhole renders
// for the operator's kinds must pass them in everything else.

// sandboxRefused proves that the only thing the published operator CRD
// refuses in the AgentRuntime or ToolRegistry of file is spec.sandbox, the
// sandbox feature's field: a server dry run of the file as rendered fails
// on exactly that field, and the file is rewritten without it, for the
// caller to apply with strict validation. It reports whether file held
// one.
func sandboxRefused(t *testing.T, file string) bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	docs := decodeAll(t, file, b)
	if len(docs) != 1 {
		return false
	}
	o := object{file: file, doc: docs[0]}
	spec, _ := o.doc["spec"].(map[string]any)
	if (o.kind() != "AgentRuntime" && o.kind() != "ToolRegistry") || spec["sandbox"] == nil {
		return false
	}
	ensureNamespaces(t, []object{o})
	_, stderr, err := the.kubectl(t.Context(), b, append(slices.Clone(applyArgs), "--dry-run=server", "-f", "-")...)
	if err == nil {
		t.Fatalf("%s: the operator's published %s CRD accepted spec.sandbox; it has the sandbox feature now, and keyhole's operator versions need updating", file, o.kind())
	}
	if !strings.Contains(stderr, ".spec.sandbox: field not declared in schema") {
		t.Fatalf("%s: refused, but not for spec.sandbox:\n%s", file, stderr)
	}
	delete(spec, "sandbox")
	out, err := yaml.Marshal(o.doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return true
}

// TestOperatorCRDsIntact: keyhole's CRDs, applied after the operator's,
// left the operator's as they were: keyhole's apply owns no field of
// them, the server still refuses an AgentRuntime without the fields the
// operator requires, and `keyhole schema --crds` names neither of the
// operator's kinds.
func TestOperatorCRDsIntact(t *testing.T) {
	crds := keyhole(t, "schema", "--crds")
	for _, name := range []string{"agentruntimes.omnia.altairalabs.ai", "toolregistries.omnia.altairalabs.ai"} {
		if bytes.Contains(crds, []byte(name)) {
			t.Errorf("keyhole schema --crds defines %s", name)
		}
		out, _ := mustKubectl(t, nil, "get", "crd", name, "-o", "jsonpath={.metadata.managedFields[*].manager}")
		managers := strings.Fields(out)
		if !slices.Contains(managers, "omnia-operator") || slices.Contains(managers, "keyhole-e2e") {
			t.Errorf("CRD %s is managed by %q, want the operator's install and never keyhole's apply", name, managers)
		}
	}
	bare := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: AgentRuntime\nmetadata: {name: bare, namespace: default}\nspec: {}\n"
	_, stderr, err := the.kubectl(t.Context(), []byte(bare), append(slices.Clone(applyArgs), "--dry-run=server", "-f", "-")...)
	if err == nil || !strings.Contains(stderr, "spec.promptPackRef: Required value") || !strings.Contains(stderr, "spec.facades: Required value") {
		t.Errorf("an AgentRuntime without promptPackRef and facades: err %v\n%s", err, stderr)
	}
}

// TestOperatorVerdictsAgree runs the same AgentRuntimes and ToolRegistries
// through `keyhole check` (the operator's CRD, evaluated offline) and a
// server dry run against the same CRD installed: what keyhole calls
// OperatorSchemaInvalid the server refuses, for the same reason, and what
// keyhole accepts the server accepts.
func TestOperatorVerdictsAgree(t *testing.T) {
	const ar = "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: AgentRuntime\nmetadata: {name: verdict, namespace: default}\n"
	const tr = "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: ToolRegistry\nmetadata: {name: verdict, namespace: default}\n"
	tests := map[string]struct {
		doc string
		// keyhole and server are in keyhole's finding and the server's
		// refusal; both empty means both accept.
		keyhole, server string
	}{
		"accepted": {
			doc: ar + "spec: {promptPackRef: {name: p, version: 1.0.0}, facades: [{type: websocket, port: 8080}, {type: a2a}], runtime: {replicas: 2}}\n",
		},
		"accepted, with defaults filled in": {
			doc: ar + "spec: {promptPackRef: {name: p}, facades: [{type: a2a}]}\n",
		},
		"required field missing": {
			doc:     ar + "spec: {facades: [{type: websocket}]}\n",
			keyhole: `missing required field "promptPackRef"`, server: "spec.promptPackRef: Required value",
		},
		"undeclared field": {
			doc:     ar + "spec: {promptPackRef: {name: p, channel: stable}, facades: [{type: websocket}]}\n",
			keyhole: `unknown field "channel"`, server: ".spec.promptPackRef.channel: field not declared in schema",
		},
		"a field the newest CRD added": {
			doc: ar + "spec: {promptPackRef: {name: p, track: stable}, facades: [{type: websocket}, {type: custom, image: 'ghcr.io/acme/facade:1'}], externalAuth: {clientKeys: {defaultRole: analyst}}}\n",
		},
		"a field the newest CRD removed": {
			doc:     ar + "spec: {promptPackRef: {name: p}, facades: [{type: websocket}], externalAuth: {apiKeys: {}}}\n",
			keyhole: `unknown field "apiKeys"`, server: ".spec.externalAuth.apiKeys: field not declared in schema",
		},
		"a CEL rule the newest CRD added": {
			doc:     ar + "spec: {promptPackRef: {name: p, version: 1.0.0, track: stable}, facades: [{type: websocket}]}\n",
			keyhole: "promptPackRef.version and promptPackRef.track are mutually exclusive", server: "promptPackRef.version and promptPackRef.track are mutually exclusive",
		},
		"a custom facade without its image": {
			doc:     ar + "spec: {promptPackRef: {name: p}, facades: [{type: custom}]}\n",
			keyhole: "facade type 'custom' requires spec.facades[].image", server: "facade type 'custom' requires spec.facades[].image",
		},
		"a ToolRegistry handler's selector, removed": {
			doc:     tr + "spec: {handlers: [{name: lookup, type: http, httpConfig: {endpoint: 'https://tools.example.com/lookup', method: GET}, selector: {matchLabels: {app: tools}}}]}\n",
			keyhole: `unknown field "selector"`, server: ".spec.handlers[0].selector: field not declared in schema",
		},
		"wrong type": {
			doc:     ar + "spec: {promptPackRef: {name: p}, facades: [{type: websocket}], runtime: {replicas: two}}\n",
			keyhole: "want an integer, got a string", server: "spec.runtime.replicas",
		},
		"outside the enum": {
			doc:     ar + "spec: {promptPackRef: {name: p}, facades: [{type: grpc}]}\n",
			keyhole: `"grpc" is not allowed here`, server: `spec.facades[0].type: Unsupported value: "grpc"`,
		},
		"a CEL rule of the CRD": {
			doc:     ar + "spec: {promptPackRef: {name: p}, facades: [{type: websocket}, {type: websocket}]}\n",
			keyhole: "spec.facades must not contain duplicate facade types", server: "spec.facades must not contain duplicate facade types",
		},
		"a CEL rule over a defaulted field": {
			doc:     ar + "spec: {promptPackRef: {name: p}, facades: [{type: rest}]}\n",
			keyhole: "mode 'agent' allows only", server: "mode 'agent' allows only",
		},
		"a ToolRegistry accepted": {
			doc: tr + "spec: {handlers: [{name: lookup, type: http, httpConfig: {endpoint: 'https://tools.example.com/lookup', method: GET}, timeout: 10s}]}\n",
		},
		"a ToolRegistry without handlers": {
			doc:     tr + "spec: {}\n",
			keyhole: `missing required field "handlers"`, server: "spec.handlers: Required value",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "object.yaml")
			if err := os.WriteFile(file, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := cli.Main([]string{"check", file}, &stdout, &stderr)
			switch {
			case tc.keyhole == "" && code != 0:
				t.Errorf("keyhole check refused it (exit %d):\n%s%s", code, stdout.String(), stderr.String())
			case tc.keyhole != "" && (code != 1 || !strings.Contains(stdout.String(), "OperatorSchemaInvalid: ") || !strings.Contains(stdout.String(), tc.keyhole)):
				t.Errorf("keyhole check (exit %d) does not report %q:\n%s%s", code, tc.keyhole, stdout.String(), stderr.String())
			}
			_, serr, err := the.kubectl(t.Context(), []byte(tc.doc), append(slices.Clone(applyArgs), "--dry-run=server", "-f", "-")...)
			switch {
			case tc.server == "" && err != nil:
				t.Errorf("the server refused it: %v", err)
			case tc.server != "" && err == nil:
				t.Errorf("the server accepted it; keyhole reports %q", tc.keyhole)
			case tc.server != "" && !strings.Contains(serr, tc.server):
				t.Errorf("the server refused it, but not with %q:\n%s", tc.server, serr)
			}
		})
	}
}

// TestOmniaWithoutSandboxApply: a repository declaring the operator
// release the cluster runs, which has no sandbox feature, renders with
// --target omnia to objects the operator's CRDs accept exactly as
// rendered, and they read back unchanged.
func TestOmniaWithoutSandboxApply(t *testing.T) {
	in := filepath.Join(the.repo, "render", "testdata", "omnia-without-sandbox")
	out := filepath.Join(t.TempDir(), "out")
	keyhole(t, "render", "--target", render.TargetOmnia, "-o", out, in)
	for _, f := range listedManifests(t, out) {
		if sandboxRefused(t, f) {
			t.Errorf("%s: rendered spec.sandbox for an operator without the sandbox feature", rel(out, f))
		}
	}
	objs, live := applyRendered(t, in, out, "omnia")
	if len(objs) != 2 || len(live) != 2 {
		t.Errorf("applied %d objects, read back %d; want the AgentRuntime and the ToolRegistry", len(objs), len(live))
	}
}
