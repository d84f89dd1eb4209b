//go:build e2e

package apiserver

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/cli"
	"keyhole.dev/keyhole/render"
)

// fieldManager owns every field the tests apply, as one GitOps tool
// would, so re-applying another render of the same names updates them.
const fieldManager = "keyhole-e2e"

// applyArgs is how every object reaches the server: server-side apply,
// which runs the server's full validation, with strict field validation,
// so an unknown or duplicate field is an error rather than a warning.
var applyArgs = []string{"apply", "--server-side", "--field-manager=" + fieldManager, "--validate=strict"}

// TestRenderedExamplesApply renders every example in both proxy modes
// with `keyhole render -o DIR`, applies each rendered directory, and reads
// every object back: each must exist and hold what was rendered. The same
// render as one stream (`keyhole render --stdout`, Argo CD's plugin) must
// pass a server dry run too.
func TestRenderedExamplesApply(t *testing.T) {
	for _, ex := range examples(t) {
		for _, mode := range []string{render.ModeSidecar, render.ModeDeployment} {
			t.Run(filepath.Base(ex)+"/"+mode, func(t *testing.T) {
				ctx := t.Context()
				out := filepath.Join(t.TempDir(), "out")
				keyhole(t, "render", "--proxy-mode", mode, "-o", out, ex)
				objs, live := applyRendered(t, ex, out, "Kubernetes")
				if len(live) != len(objs) {
					t.Errorf("read back %d objects, rendered %d", len(live), len(objs))
				}

				noSecretValues(t, ex, out, live)

				stream := keyhole(t, "render", "--proxy-mode", mode, "--stdout", ex)
				_, stderr, err := the.kubectl(ctx, stream, append(slices.Clone(applyArgs), "--dry-run=server", "-f", "-")...)
				if err != nil {
					t.Fatalf("the --stdout stream of %s: %v", ex, err)
				}
				noWarnings(t, stderr)
			})
		}
	}
}

// applyRendered applies every manifest the kustomization in out lists,
// with strict field validation and no warnings allowed, reads each object
// back and checks every rendered field came back unchanged. what names
// the kind of render in a failure.
func applyRendered(t *testing.T, ex, out, what string) ([]object, map[string]map[string]any) {
	t.Helper()
	files := listedManifests(t, out)
	objs := readObjects(t, files...)
	if len(objs) == 0 {
		t.Fatalf("%s rendered no %s objects", ex, what)
	}
	ensureNamespaces(t, objs)
	args := slices.Clone(applyArgs)
	for _, f := range files {
		args = append(args, "-f", f)
	}
	_, stderr := mustKubectl(t, nil, args...)
	noWarnings(t, stderr)
	live := readBack(t, files)
	for _, o := range objs {
		got, ok := live[o.key()]
		if !ok {
			t.Errorf("%s (from %s) is not on the server after apply", o.key(), rel(out, o.file))
			continue
		}
		for _, d := range subset(o.key(), o.doc, got) {
			t.Errorf("%s: %s", rel(out, o.file), d)
		}
	}
	return objs, live
}

// TestRenderedOmniaApply renders every example with --target omnia,
// applies the rendered directory against the operator's published CRDs
// (AgentRuntime, ToolRegistry) and keyhole's (Connection, SandboxClass),
// and reads every object back: the operator's cluster must accept what the
// target emits. The published operator CRDs have no sandbox feature yet,
// so each AgentRuntime's spec.sandbox is first shown to be the one field
// they refuse, then left out (sandboxRefused).
func TestRenderedOmniaApply(t *testing.T) {
	for _, ex := range examples(t) {
		t.Run(filepath.Base(ex), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			keyhole(t, "render", "--target", render.TargetOmnia, "-o", out, ex)
			operatorKinds := 0
			for _, f := range listedManifests(t, out) {
				if sandboxRefused(t, f) {
					operatorKinds++
				}
			}
			if operatorKinds == 0 {
				t.Errorf("%s rendered no AgentRuntime or ToolRegistry with the sandbox binding", ex)
			}
			_, live := applyRendered(t, ex, out, "omnia")
			noSecretValues(t, ex, out, live)
		})
	}
}

