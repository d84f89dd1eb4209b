package compiler

import (
	"sync"

	"go.yaml.in/yaml/v3"
)

// interner keeps one copy of the strings that recur from document to
// document: apiVersion, kind, namespace, header names, value templates,
// rule methods, Secret keys, SandboxClass roles. The YAML parser gives
// each scalar its own string, and a digest keeps them for the whole run:
// at a hundred thousand objects, tens of megabytes of "team-01" and
// "Authorization". Names and hosts, which seldom recur, are not passed
// to it. It is safe for concurrent use (the loader's workers share one),
// and holds at most internMax strings, past which it returns its input.
//
// It also holds the slab the digests are packed into (see slab), under
// the same lock: an interned string is kept as the slab's copy.
type interner struct {
	mu sync.Mutex
	m  map[string]string
	sl slab
	// buf is where a Connection is packed before the slab copies it.
	buf []byte
}

const internMax = 1 << 14

func newInterner() *interner { return &interner{m: map[string]string{}} }

func (in *interner) str(s string) string {
	if in == nil {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[s]; ok {
		return v
	}
	if len(in.m) < internMax {
		s = in.sl.str(s)
		in.m[s] = s
	}
	return s
}

// packedDigest returns an anyDigest in in's slab, of *x packed into the
// slab's bytes (see packedAny).
func packedDigest[T any](in *interner, x *T) *anyDigest[T] {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.buf = packAny(in.buf[:0], x)
	return slabNew(&in.sl, anyDigest[T]{p: packedAny[T](in.sl.strOf(in.buf))})
}

// scalar interns the value of n when it is a scalar.
func (in *interner) scalar(n *yaml.Node) {
	if n != nil && n.Kind == yaml.ScalarNode {
		n.Value = in.str(n.Value)
	}
}

// at interns the scalar value of key in the mapping n, if any.
func (in *interner) at(n *yaml.Node, key string) {
	v, _ := child(n, key)
	in.scalar(v)
}

// items interns every scalar item of the sequence n.
func (in *interner) items(n *yaml.Node) {
	if n != nil && n.Kind == yaml.SequenceNode {
		for _, it := range n.Content {
			in.scalar(it)
		}
	}
}

// keys interns the keys of the mapping n, never its values.
func (in *interner) keys(n *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		in.scalar(n.Content[i])
	}
}

// sequence returns the items of n when it is a sequence.
func sequence(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// document interns, in a document's tree, what recurs in documents of
// its kind, before the digest and the loader take their strings from
// it. Only scalar values change, to equal strings. Each mapping on the
// way is looked up once: this runs for every document of the input.
func (in *interner) document(kind string, n *yaml.Node) {
	in.at(n, "apiVersion")
	in.at(n, "kind")
	md, _ := child(n, "metadata")
	in.at(md, "namespace")
	spec, _ := child(n, "spec")
	switch kind {
	case "Connection":
		cred, _ := child(spec, "credential")
		in.at(cred, "kind")
		placement, _ := child(spec, "placement")
		inject, _ := child(placement, "inject")
		for _, e := range sequence(inject) {
			in.at(e, "header")
			in.at(e, "value")
			basic, _ := child(e, "basic")
			in.at(basic, "usernameKey")
			in.at(basic, "passwordKey")
			rules, _ := child(e, "rules")
			for _, r := range sequence(rules) {
				methods, _ := child(r, "methods")
				in.items(methods)
				prefixes, _ := child(r, "pathPrefixes")
				in.items(prefixes)
			}
		}
	case "Secret":
		for _, f := range []string{"data", "stringData"} {
			v, _ := child(n, f)
			in.keys(v)
		}
	case "SandboxClass":
		in.at(spec, "image")
		conns, _ := child(spec, "connections")
		for _, c := range sequence(conns) {
			in.at(c, "role")
		}
	case "AgentRuntime", "ToolRegistry":
		sandbox, _ := child(spec, "sandbox")
		conns, _ := child(sandbox, "connections")
		for _, c := range sequence(conns) {
			in.at(c, "sandbox")
			in.at(c, "role")
		}
	}
}

// connection returns a connectionDigest in the slab, of w packed into
// the slab's bytes (see packedConnection).
func (in *interner) connection(w *connectionWire) *connectionDigest {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.buf = packConnection(in.buf[:0], w)
	return slabNew(&in.sl, connectionDigest{p: packedConnection(in.sl.strOf(in.buf))})
}

// owner returns an ownerDigest in the slab, of w packed into the slab's
// bytes (see packedOwner).
func (in *interner) owner(w *bindingOwnerWire) *ownerDigest {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.buf = packOwner(in.buf[:0], w)
	return slabNew(&in.sl, ownerDigest{p: packedOwner(in.sl.strOf(in.buf))})
}

// secret returns a secretDigest in the slab, of the Secret md names,
// whose keys are values and refused those the API server refuses (see
// packSecret), packed into the slab's bytes.
func (in *interner) secret(md metadata, values secretKeys, refused secretWire) *secretDigest {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.buf = packSecret(in.buf[:0], md, values, refused)
	return slabNew(&in.sl, secretDigest{p: packedSecret(in.sl.strOf(in.buf))})
}

// digest returns a copy of dg in the slab, and of what more it keeps.
func (in *interner) digest(dg *digested) *digested {
	in.mu.Lock()
	defer in.mu.Unlock()
	if dg.more != nil {
		m := *dg.more
		m.agentName = in.keep(m.agentName)
		m.ignore = slabSlice(&in.sl, m.ignore)
		for i := range m.ignore {
			m.ignore[i] = in.keep(m.ignore[i])
		}
		dg.more = slabNew(&in.sl, m)
	}
	return slabNew(&in.sl, *dg)
}

// keep returns the interned copy of s, else a copy in the slab. The
// caller holds in.mu.
func (in *interner) keep(s string) string {
	if v, ok := in.m[s]; ok {
		return v
	}
	return in.sl.str(s)
}
