package compiler

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
)

// internConnection is a Connection of two inject entries, one with a
// value and rules, one with basic; NAME stands for its name.
const internConnection = `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: NAME, namespace: team-01}
spec:
  hosts: [api.example.com, git.example.com]
  credential: {kind: secret, secretRef: {name: tok}}
  placement:
    inject:
      - hosts: [api.example.com]
        header: Authorization
        value: "Bearer {{ .token }}"
        rules: [{methods: [GET, HEAD], pathPrefixes: [/repos]}]
      - hosts: [git.example.com]
        basic: {usernameKey: user, passwordKey: token}
`

// TestInternerShares: what recurs from document to document ends up as
// one string in memory; a Secret's values are never handed to the
// interner, and names are left as they were parsed.
func TestInternerShares(t *testing.T) {
	const canary = "CANARY-intern-never"
	docs := map[string]string{
		"Connection": internConnection,
		"Secret": `apiVersion: v1
kind: Secret
metadata: {name: NAME, namespace: team-01}
stringData:
  token: ` + canary + `
  user: x-access-token
`,
	}
	for kind, text := range docs {
		t.Run(kind, func(t *testing.T) {
			in := newInterner()
			var trees [2]*yaml.Node
			for i := range trees {
				var n yaml.Node
				if err := yaml.Unmarshal([]byte(strings.Replace(text, "NAME", fmt.Sprint("obj-", i), 1)), &n); err != nil {
					t.Fatal(err)
				}
				trees[i] = n.Content[0]
				in.document(kind, trees[i])
			}
			scalars := func(n *yaml.Node) []*yaml.Node {
				var out []*yaml.Node
				var walk func(*yaml.Node)
				walk = func(n *yaml.Node) {
					if n.Kind == yaml.ScalarNode {
						out = append(out, n)
					}
					for _, c := range n.Content {
						walk(c)
					}
				}
				walk(n)
				return out
			}
			a, b := scalars(trees[0]), scalars(trees[1])
			shared := map[string]bool{}
			for i := range a {
				if a[i].Value == b[i].Value && unsafe.StringData(a[i].Value) == unsafe.StringData(b[i].Value) {
					shared[a[i].Value] = true
				}
			}
			want := []string{"omnia.altairalabs.ai/v1alpha1", "Connection", "team-01", "secret", "Authorization", "Bearer {{ .token }}", "GET", "HEAD", "/repos", "user", "token"}
			if kind == "Secret" {
				want = []string{"v1", "Secret", "team-01", "token", "user"}
			}
			for _, w := range want {
				if !shared[w] {
					t.Errorf("%q is not shared between the two documents", w)
				}
			}
			for _, never := range []string{canary, "x-access-token", "obj-0", "api.example.com", "git.example.com"} {
				if shared[never] {
					t.Errorf("%q was interned", never)
				}
				if _, ok := in.m[never]; ok {
					t.Errorf("the interner holds %q", never)
				}
			}
		})
	}
}

