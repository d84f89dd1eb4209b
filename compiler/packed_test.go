package compiler

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// fill sets every field of v, at any depth, to a value of its own: each
// string a distinct one (or one of repeats, by turns, when repeats is
// set), each list two items, each pointer set. A field connectionWire
// gains and packConnection does not write comes back zero, and the
// round trip below fails.
func fill(v reflect.Value, n *int, repeats []string) {
	switch v.Kind() {
	case reflect.String:
		*n++
		if len(repeats) > 0 {
			v.SetString(repeats[*n%len(repeats)])
		} else {
			v.SetString(fmt.Sprintf("field-%d", *n))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n, repeats)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), n, repeats)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n, repeats)
	case reflect.Bool:
		v.SetBool(true)
	default:
		panic("fill: a field of kind " + v.Kind().String() + " packConnection cannot be checked for")
	}
}

// TestPackedConnectionRoundTrip: a Connection unpacks to what was packed,
// every field set, none set, and lists empty rather than absent; name,
// namespace and secretRef, read without unpacking, agree with it; and its
// strings are substrings of the packed one, not copies.
func TestPackedConnectionRoundTrip(t *testing.T) {
	var full connectionWire
	fill(reflect.ValueOf(&full).Elem(), new(int), nil)
	var repeated connectionWire
	fill(reflect.ValueOf(&repeated).Elem(), new(int), []string{"api.example.com", "", "git.example.com"})
	empty := connectionWire{}
	empty.Spec.Hosts = []string{}
	empty.Spec.Placement.Inject = []injectWire{{Hosts: []string{}, PlaceholderEnv: []string{}, Rules: []ruleWire{{Methods: []string{}}}, Value: new(string)}}
	long := connectionWire{}
	long.Metadata.Name = strings.Repeat("n", 2*slabBytes)
	for name, w := range map[string]connectionWire{"every field": full, "repeated strings": repeated, "none": {}, "empty lists": empty, "long": long} {
		t.Run(name, func(t *testing.T) {
			pc := packedConnection(packConnection([]byte("before"), &w)[len("before"):])
			got := pc.wire()
			if !reflect.DeepEqual(*got, w) {
				t.Fatalf("unpacked %+v\npacked   %+v", *got, w)
			}
			if md := pc.metadata(); md != w.Metadata {
				t.Errorf("metadata %+v, want %+v", md, w.Metadata)
			}
			if name, ns := pc.secretRef(); name != w.Spec.Credential.SecretRef.Name || ns != w.Spec.Credential.SecretRef.Namespace {
				t.Errorf("secretRef %q %q, want %+v", name, ns, w.Spec.Credential.SecretRef)
			}
			substringsOf(t, "", reflect.ValueOf(got).Elem(), string(pc))
		})
	}
}

// substringsOf requires every non-empty string v holds, at any depth, to be a
// substring of s.
func substringsOf(t *testing.T, at string, v reflect.Value, s string) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		x := v.String()
		start, end := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(s)))+uintptr(len(s))
		if p := uintptr(unsafe.Pointer(unsafe.StringData(x))); x != "" && (p < start || p+uintptr(len(x)) > end) {
			t.Errorf("%s: %.20q is a copy, not a substring of the packed Connection", at, x)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				substringsOf(t, at+"."+v.Type().Field(i).Name, v.Field(i), s)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			substringsOf(t, at+"[]", v.Index(i), s)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			substringsOf(t, at, v.Elem(), s)
		}
	}
}

// TestPackedConnectionWritesRepeatsOnce: a string the Connection names
// again (its host, in an inject entry) is written once, and the second
// is read back from the first.
func TestPackedConnectionWritesRepeatsOnce(t *testing.T) {
	host := "api-repeated-once.example.com"
	var w connectionWire
	w.Spec.Hosts = []string{host}
	w.Spec.Placement.Inject = []injectWire{{Hosts: []string{host}}, {Hosts: []string{host}}}
	pc := packedConnection(packConnection(nil, &w))
	if n := strings.Count(string(pc), host); n != 1 {
		t.Errorf("the host is written %d times, want once", n)
	}
	got := pc.wire()
	if !reflect.DeepEqual(*got, w) {
		t.Fatalf("unpacked %+v, packed %+v", *got, w)
	}
	if unsafe.StringData(got.Spec.Placement.Inject[1].Hosts[0]) != unsafe.StringData(got.Spec.Hosts[0]) {
		t.Error("the repeat is not read from the first")
	}
}

// TestPackedConnectionIsSmaller: the point of packing. The bench
// repository's Connections are 100 to 250 bytes packed, where decoded
// they take some 400 in twenty objects.
func TestPackedConnectionIsSmaller(t *testing.T) {
	w := decodeSlabDoc(t, "Connection", internConnection).Interface().(*connectionWire)
	pc := packConnection(nil, w)
	if len(pc) > 200 {
		t.Errorf("the Connection packs into %d bytes, want at most 200", len(pc))
	}
}

