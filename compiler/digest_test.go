package compiler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/engines"
	"keyhole.dev/keyhole/source/fixture"
)

// TestDigestKeepsNoSecretValue digests Secrets whose every value is a
// canary (plain, base64, one with a line break, one under a key the API
// server refuses) and requires the canary nowhere in what Digest keeps:
// a released Secret's values must not outlive its tree.
func TestDigestKeepsNoSecretValue(t *testing.T) {
	const canary = "CANARY-5e1d-do-not-keep"
	dir := t.TempDir()
	in := `apiVersion: v1
kind: Secret
metadata: {name: plain, namespace: agents}
stringData:
  token: ` + canary + `
  "bad key!": ` + canary + `
  multi: "` + canary + `\nsecond line"
---
apiVersion: v1
kind: Secret
metadata: {name: encoded, namespace: agents}
data:
  token: Q0FOQVJZLTVlMWQtZG8tbm90LWtlZXA=
  "also bad/": Q0FOQVJZLTVlMWQtZG8tbm90LWtlZXA=
`
	if err := os.WriteFile(filepath.Join(dir, "secrets.yaml"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	v := fixture.Validator(t)
	docs, _, err := source.Load([]string{filepath.Join(dir, "secrets.yaml")}, source.Options{Engines: engines.All(), Digest: Digest(v, Options{})})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("%d documents, want 2", len(docs))
	}
	for _, d := range docs {
		if !d.Released() {
			t.Errorf("%s: a valid Secret's tree was kept", d.Object())
		}
		dg, _ := d.Digested().(*digested)
		sd, ok := dg.wire.(*secretDigest)
		if !ok {
			t.Fatalf("%s: digest holds %T, want the Secret's keys", d.Object(), dg.wire)
		}
		if got := fmt.Sprintf("%#v %#v", *dg, *sd); strings.Contains(got, canary) || strings.Contains(got, "Q0FOQVJZ") {
			t.Errorf("%s: the digest keeps a value: %s", d.Object(), got)
		}
		if len(sd.values) == 0 {
			t.Errorf("%s: the digest lost the keys", d.Object())
		}
	}
	// What the checks say of them is the same as from the trees, and
	// quotes no value either.
	res := Compile(docs, v, Options{})
	if out := string(render(res.Diagnostics)); strings.Contains(out, canary) || !strings.Contains(out, "bad key!") {
		t.Errorf("diagnostics:\n%s", out)
	}
}

// TestDigestOperatorOtherThanConfigs covers an AgentRuntime digested
// against another operator than the one the Compile ends up with (as when
// a source.Memo carries it over from a load under another keyhole.yaml):
// Compile digests it again from its tree, read again from the file, and
// finds what a Compile without Digest does.
func TestDigestOperatorOtherThanConfigs(t *testing.T) {
	dir := filepath.Join("testdata", "checks", "operator-schema")
	v := fixture.Validator(t)
	in := newInterner()
	other := func(d *source.Document) (any, bool) {
		other, err := schema.LookupOperator("v0.9.0-beta.17")
		if err != nil {
			t.Fatal(err)
		}
		dg := digestOf(v, other, in, d)
		if dg == nil {
			return nil, false
		}
		return dg, dg.release
	}
	var results []Result
	released := 0
	for _, digest := range []source.Digest{nil, other} {
		docs, ds, err := source.Load([]string{dir}, source.Options{Engines: engines.All(), Digest: digest})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.Released() && (d.Object().Kind == "AgentRuntime" || d.Object().Kind == "ToolRegistry") {
				released++
			}
		}
		results = append(results, Compile(docs, v, Options{Loaded: ds}))
	}
	if released == 0 {
		t.Fatal("no AgentRuntime or ToolRegistry was released: the test tests nothing")
	}
	sameResult(t, results[0], results[1])
	if !strings.Contains(string(render(results[1].Diagnostics)), codeOperatorSchemaInvalid) {
		t.Fatalf("no operator findings:\n%s", render(results[1].Diagnostics))
	}
}