// TestInternerBounded: past internMax distinct strings the interner
// returns its input and holds no more; from several goroutines at once
// it returns equal strings.
func TestInternerBounded(t *testing.T) {
	in := newInterner()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range internMax + 100 {
				s := fmt.Sprint("s-", (i+g*1000)%(internMax+100))
				if got := in.str(s); got != s {
					t.Errorf("str(%q) = %q", s, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(in.m) != internMax {
		t.Errorf("the interner holds %d strings, want its bound %d", len(in.m), internMax)
	}
	var none *interner
	if got := none.str("x"); got != "x" {
		t.Errorf("a nil interner returned %q", got)
	}
}

// TestDigestSmall: a digest is kept for every document of the input; a
// field added to it costs as much again per document as the field's
// size, and what is rare belongs in digestMore.
func TestDigestSmall(t *testing.T) {
	if size := unsafe.Sizeof(digested{}); size > 32 {
		t.Errorf("a digest is %d bytes, want at most 32", size)
	}
}

// TestDigestKinds: every kind schema.Lookup returns has its byte in a
// digest, and reads back as itself.
func TestDigestKinds(t *testing.T) {
	kinds := map[string][2]string{
		"Connection":   {schema.Group, "Connection"},
		"SandboxClass": {schema.Group, "SandboxClass"},
		"AgentRuntime": {schema.Group, "AgentRuntime"},
		"ToolRegistry": {schema.Group, "ToolRegistry"},
		"Secret":       {"v1", "Secret"},
		"Agent":        {"", "Agent"},
		"Connector":    {"", "Connector"},
	}
	for name, av := range kinds {
		t.Run(name, func(t *testing.T) {
			k, ok := schema.Lookup(av[0], av[1])
			if !ok {
				t.Fatalf("schema.Lookup(%q, %q) knows no kind", av[0], av[1])
			}
			i := kindIndex(k)
			if i == 0 {
				t.Fatalf("kind %s has no byte in a digest", k)
			}
			if got := (&digested{kind: i}).schemaKind(); got != k {
				t.Errorf("kind %s reads back as %q", k, got)
			}
		})
	}
	if got := (&digested{}).schemaKind(); got != "" {
		t.Errorf("a digest of no kind reads back as %q", got)
	}
}

// BenchmarkInternDocument interns a Connection with two inject entries
// and rules, as the digest does for each one it reads.
func BenchmarkInternDocument(b *testing.B) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(internConnection), &n); err != nil {
		b.Fatal(err)
	}
	in := newInterner()
	for b.Loop() {
		in.document("Connection", n.Content[0])
	}
}

// TestIndexedObjectsSmall: Compile keeps an item for every object it
// indexes and a secret for every Secret; what few objects need (what a
// Secret declared in other ways carries, the ignore annotation's codes)
// is kept apart or read again when asked.
func TestIndexedObjectsSmall(t *testing.T) {
	if size := unsafe.Sizeof(item{}); size > 32 {
		t.Errorf("an item is %d bytes, want at most 32", size)
	}
	if size := unsafe.Sizeof(secret{}); size > 72 {
		t.Errorf("a secret is %d bytes, want at most 72", size)
	}
	// An item and a pointer to the Connection.s wire struct.
	if size := unsafe.Sizeof(connection{}); size > 48 {
		t.Errorf("a connection is %d bytes, want at most 48", size)
	}
}

// TestSecretEditCopies: a secret copied by value (a stand-in picked in
// a namespace, a merge of two) shares what its declaration carries until
// one of them writes it; the write is its own.
func TestSecretEditCopies(t *testing.T) {
	a := &secret{declared: &secretDeclared{from: "ExternalSecret a", replaced: []string{"k"}}}
	b := *a
	b.edit().from = "ExternalSecret b"
	e := b.edit()
	e.replaced = append(e.replaced, "l")
	if got := a.decl().from; got != "ExternalSecret a" {
		t.Errorf("the original's from is %q after its copy's edit", got)
	}
	if got := a.decl().replaced; !slices.Equal(got, []string{"k"}) {
		t.Errorf("the original's replaced is %q after its copy's edit", got)
	}
	if got := b.decl().from; got != "ExternalSecret b" {
		t.Errorf("the copy's from is %q", got)
	}
	var plain secret
	if d := plain.decl(); d.from != "" || d.replaced != nil {
		t.Errorf("a plain Secret's declaration carries %+v", *d)
	}
	if plain.declared != nil {
		t.Error("reading a plain Secret's declaration allocated one")
	}
}

// TestSecretValueFault: a Secret's value is kept as a byte saying what
// config.HeaderValue found, which reads back as the error it returned;
// a key is kept for every key of every Secret, in 24 bytes.
func TestSecretValueFault(t *testing.T) {
	for _, in := range []string{"", "\n", "ok", "ok\n", "two\nlines", "cr\rhere", "nul\x00", "bell\x07", "tab\there", "del\x7f", "obs-text\xff"} {
		_, want := config.HeaderValue([]byte(in))
		v := plainValue([]byte(in))
		if !v.known {
			t.Errorf("%q: a plaintext value is not known", in)
		}
		if got := v.err(); got != want {
			t.Errorf("%q: err() is %v, want %v", in, got, want)
		}
	}
	if err := (secretValue{}).err(); err != nil {
		t.Errorf("an unknown value's err() is %v", err)
	}
	if size := unsafe.Sizeof(secretKey{}); size > 24 {
		t.Errorf("a Secret's key is %d bytes, want at most 24", size)
	}
}