// TestExampleInputsApply applies the omnia.altairalabs.ai objects each
// example is written in against the CRDs a cluster running the operator
// serves: the operator's own for AgentRuntime and ToolRegistry, keyhole's
// (`keyhole schema --crds`) for the rest. A repository keyhole compiles
// must also be accepted there, and must come back as written, except for
// spec.sandbox, which the published operator CRDs do not declare yet
// (sandboxRefused shows it is the one field they refuse).
func TestExampleInputsApply(t *testing.T) {
	tested := 0
	for _, ex := range examples(t) {
		var inputs []object
		for _, o := range readObjects(t, yamlFiles(t, ex)...) {
			if !strings.HasPrefix(o.apiVersion(), "omnia.altairalabs.ai/") {
				continue
			}
			if spec, _ := o.doc["spec"].(map[string]any); spec["sandbox"] != nil && (o.kind() == "AgentRuntime" || o.kind() == "ToolRegistry") {
				b, err := yaml.Marshal(o.doc)
				if err != nil {
					t.Fatal(err)
				}
				copyFile := filepath.Join(t.TempDir(), filepath.Base(o.file))
				if err := os.WriteFile(copyFile, b, 0o600); err != nil {
					t.Fatal(err)
				}
				if !sandboxRefused(t, copyFile) {
					t.Fatalf("%s: spec.sandbox was not refused", o.file)
				}
				delete(spec, "sandbox")
			}
			inputs = append(inputs, o)
		}
		if len(inputs) == 0 {
			continue // an agent.yaml-only repository: nothing for the CRDs to accept
		}
		tested++
		t.Run(filepath.Base(ex), func(t *testing.T) {
			ensureNamespaces(t, inputs)
			var stream bytes.Buffer
			for _, o := range inputs {
				b, err := yaml.Marshal(o.doc)
				if err != nil {
					t.Fatal(err)
				}
				stream.WriteString("---\n")
				stream.Write(b)
			}
			_, stderr := mustKubectl(t, stream.Bytes(), append(slices.Clone(applyArgs), "-f", "-")...)
			noWarnings(t, stderr)
			for _, o := range inputs {
				args := []string{"get", "-o", "yaml", o.resource(), o.name()}
				if ns := o.namespace(); ns != "" {
					args = append(args, "-n", ns)
				}
				out, _ := mustKubectl(t, nil, args...)
				var got map[string]any
				if err := yaml.Unmarshal([]byte(out), &got); err != nil {
					t.Fatalf("decoding %s: %v", o.key(), err)
				}
				for _, d := range subset(o.key(), o.doc, got) {
					t.Errorf("%s: %s", rel(the.repo, o.file), d)
				}
			}
		})
	}
	if tested == 0 {
		t.Fatal("no example holds an omnia.altairalabs.ai object")
	}
}