// TestReleasedFileChanged edits a file between the load and the compile:
// a diagnostic about a released document then points at the object, says
// why, and nothing panics.
func TestReleasedFileChanged(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "conn.yaml")
	in := `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: github, namespace: agents}
spec:
  hosts: [api.github.com]
  credential:
    kind: secret
    secretRef: {name: missing}
  placement:
    inject:
      - hosts: [api.github.com]
        header: Authorization
        value: "Bearer {{ .token }}"
`
	if err := os.WriteFile(file, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	docs, ds, v := loadDigested(t, dir)
	if len(docs) != 1 || !docs[0].Released() {
		t.Fatalf("want one released document, got %d:\n%s", len(docs), render(Compile(docs, v, Options{Loaded: ds}).Diagnostics))
	}
	if err := os.WriteFile(file, []byte("# emptied\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := Compile(docs, v, Options{Loaded: ds})
	out := string(render(res.Diagnostics))
	if !strings.Contains(out, "SecretMissing") || !strings.Contains(out, source.ErrChanged.Error()) || !strings.Contains(out, docs[0].Pos.String()) {
		t.Fatalf("diagnostics:\n%s", out)
	}
}

// TestDigestSaysWhatItIs: for every document of the examples that Digest
// decoded, the digest says what the document is, as the tree says it, so
// that the loader keeps no copy of it (source.ObjectDigest).
func TestDigestSaysWhatItIs(t *testing.T) {
	v := fixture.Validator(t)
	dirs, err := filepath.Glob("../examples/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	decoded := 0
	for _, dir := range dirs {
		docs, _, err := source.Load([]string{dir}, source.Options{Engines: engines.All(), Digest: Digest(v, Options{})})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			dg, _ := d.Digested().(*digested)
			if dg == nil || dg.wire == nil {
				continue
			}
			decoded++
			o, ok := dg.DigestObject()
			if tree, err := d.Tree(); err == nil {
				fresh := *d
				fresh.Node = tree
				if want := fresh.Object(); !ok || o != want {
					t.Errorf("%s: the digest says %+v (%v), the tree %+v", d.Pos, o, ok, want)
				}
			} else {
				t.Errorf("%s: %v", d.Pos, err)
			}
		}
	}
	if decoded < 10 {
		t.Errorf("%d documents decoded in the examples, want at least 10", decoded)
	}
}

// TestDigestOperatorFromConfig: the operator keyhole.yaml names, which
// the loader reads before it walks, is the one AgentRuntimes are checked
// against as they are digested; the flag wins over it. Either way the
// digests hold what the Compile reports, with nothing to check again.
func TestDigestOperatorFromConfig(t *testing.T) {
	declared, err := schema.LookupOperator("v0.9.0-beta.17")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		dir  string
		opts Options
		want schema.Operator
	}{
		"keyhole.yaml names it": {dir: filepath.Join("testdata", "checks", "operator-sandbox-unsupported"), want: declared},
		"the flag names it":     {dir: "../examples/github-acme", opts: Options{OperatorVersion: "v0.9.0-beta.17"}, want: declared},
		"nothing names it":      {dir: filepath.Join("testdata", "checks", "operator-schema"), want: schema.DefaultOperator()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := fixture.Validator(t)
			docs, _ := fixture.Load(t, tc.dir, Digest(v, tc.opts))
			owners := 0
			for _, d := range docs {
				dg, _ := d.Digested().(*digested)
				if dg == nil || dg.operator == 0 {
					continue
				}
				owners++
				if dg.operator != operatorIndex(tc.want) {
					t.Errorf("%s: digested for operator %s, want %s", d.Object(), operatorVersions()[dg.operator-1], tc.want.Version)
				}
				if !d.Released() && len(dg.schemaFindings()) == 0 {
					t.Errorf("%s: the tree of an object that passed its schema was kept", d.Object())
				}
			}
			if owners == 0 {
				t.Fatal("no AgentRuntime or ToolRegistry was digested: the test tests nothing")
			}
			if made := digestAll(docs, v, tc.want, 0); len(made) > 0 {
				for d := range made {
					if dg, _ := d.Digested().(*digested); dg != nil {
						t.Errorf("%s: digested again", d.Object())
					}
				}
			}
		})
	}
}

// loadDigested loads path with Digest, as the CLI does, and returns the
// documents, the loader's diagnostics and the validator.
func loadDigested(t *testing.T, path string) ([]*source.Document, diag.List, *schema.Validator) {
	t.Helper()
	v := fixture.Validator(t)
	docs, ds, err := source.Load([]string{path}, source.Options{Engines: engines.All(), Digest: Digest(v, Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return docs, ds, v
}
