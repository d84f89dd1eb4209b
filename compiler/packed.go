package compiler

import (
	"encoding/binary"
	"maps"
	"reflect"
	"slices"
)

// packedConnection is a Connection as the compiler keeps it between the
// walk and the end of Compile: every field of its connectionWire written
// one after another into a single string, which the slab holds among its
// pointer-free bytes. A decoded connectionWire is some twenty small
// objects (the struct, each inject entry, rule and list, every string
// header), about 400 bytes that the collector scans on each cycle; packed,
// a Connection is about 180 bytes it never scans, and the peak of a
// check at 100,000 Connections a tenth lower (docs/benchmarks.md,
// "The compiler's representation of documents").
//
// wire unpacks it into a new connectionWire whose strings are substrings
// of the packed one, so unpacking copies no string; a check that reads a
// Connection unpacks it, and the copy is garbage when the check moves on.
// name, namespace and secretRef read their fields without unpacking the
// rest: they are read far more often.
//
// The layout, in the order of the fields (see packConnection): a string
// is a uvarint h then, when h is even, its h/2 bytes, and when h is odd, a
// uvarint offset at which the same h/2 bytes were written before (a host
// named again in an inject entry is not written twice); a list is a
// uvarint, 0 for a nil list and n+1 for n items, then the items; an
// optional value (a pointer) is a byte, 0 for nil and 1 before the value.
type packedConnection string

// packConnection appends w packed to buf and returns the result.
func packConnection(buf []byte, w *connectionWire) []byte {
	p := packer{buf: buf, start: len(buf)}
	p.str(w.Metadata.Name)
	p.str(w.Metadata.Namespace)
	p.str(w.Spec.Credential.SecretRef.Name)
	p.str(w.Spec.Credential.SecretRef.Namespace)
	p.str(w.Spec.Credential.Kind)
	p.strs(w.Spec.Hosts)
	p.optional(w.Spec.AllowInternalAddresses)
	inject := w.Spec.Placement.Inject
	p.list(inject == nil, len(inject))
	for i := range inject {
		in := &inject[i]
		p.strs(in.Hosts)
		p.str(in.Header)
		if p.optional(in.Value != nil) {
			p.str(*in.Value)
		}
		if p.optional(in.Basic != nil) {
			p.str(in.Basic.UsernameKey)
			p.str(in.Basic.PasswordKey)
		}
		p.strs(in.PlaceholderEnv)
		p.list(in.Rules == nil, len(in.Rules))
		for _, r := range in.Rules {
			p.strs(r.Methods)
			p.strs(r.PathPrefixes)
		}
	}
	return p.buf
}

// packer writes one packed object.
type packer struct {
	buf []byte
	// start is where the object begins in buf: offsets count from it.
	start int
	// written are the strings written so far, each with the offset of
	// its bytes, for the back references.
	written []writtenString
}

type writtenString struct {
	s      string
	offset int
}

func (p *packer) uvarint(x int) { p.buf = binary.AppendUvarint(p.buf, uint64(x)) }

func (p *packer) str(s string) {
	if s != "" {
		for _, w := range p.written {
			if w.s == s {
				p.uvarint(len(s)<<1 | 1)
				p.uvarint(w.offset)
				return
			}
		}
	}
	p.uvarint(len(s) << 1)
	if s != "" {
		p.written = append(p.written, writtenString{s, len(p.buf) - p.start})
	}
	p.buf = append(p.buf, s...)
}

func (p *packer) list(isNil bool, n int) {
	if isNil {
		p.uvarint(0)
		return
	}
	p.uvarint(n + 1)
}

func (p *packer) strs(xs []string) {
	p.list(xs == nil, len(xs))
	for _, s := range xs {
		p.str(s)
	}
}

func (p *packer) optional(present bool) bool {
	if present {
		p.buf = append(p.buf, 1)
	} else {
		p.buf = append(p.buf, 0)
	}
	return present
}

// unpacker reads what a packer wrote, from its start. The string is only
// ever one packConnection or packSecret wrote, so a read past its end is
// a bug in keyhole, and panics as an index out of range would.
type unpacker struct {
	s   string
	pos int
}

func (u *unpacker) uvarint() int {
	x, n := uvarintString(u.s[u.pos:])
	if n <= 0 {
		panic("compiler: a packed object is cut short")
	}
	u.pos += n
	return int(x)
}

