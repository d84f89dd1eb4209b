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
type interner struct {
	mu sync.Mutex
	m  map[string]string
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
		in.m[s] = s
	}
	return s
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