// TestStrictFieldValidation proves the apply above is strict: each object
// is accepted by a server dry run as written, and rejected once a field
// the schema does not declare is added. Without this, a server that
// silently pruned unknown fields would pass every test.
func TestStrictFieldValidation(t *testing.T) {
	tests := map[string]struct {
		valid string
		// typo turns valid into the bad object: its first element, replaced
		// by its second, adds a field the schema does not declare.
		typo [2]string
		// wantErr is in the server's error for the bad object.
		wantErr string
	}{
		"built-in kind, top-level field": {
			valid: `
apiVersion: v1
kind: ConfigMap
metadata: {name: strict-check, namespace: default}
data: {a: b}
`,
			typo:    [2]string{"data: {a: b}", "data: {a: b}\ndta: {a: b}"},
			wantErr: ".dta: field not declared in schema",
		},
		"built-in kind, nested field": {
			valid: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: strict-check, namespace: default}
spec:
  selector: {matchLabels: {app: strict-check}}
  template:
    metadata: {labels: {app: strict-check}}
    spec:
      containers:
        - {name: main, image: example.com/main:1, imagePullPolicy: Always}
`,
			typo:    [2]string{"imagePullPolicy", "imagePullPolcy"},
			wantErr: "imagePullPolcy: field not declared in schema",
		},
		"cert-manager CRD": {
			valid: `
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: strict-check, namespace: default}
spec:
  secretName: strict-check
  commonName: strict-check
  isCA: true
  issuerRef: {name: strict-check, kind: Issuer}
`,
			typo:    [2]string{"commonName", "commonNam"},
			wantErr: ".spec.commonNam: field not declared in schema",
		},
		"keyhole CRD": {
			valid: `
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: strict-check, namespace: default}
spec:
  hosts: [api.github.com]
  credential:
    kind: secret
    secretRef: {name: strict-check}
  placement:
    inject:
      - hosts: [api.github.com]
        header: Authorization
        value: "Bearer {{ .token }}"
`,
			typo:    [2]string{"header", "headr"},
			wantErr: "headr: field not declared in schema",
		},
		"operator CRD": {
			valid: `
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: AgentRuntime
metadata: {name: strict-check, namespace: default}
spec:
  promptPackRef: {name: strict-check}
  facades: [{type: websocket}]
  runtime: {replicas: 1}
