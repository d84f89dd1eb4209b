package compiler

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// slabDocs are objects of every decoded kind a digest keeps, with the
// shapes packing must keep apart: empty lists (not nil), absent lists
// (nil), pointers set and unset, a string too long for a byte block and a
// list too long for a block of values.
var slabDocs = map[string]struct {
	kind string
	text string
}{
	"connection": {"Connection", internConnection},
	"connection with empty and absent lists": {"Connection", `metadata: {name: c, annotations: {a: b}}
spec:
  hosts: []
  placement:
    inject:
      - {hosts: [x.example.com], header: X-Key, value: "{{ .k }}", placeholderEnv: [], rules: [{methods: []}]}
`},
	"connection with a long value": {"Connection", `metadata: {name: c}
spec:
  placement:
    inject: [{value: "` + strings.Repeat("v", slabBytes) + `"}]
`},
	"connection with many hosts": {"Connection", `metadata: {name: c}
spec:
  hosts: [` + strings.Repeat("h.example.com, ", slabBlock) + `last.example.com]
`},
	"sandbox class": {"SandboxClass", `metadata: {name: s, namespace: n}
spec: {image: img, connections: [{role: a}, {role: b}]}
`},
	"agent": {"agent", `name: a
sandbox: s
sandbox_options: {setup: [make]}
connectors: [{name: gh, connection: github, sandbox: true, tools: [t1, t2]}, {name: x}]
allowed_domains: [pypi.org]
`},
	"agent runtime": {"AgentRuntime", `metadata: {name: r}
spec:
  sandbox:
    enabled: true
    connections: [{sandbox: s, role: a, connection: c}]
`},
	"agent runtime without sandbox": {"AgentRuntime", `metadata: {name: r}
spec: {}
`},
}

// newWire returns a new value of the wire type a digest of kind keeps,
// nil for another kind.
func newWire(kind string) any {
	switch kind {
	case "Connection":
		return new(connectionWire)
	case "SandboxClass":
		return new(sandboxClassWire)
	case "agent":
		return new(agentWire)
	case "AgentRuntime":
		return new(bindingOwnerWire)
	}
	return nil
}

// decodeSlabDoc decodes text into a fresh value of the wire type of kind.
func decodeSlabDoc(t testing.TB, kind, text string) reflect.Value {
	p := newWire(kind)
	if p == nil {
		t.Fatalf("no wire type for %s", kind)
	}
	if err := yaml.Unmarshal([]byte(text), p); err != nil {
		t.Fatal(err)
	}
	return reflect.ValueOf(p)
}

// packedValue packs a copy of the value p points to, as Digest does
// for its kind.
func packedValue(in *interner, p reflect.Value) reflect.Value {
	switch w := p.Interface().(type) {
	case *connectionWire:
		return reflect.ValueOf(in.connection(w).p.wire())
	case *sandboxClassWire:
		return reflect.ValueOf(packedDigest(in, w).p.wire())
	case *agentWire:
		return reflect.ValueOf(packedDigest(in, w).p.wire())
	case *bindingOwnerWire:
		return reflect.ValueOf(in.owner(w).p.wire())
	}
	panic("unreachable")
}

// TestSlabPack: a packed object is equal to the decoded one, nil and empty
// lists included; it shares no string, list or pointer with it (what it
// holds is in the slab, apart from the parser's memory); and each list's
// capacity is its length, so an append never writes over the next one.
func TestSlabPack(t *testing.T) {
	for name, tc := range slabDocs {
		t.Run(name, func(t *testing.T) {
			in := newInterner()
			orig := decodeSlabDoc(t, tc.kind, tc.text)
			got := packedValue(in, orig)
			if !reflect.DeepEqual(got.Interface(), orig.Interface()) {
				t.Fatalf("packed %+v, decoded %+v", got.Elem().Interface(), orig.Elem().Interface())
			}
			if got.Pointer() == orig.Pointer() {
				t.Error("the packed object is the decoded one")
			}
			sharesNothing(t, "", got.Elem(), orig.Elem())
		})
	}
}

