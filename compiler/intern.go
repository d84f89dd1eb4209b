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

// at interns the scalar at path under n, where each element of path is
// a key, or "[]" for every item of a sequence.
func (in *interner) at(n *yaml.Node, path ...string) {
	if n == nil {
		return
	}
	if len(path) == 0 {
		in.scalar(n)
		return
	}
	if path[0] == "[]" {
		if n.Kind == yaml.SequenceNode {
			for _, it := range n.Content {
				in.at(it, path[1:]...)
			}
		}
		return
	}
	v, _ := child(n, path[0])
	in.at(v, path[1:]...)
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

// document interns, in a document's tree, what recurs in documents of
// its kind, before the digest and the loader take their strings from
// it. Only scalar values change, to equal strings.
func (in *interner) document(kind string, n *yaml.Node) {
	in.at(n, "apiVersion")
	in.at(n, "kind")
	in.at(n, "metadata", "namespace")
	switch kind {
	case "Connection":
		in.at(n, "spec", "credential", "kind")
		for _, f := range [][]string{{"header"}, {"value"}, {"basic", "usernameKey"}, {"basic", "passwordKey"}, {"rules", "[]", "methods", "[]"}, {"rules", "[]", "pathPrefixes", "[]"}} {
			in.at(n, append([]string{"spec", "placement", "inject", "[]"}, f...)...)
		}
	case "Secret":
		for _, f := range []string{"data", "stringData"} {
			v, _ := child(n, f)
			in.keys(v)
		}
	case "SandboxClass":
		in.at(n, "spec", "image")
		in.at(n, "spec", "connections", "[]", "role")
	case "AgentRuntime", "ToolRegistry":
		in.at(n, "spec", "sandbox", "connections", "[]", "sandbox")
		in.at(n, "spec", "sandbox", "connections", "[]", "role")
	}
}