// TestPackedSecretRoundTrip: a Secret's keys, what each value is fit for
// and its refused keys unpack as they were packed; no value is in
// the packed string: packSecret is never given one.
func TestPackedSecretRoundTrip(t *testing.T) {
	values := secretKeys{{"a", secretValue{}}, {"b", secretValue{known: true}}}
	for i := range valueFaults {
		values = append(values, secretKey{fmt.Sprintf("fault-%d", i), secretValue{known: true, fault: uint8(i + 1)}})
	}
	for name, tc := range map[string]struct {
		md      metadata
		values  secretKeys
		refused secretWire
	}{
		"keys and refused keys": {metadata{"tok", "team-01"}, values, secretWire{Data: map[string]string{"bad key": "", "a/b": ""}, StringData: map[string]string{"x y": ""}}},
		"no keys":               {metadata{"tok", ""}, nil, secretWire{}},
		"empty":                 {metadata{}, secretKeys{}, secretWire{Data: map[string]string{}}},
	} {
		t.Run(name, func(t *testing.T) {
			ps := packedSecret(packSecret(nil, tc.md, tc.values, tc.refused))
			if got := ps.metadata(); got != tc.md {
				t.Errorf("metadata %+v, want %+v", got, tc.md)
			}
			if got := ps.values(); !reflect.DeepEqual(got, tc.values) {
				t.Errorf("values %+v, want %+v", got, tc.values)
			}
			want := tc.refused
			want.Metadata = tc.md
			if got := ps.refused(); !reflect.DeepEqual(got, want) {
				t.Errorf("refused %+v, want %+v", got, want)
			}
		})
	}
}

// TestPackedOwnerRoundTrip: an AgentRuntime or ToolRegistry unpacks to
// what was packed, every field set (by fill, so a field added to
// bindingOwnerWire and not to packOwner fails here), none set, enabled
// false, and no bindings rather than absent ones.
func TestPackedOwnerRoundTrip(t *testing.T) {
	var full bindingOwnerWire
	fill(reflect.ValueOf(&full).Elem(), new(int), nil)
	disabled, empty := bindingOwnerWire{}, bindingOwnerWire{}
	disabled.Spec.Sandbox.Enabled = new(bool)
	empty.Spec.Sandbox.Connections = []bindingWire{}
	for name, w := range map[string]bindingOwnerWire{"every field": full, "none": {}, "disabled": disabled, "no bindings": empty} {
		t.Run(name, func(t *testing.T) {
			po := packedOwner(packOwner(nil, &w))
			got := po.wire()
			if !reflect.DeepEqual(*got, w) {
				t.Fatalf("unpacked %+v\npacked   %+v", *got, w)
			}
			if md := po.metadata(); md != w.Metadata {
				t.Errorf("metadata %+v, want %+v", md, w.Metadata)
			}
			substringsOf(t, "", reflect.ValueOf(got).Elem(), string(po))
		})
	}
}

// TestPackedAnyRoundTrip: an agent and a SandboxClass, packed by
// reflection, unpack to what was packed, every field set (a field of a
// kind packAny cannot pack panics in fill first), none set, and lists
// empty rather than absent.
func TestPackedAnyRoundTrip(t *testing.T) {
	roundTrip := func(t *testing.T, x any, wire func() any, packed string) {
		t.Helper()
		got := wire()
		if !reflect.DeepEqual(got, x) {
			t.Fatalf("unpacked %+v\npacked   %+v", got, x)
		}
		substringsOf(t, "", reflect.ValueOf(got).Elem(), packed)
	}
	var fullAgent agentWire
	fill(reflect.ValueOf(&fullAgent).Elem(), new(int), nil)
	emptyAgent := agentWire{AllowedDomains: []string{}, SandboxOptions: struct {
		Setup []string `yaml:"setup"`
	}{Setup: []string{}}}
	for name, w := range map[string]agentWire{"every field": fullAgent, "none": {}, "empty lists": emptyAgent} {
		t.Run("agent/"+name, func(t *testing.T) {
			pa := packedAny[agentWire](packAny(nil, &w))
			roundTrip(t, &w, func() any { return pa.wire() }, string(pa))
		})
	}
	var fullClass sandboxClassWire
	fill(reflect.ValueOf(&fullClass).Elem(), new(int), nil)
	for name, w := range map[string]sandboxClassWire{"every field": fullClass, "none": {}} {
		t.Run("class/"+name, func(t *testing.T) {
			pa := packedAny[sandboxClassWire](packAny(nil, &w))
			roundTrip(t, &w, func() any { return pa.wire() }, string(pa))
		})
	}
}
