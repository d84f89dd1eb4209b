package source

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
)

// TestSecretScope: a kustomization a walk finds that declares Secrets, but
// names none of keyhole's kinds, is built only when a Secret it makes may
// be one a Connection reads; anything that leaves the name in doubt builds
// it, since skipping a Secret a Connection reads would report it missing.
func TestSecretScope(t *testing.T) {
	conn := func(secret string) string {
		return "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c}\nspec: {credential: {secretRef: {name: " + secret + "}}}\n"
	}
	secret := func(name string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\nstringData: {token: x}\n"
	}
	tests := map[string]struct {
		files map[string]string
		built bool
		note  string // in the InputSkipped note when not built
	}{
		"a Secret of the name read": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\n", "infra/s.yaml": secret("acme-token"),
		}, built: true},
		"a Secret of another name": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\n", "infra/s.yaml": secret("db-password"),
		}, note: "the names it gives Secrets (db-password)"},
		"a generator whose name a prefix completes": {files: map[string]string{
			"infra/kustomization.yaml": "namePrefix: acme-\nsecretGenerator:\n- name: token\n  literals: [token=x]\n",
		}, built: true},
		"a generator of another name": {files: map[string]string{
			"infra/kustomization.yaml": "secretGenerator:\n- name: db\n  literals: [password=x]\n",
		}, note: "(db)"},
		"a name through an alias": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\n",
			"infra/s.yaml":             "apiVersion: v1\nkind: Secret\nx: &n db\nmetadata: {name: *n}\n",
		}, built: true},
		"a name with a variable": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\n", "infra/s.yaml": secret("${NAME}"),
		}, built: true},
		"replacements into a Secret's name": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml, c.yaml]\nreplacements:\n- source: {kind: ConfigMap, name: c, fieldPath: data.n}\n  targets:\n  - select: {kind: Secret}\n    fieldPaths: [metadata.name]\n",
			"infra/s.yaml":             secret("db"), "infra/c.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {n: acme-token}\n",
		}, built: true},
		"replacements into a Deployment": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\nreplacements:\n- source: {kind: ConfigMap, name: c, fieldPath: data.n}\n  targets:\n  - select: {kind: Deployment}\n    fieldPaths: [metadata.name]\n",
			"infra/s.yaml":             secret("db"),
		}, note: "(db)"},
		"replacements without a kind into the namespace": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\nreplacements:\n- source: {kind: ConfigMap, name: c, fieldPath: data.n}\n  targets:\n  - select: {name: db}\n    fieldPaths: [metadata.namespace]\n",
			"infra/s.yaml":             secret("db"),
		}, note: "(db)"},
		"a JSON patch of a Secret's name": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\npatches:\n- path: p.yaml\n  target: {kind: Secret}\n",
			"infra/p.yaml":             "- {op: replace, path: /metadata/name, value: acme-token}\n", "infra/s.yaml": secret("db"),
		}, built: true},
		"a JSON patch of a webhook's name": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\npatches:\n- path: p.yaml\n  target: {kind: ValidatingWebhookConfiguration}\n",
			"infra/p.yaml":             "- {op: replace, path: /metadata/name, value: acme-token}\n", "infra/s.yaml": secret("db"),
		}, note: "(db)"},
		"a patch of the namespace only": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\npatches:\n- patch: '[{op: replace, path: /metadata/namespace, value: x}]'\n  target: {name: db}\n",
			"infra/s.yaml":             secret("db"),
		}, note: "(db)"},
		"a patch allowed to rename": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\npatches:\n- path: p.yaml\n  target: {name: db}\n  options: {allowNameChange: true}\n",
			"infra/p.yaml":             "apiVersion: v1\nkind: Secret\nmetadata: {name: other}\n", "infra/s.yaml": secret("db"),
		}, built: true},
		"an ExternalSecret whose target is read": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [es.yaml]\n",
			"infra/es.yaml":            "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: es}\nspec: {target: {name: acme-token}}\n",
		}, built: true},
		"a SealedSecret whose template is read": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [ss.yaml]\n",
			"infra/ss.yaml":            "apiVersion: bitnami.com/v1alpha1\nkind: SealedSecret\nmetadata: {name: ss}\nspec: {template: {metadata: {name: acme-token}}}\n",
		}, built: true},
		"a Helm chart": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\nhelmCharts:\n- name: x\n", "infra/s.yaml": secret("db"),
		}, built: true},
		"a remote base": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml, 'https://github.com/acme/base?ref=v1']\n", "infra/s.yaml": secret("acme-token"),
		}, note: "names a remote base"},
		"a Flux substitution beside the Connection": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\n", "infra/s.yaml": secret("db"),
			"apps/conn.yaml": conn("${SECRET}"),
		}, built: true},
		"a Secret's name in prose only": {files: map[string]string{
			"infra/kustomization.yaml": "resources: [s.yaml]\n", "infra/s.yaml": secret("db"),
			"infra/notes.py": "x = {'kind': 'Secret', 'name': 'acme-token'}\n",
		}, note: "(db)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"apps/conn.yaml": conn("acme-token")}
			for k, v := range tc.files {
				files[k] = v
			}
			writeFiles(t, dir, files)
			docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			// Built, or its build tried (a Helm chart without helm fails).
			built := slices.ContainsFunc(docs, func(d *Document) bool { return strings.HasPrefix(d.File, "infra/") }) ||
				slices.ContainsFunc(ds, func(d diag.Diagnostic) bool { return strings.Contains(d.Message, "kustomize cannot build it here (") })
			noted := slices.ContainsFunc(ds, func(d diag.Diagnostic) bool {
				return d.Pos.File == "infra/kustomization.yaml" && strings.Contains(d.Message, "kustomization not built") && strings.Contains(d.Message, tc.note)
			})
			if built != tc.built || (!tc.built && !noted) {
				t.Fatalf("built %v, noted %v; want built %v (note %q)\n%v", built, noted, tc.built, tc.note, ds)
			}
		})
	}
}

func FuzzSecretDocNames(f *testing.F) {
	f.Add("apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n---\nkind: ExternalSecret\nspec: {target: {name: b}}\n")
	f.Add("kind: Secret\nmetadata: {name: *x}\n")
	f.Fuzz(func(t *testing.T, data string) {
		names, sure := secretDocNames("f.yaml", []byte(data))
		for _, n := range names {
			if n == "" || strings.ContainsFunc(n, func(r rune) bool { return r > 127 || !isNameByte(byte(r)) }) {
				t.Fatalf("name %q is not plain (sure %v)", n, sure)
			}
		}
	})
}

// TestRefTextKeepsPathsUntilAsked: the scope pass keeps the paths of the
// files that name keyhole's kinds, not their text, which in a large
// repository is all of it; the text is read when a kustomization asks.
func TestRefTextKeepsPathsUntilAsked(t *testing.T) {
	dir := t.TempDir()
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata:\n  name: c\nspec:\n  credential:\n    secretRef:\n      name: named-secret\n"
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(conn), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := newLoader(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	found, refs := l.mayHoldConnections([]string{dir})
	if !found || len(refs.text) != 0 || len(refs.files) != 1 {
		t.Fatalf("found %v, %d bytes of text and files %q; want found, no text and c.yaml", found, len(refs.text), refs.files)
	}
	refs.read(l.fsys)
	if !bytes.Contains(refs.text, []byte("named-secret")) || refs.files != nil {
		t.Errorf("after read: text %q, files %q", refs.text, refs.files)
	}
}