// uvarintString is binary.Uvarint of a string, without converting it.
func uvarintString(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		b := s[i]
		if b < 0x80 {
			return x | uint64(b)<<shift, i + 1
		}
		x |= uint64(b&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

func (u *unpacker) str() string {
	h := u.uvarint()
	n := h >> 1
	if h&1 == 1 {
		at := u.uvarint()
		return u.s[at : at+n]
	}
	s := u.s[u.pos : u.pos+n]
	u.pos += n
	return s
}

// skip moves past a string.
func (u *unpacker) skip() {
	if h := u.uvarint(); h&1 == 1 {
		u.uvarint()
	} else {
		u.pos += h >> 1
	}
}

// list returns how many items follow, and false for a nil list.
func (u *unpacker) list() (int, bool) {
	n := u.uvarint()
	return n - 1, n > 0
}

func (u *unpacker) strs() []string {
	n, ok := u.list()
	if !ok {
		return nil
	}
	xs := make([]string, n)
	for i := range xs {
		xs[i] = u.str()
	}
	return xs
}

func (u *unpacker) optional() bool {
	b := u.s[u.pos]
	u.pos++
	return b == 1
}

// wire returns the Connection unpacked, in a connectionWire of its own;
// its strings are substrings of pc.
func (pc packedConnection) wire() *connectionWire {
	u := unpacker{s: string(pc)}
	w := new(connectionWire)
	w.Metadata.Name = u.str()
	w.Metadata.Namespace = u.str()
	w.Spec.Credential.SecretRef.Name = u.str()
	w.Spec.Credential.SecretRef.Namespace = u.str()
	w.Spec.Credential.Kind = u.str()
	w.Spec.Hosts = u.strs()
	w.Spec.AllowInternalAddresses = u.optional()
	if n, ok := u.list(); ok {
		inject := make([]injectWire, n)
		for i := range inject {
			in := &inject[i]
			in.Hosts = u.strs()
			in.Header = u.str()
			if u.optional() {
				v := u.str()
				in.Value = &v
			}
			if u.optional() {
				in.Basic = &basicWire{UsernameKey: u.str(), PasswordKey: u.str()}
			}
			in.PlaceholderEnv = u.strs()
			if n, ok := u.list(); ok {
				in.Rules = make([]ruleWire, n)
				for r := range in.Rules {
					in.Rules[r] = ruleWire{Methods: u.strs(), PathPrefixes: u.strs()}
				}
			}
		}
		w.Spec.Placement.Inject = inject
	}
	return w
}

// metadata returns the Connection's name and namespace, unpacking nothing
// else.
func (pc packedConnection) metadata() metadata {
	u := unpacker{s: string(pc)}
	return metadata{Name: u.str(), Namespace: u.str()}
}

// secretRef returns the name and namespace of the Secret the Connection
// reads, unpacking nothing else.
func (pc packedConnection) secretRef() (name, namespace string) {
	u := unpacker{s: string(pc)}
	u.skip()
	u.skip()
	return u.str(), u.str()
}

// packedSecret is a Secret as its digest keeps it, packed as a Connection
// is (see packedConnection): its name and namespace, each key with what
// its value is fit for (never the value), and the keys the API server
// refuses, for their findings. A Secret's digest was a struct of 72 bytes
// and a list of 24 a key; packed, the bench repository's are about 40
// bytes in all, and hold no pointer.
//
// The layout: name, namespace; the keys, a list of a string and a byte
// (bit 0 known, the rest the fault); then the refused keys of data and of
// stringData, each a list, nil for a nil map.
type packedSecret string

// packSecret appends the Secret packed to buf and returns the result:
// md names it, values are its keys, refused holds the keys of w that
// checkSecretKeyNames reports (see refusedKeys), without values.
func packSecret(buf []byte, md metadata, values secretKeys, refused secretWire) []byte {
	p := packer{buf: buf, start: len(buf)}
	p.str(md.Name)
	p.str(md.Namespace)
	p.list(values == nil, len(values))
	for _, k := range values {
		p.str(k.name)
		known := byte(0)
		if k.v.known {
			known = 1
		}
		p.buf = append(p.buf, known|k.v.fault<<1)
	}
	for _, m := range []map[string]string{refused.Data, refused.StringData} {
		p.list(m == nil, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			p.str(k)
		}
	}
	return p.buf
}

// metadata returns the Secret's name and namespace.
func (ps packedSecret) metadata() metadata {
	u := unpacker{s: string(ps)}
	return metadata{Name: u.str(), Namespace: u.str()}
}

// values returns the Secret's keys, a list of its own (Compile adds to
// it for a Secret declared in other ways too).
func (ps packedSecret) values() secretKeys {
	u := unpacker{s: string(ps)}
	u.skip()
	u.skip()
	return u.values()
}

func (u *unpacker) values() secretKeys {
	n, ok := u.list()
	if !ok {
		return nil
	}
	ks := make(secretKeys, n)
	for i := range ks {
		ks[i].name = u.str()
		b := u.s[u.pos]
		u.pos++
		ks[i].v = secretValue{known: b&1 == 1, fault: b >> 1}
	}
	return ks
}

// refused returns the Secret with only its refused keys (see packSecret).
func (ps packedSecret) refused() secretWire {
	u := unpacker{s: string(ps)}
	w := secretWire{Metadata: metadata{Name: u.str(), Namespace: u.str()}}
	u.values()
	w.Data, w.StringData = u.keySet(), u.keySet()
	return w
}

// keySet reads a list of keys as a map to empty values, nil for a nil
// list.
func (u *unpacker) keySet() map[string]string {
	n, ok := u.list()
	if !ok {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		m[u.str()] = ""
	}
	return m
}

// packedOwner is an AgentRuntime or ToolRegistry as its digest keeps it,
// packed as a Connection is (see packedConnection): its bindings are most
// of it, three short strings each. Decoded, one with four bindings took
// some 260 bytes in six objects; packed, about 120.
//
// The layout: name, namespace; spec.sandbox.enabled as an optional byte;
// the bindings, a list of sandbox, role and connection.
type packedOwner string

// packOwner appends w packed to buf and returns the result.
func packOwner(buf []byte, w *bindingOwnerWire) []byte {
	p := packer{buf: buf, start: len(buf)}
	p.str(w.Metadata.Name)
	p.str(w.Metadata.Namespace)
	sb := &w.Spec.Sandbox
	if p.optional(sb.Enabled != nil) {
		p.optional(*sb.Enabled)
	}
	p.list(sb.Connections == nil, len(sb.Connections))
	for _, b := range sb.Connections {
		p.str(b.Sandbox)
		p.str(b.Role)
		p.str(b.Connection)
	}
	return p.buf
}

// wire returns the object unpacked, a copy of its own whose strings are
// substrings of po.
func (po packedOwner) wire() *bindingOwnerWire {
	u := unpacker{s: string(po)}
	w := new(bindingOwnerWire)
	w.Metadata = metadata{Name: u.str(), Namespace: u.str()}
	sb := &w.Spec.Sandbox
	if u.optional() {
		enabled := u.optional()
		sb.Enabled = &enabled
	}
	if n, ok := u.list(); ok {
		sb.Connections = make([]bindingWire, n)
		for i := range sb.Connections {
			sb.Connections[i] = bindingWire{Sandbox: u.str(), Role: u.str(), Connection: u.str()}
		}
	}
	return w
}

// metadata returns the object's name and namespace.
func (po packedOwner) metadata() metadata {
	u := unpacker{s: string(po)}
	return metadata{Name: u.str(), Namespace: u.str()}
}

// packedAny is an object of a wire type packed by reflection (see
// packValue), for the kinds the checks read a few times each: agents and
// SandboxClasses. The hand-written packings above are for the kinds read
// in every check, where unpacking by reflection would cost.
type packedAny[T any] string

// packAny appends *x packed to buf and returns the result.
func packAny[T any](buf []byte, x *T) []byte {
	p := packer{buf: buf, start: len(buf)}
	p.value(reflect.ValueOf(x).Elem())
	return p.buf
}

// value writes v, field by exported field, in the layout packedConnection
// describes; a bool is an optional byte's flag. A kind no wire type holds
// panics, which TestPackedAnyRoundTrip would show first.
func (p *packer) value(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		p.str(v.String())
	case reflect.Bool:
		p.optional(v.Bool())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				p.value(v.Field(i))
			}
		}
	case reflect.Slice:
		p.list(v.IsNil(), v.Len())
		for i := range v.Len() {
			p.value(v.Index(i))
		}
	case reflect.Pointer:
		if p.optional(!v.IsNil()) {
			p.value(v.Elem())
		}
	default:
		panic("compiler: packAny cannot pack a " + v.Kind().String())
	}
}

// wire returns the object unpacked, a copy of its own whose strings are
// substrings of pa.
func (pa packedAny[T]) wire() *T {
	u := unpacker{s: string(pa)}
	x := new(T)
	u.value(reflect.ValueOf(x).Elem())
	return x
}

// value reads into v, which must be settable, what packer.value wrote.
func (u *unpacker) value(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(u.str())
	case reflect.Bool:
		v.SetBool(u.optional())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				u.value(v.Field(i))
			}
		}
	case reflect.Slice:
		if n, ok := u.list(); ok {
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := range n {
				u.value(s.Index(i))
			}
			v.Set(s)
		}
	case reflect.Pointer:
		if u.optional() {
			e := reflect.New(v.Type().Elem())
			u.value(e.Elem())
			v.Set(e)
		}
	default:
		panic("compiler: packAny cannot unpack a " + v.Kind().String())
	}
}
