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
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	docs, _, err := source.Load([]string{filepath.Join(dir, "secrets.yaml")}, source.Options{Digest: Digest(v, Options{})})
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
		dg := digestOfDoc(d)
		sd, ok := dg.decoded().(*secretDigest)
		if !ok {
			t.Fatalf("%s: digest holds %T, want the Secret's keys", d.Object(), dg.decoded())
		}
		if got := fmt.Sprintf("%#v %#v %#v", *dg, *sd, sd.p.values()); strings.Contains(got, canary) || strings.Contains(got, "Q0FOQVJZ") {
			t.Errorf("%s: the digest keeps a value: %s", d.Object(), got)
		}
		if len(sd.p.values()) == 0 {
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
// keyhole.yaml names a version): its findings are made again from its
// tree, read again from the file, and are those of a Compile without
// Digest.
func TestDigestOperatorOtherThanConfigs(t *testing.T) {
	dir := filepath.Join("testdata", "checks", "operator-schema")
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	in := newInterner()
	other := func(d *source.Document) (any, bool) {
		dg := digestOf(v, schema.Operator{Version: "v0.0.0-not-this-one"}, in, d)
		if dg == nil {
			return nil, false
		}
		return dg, dg.release
	}
	var results []Result
	released := 0
	for _, digest := range []source.Digest{nil, other} {
		docs, ds, err := source.Load([]string{dir}, source.Options{Digest: digest})
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
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob("../examples/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	decoded := 0
	for _, dir := range dirs {
		docs, _, err := source.Load([]string{dir}, source.Options{Digest: Digest(v, Options{})})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			dg := digestOfDoc(d)
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

// TestDigestOperatorCheckInTheDigest: an AgentRuntime the operator's
// schemas accept carries what it was checked against, and whether it
// sets spec.sandbox, in the digest itself, with nothing in digestMore
// (which cost 144 bytes an object); one they refuse keeps its findings
// there, and both read back as the tree says.
func TestDigestOperatorCheckInTheDigest(t *testing.T) {
	docs, _, v := loadDigested(t, filepath.Join("testdata", "checks", "operator-schema"))
	op := schema.DefaultOperator()
	var accepted, refused int
	for _, d := range docs {
		dg := digestOfDoc(d)
		if dg == nil || dg.schemaKind() != schema.KindAgentRuntime && dg.schemaKind() != schema.KindToolRegistry || len(dg.schemaFindings()) > 0 {
			continue
		}
		if !dg.checkedAgainst(op) {
			t.Errorf("%s: the digest says it was not checked against %s", d.Object(), op.Version)
		}
		if dg.checkedAgainst(schema.Operator{Version: "v0.0.0-not-this-one"}) {
			t.Errorf("%s: the digest says it was checked against an operator keyhole does not know", d.Object())
		}
		n, err := d.Tree()
		if err != nil {
			t.Fatal(err)
		}
		sp, _ := child(n, "spec")
		sb, _ := child(sp, "sandbox")
		if dg.sandbox != (sb != nil) {
			t.Errorf("%s: the digest says spec.sandbox is set: %v", d.Object(), dg.sandbox)
		}
		want := v.ValidateOperator(op, dg.schemaKind(), n)
		if got := dg.opFindings(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: the digest's operator findings are %v, want %v", d.Object(), got, want)
		}
		if len(want) == 0 {
			accepted++
			if dg.more != nil {
				t.Errorf("%s: an accepted object's digest keeps %+v", d.Object(), *dg.more)
			}
		} else {
			refused++
		}
	}
	if accepted == 0 || refused == 0 {
		t.Errorf("%d accepted and %d refused objects, want some of each", accepted, refused)
	}
}

// loadDigested loads path with Digest, as the CLI does, and returns the
// documents, the loader's diagnostics and the validator.
func loadDigested(t *testing.T, path string) ([]*source.Document, diag.List, *schema.Validator) {
	t.Helper()
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	docs, ds, err := source.Load([]string{path}, source.Options{Digest: Digest(v, Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return docs, ds, v
}