// sharesNothing requires that a, at any depth, hold no string data, list
// array or pointer of b but the long values the slab leaves where they are.
func sharesNothing(t *testing.T, at string, a, b reflect.Value) {
	t.Helper()
	switch a.Kind() {
	case reflect.String:
		if s := a.String(); s != "" && len(s) <= slabBytes/16 && unsafe.StringData(s) == unsafe.StringData(b.String()) {
			t.Errorf("%s: the string %.20q is the decoder's", at, s)
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() {
				sharesNothing(t, at+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))
			}
		}
	case reflect.Slice:
		if a.IsNil() {
			return
		}
		if a.Cap() != a.Len() {
			t.Errorf("%s: capacity %d past length %d", at, a.Cap(), a.Len())
		}
		if small := a.Len()*int(a.Type().Elem().Size()) <= slabBlock/4; small && a.Len() > 0 && a.Pointer() == b.Pointer() {
			t.Errorf("%s: the list is the decoder's", at)
		}
		for i := range a.Len() {
			sharesNothing(t, at+"[]", a.Index(i), b.Index(i))
		}
	case reflect.Pointer:
		if a.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: the pointer is the decoder's", at)
		}
		sharesNothing(t, at, a.Elem(), b.Elem())
	}
}

// TestSlabAppendsApart: appending to a list handed out from a block, or
// writing to it, leaves the list handed out after it as it was.
func TestSlabAppendsApart(t *testing.T) {
	var sl slab
	a := slabSlice(&sl, []string{"a1", "a2"})
	b := slabSlice(&sl, []string{"b1"})
	a = append(a, "a3")
	a[0] = "changed"
	if !reflect.DeepEqual(b, []string{"b1"}) {
		t.Errorf("the next list is %q", b)
	}
	if s := sl.str("xyz"); s != "xyz" {
		t.Errorf("str gave %q", s)
	}
	if s := sl.str(""); s != "" {
		t.Errorf("str of nothing gave %q", s)
	}
}

// TestSlabNeverHoldsSecretValues: a Secret's digest keeps its keys, in
// the slab, and never its values, of either field.
func TestSlabNeverHoldsSecretValues(t *testing.T) {
	const canary = "CANARY-slab-never"
	text := `apiVersion: v1
kind: Secret
metadata: {name: tok, namespace: team-01}
data:
  b64: ` + "Q0FOQVJZLXNsYWItbmV2ZXI=" + `
  "bad key": ` + "Q0FOQVJZLXNsYWItbmV2ZXI=" + `
stringData:
  token: ` + canary + `
  user: x-access-token
`
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(text), &n); err != nil {
		t.Fatal(err)
	}
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	in := newInterner()
	dg := digestOf(v, schema.DefaultOperator(), in, &source.Document{File: "s.yaml", Node: n.Content[0]})
	sd, ok := dg.wire.(*secretDigest)
	if !ok {
		t.Fatalf("digest of the Secret holds %T", dg.wire)
	}
	for _, k := range []string{"b64", "bad key", "token", "user"} {
		if _, ok := sd.p.values().get(k); !ok {
			t.Errorf("key %q not kept", k)
		}
	}
	if _, ok := sd.p.refused().Data["bad key"]; !ok {
		t.Error("the key the API server refuses was not kept for its finding")
	}
	for _, block := range [][]byte{in.sl.bytes, in.buf} {
		if bytes.Contains(block, []byte(canary)) || bytes.Contains(block, []byte("Q0FOQVJZ")) {
			t.Error("the slab holds a Secret value")
		}
	}
	for k, v := range in.m {
		if strings.Contains(k+v, "CANARY") || strings.Contains(k+v, "Q0FOQVJZ") {
			t.Errorf("the interner holds a Secret value: %q", k)
		}
	}
}

// FuzzPacked: whatever a document decodes to, packing it gives an equal
// object.
func FuzzPacked(f *testing.F) {
	for _, tc := range slabDocs {
		if len(tc.text) < 4096 {
			f.Add(tc.kind, tc.text)
		}
	}
	f.Fuzz(func(t *testing.T, kind, text string) {
		p := newWire(kind)
		if p == nil || yaml.Unmarshal([]byte(text), p) != nil {
			return
		}
		orig := reflect.ValueOf(p)
		got := packedValue(newInterner(), orig)
		if !reflect.DeepEqual(got.Interface(), orig.Interface()) {
			t.Fatalf("packed %+v, decoded %+v", got.Elem().Interface(), orig.Elem().Interface())
		}
	})
}
