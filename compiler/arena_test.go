package compiler

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/fixture"
)

// arenaDocs are objects of every decoded kind a digest keeps, with the
// shapes a copy must keep apart: empty lists (not nil), absent lists
// (nil), pointers set and unset, a string too long for a byte chunk and a
// list too long for a chunk of values.
var arenaDocs = map[string]struct {
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
    inject: [{value: "` + strings.Repeat("v", stringChunk) + `"}]
`},
	"connection with many hosts": {"Connection", `metadata: {name: c}
spec:
  hosts: [` + strings.Repeat("h.example.com, ", arenaChunk) + `last.example.com]
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

// decodeArenaDoc decodes text into a fresh value of the wire type of kind.
func decodeArenaDoc(t testing.TB, kind, text string) reflect.Value {
	p := newWire(kind)
	if p == nil {
		t.Fatalf("no wire type for %s", kind)
	}
	if err := yaml.Unmarshal([]byte(text), p); err != nil {
		t.Fatal(err)
	}
	return reflect.ValueOf(p)
}

// arenaCopy copies the value p points to into in's arenas, as Digest
// does for its kind.
func arenaCopy(in *interner, p reflect.Value) reflect.Value {
	switch w := p.Interface().(type) {
	case *connectionWire:
		return reflect.ValueOf(in.connection(w))
	case *sandboxClassWire:
		return reflect.ValueOf(in.sandboxClass(w))
	case *agentWire:
		return reflect.ValueOf(in.agent(w))
	case *bindingOwnerWire:
		return reflect.ValueOf(in.owner(w))
	}
	panic("unreachable")
}

// TestArenaCopy: an object copied into the arenas is equal to the decoded
// one, nil and empty lists included; it shares no string, list or pointer
// with it (what it holds is in the arenas, apart from the parser's
// memory); and each list's capacity is its length, so an append never
// writes over the next one. Every field is set once (by fill), so a field
// a wire type gains and its copy does not is found here.
func TestArenaCopy(t *testing.T) {
	cases := map[string]reflect.Value{}
	for name, tc := range arenaDocs {
		cases[name] = decodeArenaDoc(t, tc.kind, tc.text)
	}
	for _, kind := range []string{"Connection", "SandboxClass", "agent", "AgentRuntime"} {
		w := reflect.ValueOf(newWire(kind))
		fill(w.Elem(), new(int))
		cases[kind+" with every field set"] = w
	}
	for name, orig := range cases {
		t.Run(name, func(t *testing.T) {
			in := newInterner()
			got := arenaCopy(in, orig)
			if !reflect.DeepEqual(got.Interface(), orig.Interface()) {
				t.Fatalf("copied %+v, decoded %+v", got.Elem().Interface(), orig.Elem().Interface())
			}
			if got.Pointer() == orig.Pointer() {
				t.Error("the copy is the decoded object")
			}
			sharesNothing(t, "", got.Elem(), orig.Elem())
		})
	}
}

// fill sets every field of v, at any depth, to a value of its own: each
// string a distinct one, each list two items, each pointer set.
func fill(v reflect.Value, n *int) {
	switch v.Kind() {
	case reflect.String:
		*n++
		v.SetString(fmt.Sprintf("field-%d", *n))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), n)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		fill(e, n)
		v.SetMapIndex(k, e)
	case reflect.Int8:
		v.SetInt(1)
	case reflect.Int64:
		*n++
		v.SetInt(int64(*n))
	default:
		panic("fill: a field of kind " + v.Kind().String())
	}
}

// sharesNothing requires that a, at any depth, hold no string data, list
// array or pointer of b.
func sharesNothing(t *testing.T, at string, a, b reflect.Value) {
	t.Helper()
	switch a.Kind() {
	case reflect.String:
		if s := a.String(); s != "" && unsafe.StringData(s) == unsafe.StringData(b.String()) {
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
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
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
	case reflect.Map:
		if a.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: the map is the decoder's", at)
		}
		for _, k := range a.MapKeys() {
			bk := b.MapKeys()[slices.IndexFunc(b.MapKeys(), func(x reflect.Value) bool { return x.Interface() == k.Interface() })]
			sharesNothing(t, at+"{}", k, bk)
			sharesNothing(t, at+"[]", a.MapIndex(k), b.MapIndex(k))
		}
	}
}

// TestArenaAppendsApart: appending to a list handed out from a chunk, or
// writing to it, leaves the list handed out after it as it was.
func TestArenaAppendsApart(t *testing.T) {
	var ar arena[string]
	a := ar.clone([]string{"a1", "a2"})
	b := ar.clone([]string{"b1"})
	a = append(a, "a3")
	a[0] = "changed"
	if !reflect.DeepEqual(b, []string{"b1"}) {
		t.Errorf("the next list is %q", b)
	}
	if got := ar.clone([]string{}); got == nil || len(got) != 0 {
		t.Errorf("an empty list copies as %#v", got)
	}
	var sa stringArena
	if s := sa.str("xyz"); s != "xyz" {
		t.Errorf("str gave %q", s)
	}
	if s := sa.str(""); s != "" {
		t.Errorf("str of nothing gave %q", s)
	}
}

// TestArenaNeverHoldsSecretValues: a Secret's digest keeps its keys, in
// the arenas, and never its values, of either field.
func TestArenaNeverHoldsSecretValues(t *testing.T) {
	const canary = "CANARY-arena-never"
	text := `apiVersion: v1
kind: Secret
metadata: {name: tok, namespace: team-01}
data:
  b64: ` + "Q0FOQVJZLWFyZW5hLW5ldmVy" + `
  "bad key": ` + "Q0FOQVJZLWFyZW5hLW5ldmVy" + `
stringData:
  token: ` + canary + `
  user: x-access-token
`
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(text), &n); err != nil {
		t.Fatal(err)
	}
	v := fixture.Validator(t)
	in := newInterner()
	dg := digestOf(v, schema.DefaultOperator(), in, &source.Document{File: "s.yaml", Node: n.Content[0]})
	sd, ok := dg.wire.(*secretDigest)
	if !ok {
		t.Fatalf("digest of the Secret holds %T", dg.wire)
	}
	for _, k := range []string{"b64", "bad key", "token", "user"} {
		if _, ok := sd.values.get(k); !ok {
			t.Errorf("key %q not kept", k)
		}
	}
	if _, ok := sd.refused().Data["bad key"]; !ok {
		t.Error("the key the API server refuses was not kept for its finding")
	}
	if block := in.strs.bytes; bytes.Contains(block, []byte(canary)) || bytes.Contains(block, []byte("Q0FOQVJZ")) {
		t.Error("the arenas hold a Secret value")
	}
	for k, v := range in.m {
		if strings.Contains(k+v, "CANARY") || strings.Contains(k+v, "Q0FOQVJZ") {
			t.Errorf("the interner holds a Secret value: %q", k)
		}
	}
}

// FuzzArenaCopy: whatever a document decodes to, its copy in the arenas
// is an equal object.
func FuzzArenaCopy(f *testing.F) {
	for _, tc := range arenaDocs {
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
		got := arenaCopy(newInterner(), orig)
		if !reflect.DeepEqual(got.Interface(), orig.Interface()) {
			t.Fatalf("copied %+v, decoded %+v", got.Elem().Interface(), orig.Elem().Interface())
		}
	})
}