`,
			typo:    [2]string{"replicas", "replica"},
			wantErr: ".spec.runtime.replica: field not declared in schema",
		},
	}
	dryRun := append(slices.Clone(applyArgs), "--dry-run=server", "-f", "-")
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			if _, _, err := the.kubectl(ctx, []byte(tc.valid), dryRun...); err != nil {
				t.Fatalf("the valid object was refused, so the check below proves nothing: %v", err)
			}
			if strings.Count(tc.valid, tc.typo[0]) != 1 {
				t.Fatalf("%q is not once in the valid object", tc.typo[0])
			}
			bad := strings.Replace(tc.valid, tc.typo[0], tc.typo[1], 1)
			_, stderr, err := the.kubectl(ctx, []byte(bad), dryRun...)
			if err == nil {
				t.Fatalf("an object with an undeclared field was accepted")
			}
			if !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("refused, but not for the undeclared field: want %q in\n%s", tc.wantErr, stderr)
			}
		})
	}
}

// examples returns every example repository that must render: each
// directory under examples/ that holds keyhole input (an agent.yaml or an
// omnia.altairalabs.ai object; a keyhole.yaml alone is a Config, which
// examples/flux holds beside its deployment wiring) outside a directory
// with an expected.txt. Those fail the check on purpose and cli's tests
// compare their output. So broken/ and kustomize-overlay/ (broken on
// purpose) and argocd/ and flux/ (deployment examples, not inputs) are
// left out, and a new example is picked up without editing this test.
// An example whose inputs Argo CD Applications deploy (argocd-repo) is
// one render per Application, each its own unit in its own namespace,
// not one directory to apply: cli's TestArgoCDPluginGenerate
// renders it as Argo CD's plugin does.
func examples(t *testing.T) []string {
	t.Helper()
	root := filepath.Join(the.repo, "examples")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		input, err := hasKeyholeInput(dir)
		if err != nil {
			t.Fatal(err)
		}
		if input {
			dirs = append(dirs, dir)
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("no example under %s holds keyhole input", root)
	}
	return dirs
}

// hasKeyholeInput reports whether dir holds keyhole input outside any
// directory that has an expected.txt, and no Argo CD object.
func hasKeyholeInput(dir string) (bool, error) {
	found, argo := false, false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || argo {
			return err
		}
		if d.IsDir() {
			if _, err := os.Stat(filepath.Join(path, "expected.txt")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.Name() == "agent.yaml":
			found = true
		case isYAML(path):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			dec := yaml.NewDecoder(bytes.NewReader(b))
			for {
				var doc struct {
					APIVersion string `yaml:"apiVersion"`
				}
				if dec.Decode(&doc) != nil {
					break // EOF, or YAML the check would report: not this test's concern
				}
				switch {
				case strings.HasPrefix(doc.APIVersion, "omnia.altairalabs.ai/"):
					found = true
				case strings.HasPrefix(doc.APIVersion, "argoproj.io/"):
					argo = true
				}
			}
		}
		return nil
	})
	return found && !argo, err
}

// keyhole runs the keyhole command in-process, as `keyhole ARGS...` from
// the repository root, and returns its stdout; a non-zero exit fails t.
func keyhole(t *testing.T, args ...string) []byte {
	t.Helper()
	// An example (or a test's input directory) is a repository of its
	// own, whose keyhole.yaml is at its root: keyhole reads the Config at
	// the root of the enclosing git working tree, this one's, so the
	// directory is copied out of it, as a user copies an example, and
	// rendered from inside the copy.
	if n := len(args); n > 0 && strings.HasPrefix(args[n-1], the.repo+string(filepath.Separator)) {
		if fi, err := os.Stat(args[n-1]); err == nil && fi.IsDir() {
			dir := filepath.Join(t.TempDir(), filepath.Base(args[n-1]))
			if err := os.CopyFS(dir, os.DirFS(args[n-1])); err != nil {
				t.Fatal(err)
			}
			t.Chdir(dir)
			args = append(slices.Clone(args[:n-1]), ".")
		}
	}
	var stdout, stderr bytes.Buffer
	if code := cli.Main(args, &stdout, &stderr); code != 0 {
		t.Fatalf("keyhole %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.Bytes()
}

// listedManifests returns the manifests kustomization.yaml lists, as
// absolute paths, after checking it lists every YAML file the render
// wrote: a manifest the kustomization missed would never be deployed.
func listedManifests(t *testing.T, out string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	var listed []string
	for _, r := range k.Resources {
		listed = append(listed, filepath.Join(out, filepath.FromSlash(r)))
	}
	onDisk := slices.DeleteFunc(yamlFiles(t, out), func(path string) bool {
		return path == filepath.Join(out, "kustomization.yaml")
	})
	slices.Sort(listed)
	slices.Sort(onDisk)
	if !slices.Equal(listed, onDisk) {
		t.Fatalf("kustomization.yaml lists %q, the render wrote %q", listed, onDisk)
	}
	return listed
}

func isYAML(path string) bool {
	return strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")
}

// object is one Kubernetes object read from a file.
type object struct {
	file string
	doc  map[string]any
}

func (o object) str(keys ...string) string {
	var v any = o.doc
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

func (o object) apiVersion() string { return o.str("apiVersion") }
func (o object) kind() string       { return o.str("kind") }
func (o object) namespace() string  { return o.str("metadata", "namespace") }
func (o object) name() string       { return o.str("metadata", "name") }

// key names the object the way the read-back looks it up.
func (o object) key() string {
	return o.apiVersion() + " " + o.kind() + " " + o.namespace() + "/" + o.name()
}

// resource is the kubectl resource argument, KIND.VERSION.GROUP, so the
// lookup is exact even when two groups serve the same kind.
func (o object) resource() string {
	group, version, ok := strings.Cut(o.apiVersion(), "/")
	if !ok {
		return o.kind() + "." + group + "."
	}
	return o.kind() + "." + version + "." + group
}

// readObjects decodes every YAML document of files that has an apiVersion
// and a kind; empty documents and others (agent.yaml) are skipped.
func readObjects(t *testing.T, files ...string) []object {
	t.Helper()
	var objs []object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range decodeAll(t, f, b) {
			o := object{file: f, doc: doc}
			if o.apiVersion() == "" || o.kind() == "" {
				continue
			}
			objs = append(objs, o)
		}
	}
	return objs
}

func decodeAll(t *testing.T, name string, b []byte) []map[string]any {
	t.Helper()
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// ensureNamespaces creates the namespaces objs live in; a cluster has
// them before a GitOps tool applies a render into them.
func ensureNamespaces(t *testing.T, objs []object) {
	t.Helper()
	var names []string
	for _, o := range objs {
		if ns := o.namespace(); ns != "" && !slices.Contains(names, ns) {
			names = append(names, ns)
		}
	}
	if len(names) == 0 {
		return
	}
	var stream strings.Builder
	for _, ns := range names {
		fmt.Fprintf(&stream, "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns)
	}
	mustKubectl(t, []byte(stream.String()), append(slices.Clone(applyArgs), "-f", "-")...)
}

// readBack gets the live objects the files describe, keyed like
// object.key.
func readBack(t *testing.T, files []string) map[string]map[string]any {
	t.Helper()
	args := []string{"get", "-o", "yaml"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	out, _ := mustKubectl(t, nil, args...)
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("decoding kubectl get: %v", err)
	}
	items := []any{doc}
	if (object{doc: doc}).kind() == "List" {
		items, _ = doc["items"].([]any)
	}
	live := map[string]map[string]any{}
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			t.Fatalf("kubectl get returned a %T item", it)
		}
		live[object{doc: m}.key()] = m
	}
	return live
}

// noSecretValues checks that no value of a Secret in the example's inputs
// appears in any rendered file or in what the server stored. It names the
// file and the Secret key, never the value.
func noSecretValues(t *testing.T, ex, out string, live map[string]map[string]any) {
	t.Helper()
	values := secretValues(t, ex)
	var outputs []struct{ name, text string }
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		outputs = append(outputs, struct{ name, text string }{rel(out, path), string(b)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, m := range live {
		b, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, struct{ name, text string }{"the server's " + k, string(b)})
	}
	for _, o := range outputs {
		for _, v := range values {
			if strings.Contains(o.text, v.value) {
				t.Errorf("%s holds the value of Secret key %s", o.name, v.name)
			}
		}
	}
}

// yamlFiles lists the YAML files under dir.
func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isYAML(path) {
			return err
		}
		files = append(files, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

type secretValue struct{ name, value string }

// secretValues returns the values of every Secret among the example's
// inputs, from stringData and base64-decoded data.
func secretValues(t *testing.T, ex string) []secretValue {
	t.Helper()
	var vals []secretValue
	for _, o := range readObjects(t, yamlFiles(t, ex)...) {
		if o.apiVersion() != "v1" || o.kind() != "Secret" {
			continue
		}
		for _, field := range []string{"stringData", "data"} {
			m, _ := o.doc[field].(map[string]any)
			for k, v := range m {
				s, _ := v.(string)
				if field == "data" {
					dec, err := base64.StdEncoding.DecodeString(s)
					if err != nil {
						t.Fatalf("%s: Secret %s data.%s is not base64", o.file, o.name(), k)
					}
					s = string(dec)
				}
				if s != "" {
					vals = append(vals, secretValue{name: o.name() + "/" + k, value: s})
				}
			}
		}
	}
	return vals
}

// mustKubectl runs kubectl and fails t when it fails.
func mustKubectl(t *testing.T, stdin []byte, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, err := the.kubectl(t.Context(), stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return stdout, stderr
}

// noWarnings fails t on a warning the server returned: a deprecated
// field, an ignored value or anything else a real cluster would print
// when the render is applied.
func noWarnings(t *testing.T, stderr string) {
	t.Helper()
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "Warning:") {
			t.Errorf("the server warned: %s", line)
		}
	}
}

func rel(base, path string) string {
	if r, err := filepath.Rel(base, path); err == nil {
		return r
	}
	return path
}
