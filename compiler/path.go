package compiler

import (
	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// path is a field path inside an object: string elements are mapping keys,
// int elements are sequence indices. It finds the node a diagnostic points
// at and prints as spec.placement.inject[0].value.
type path []any

func (p path) String() string {
	s := ""
	for _, e := range p {
		switch e := e.(type) {
		case int:
			s = diag.JoinIndex(s, e)
		case string:
			s = diag.JoinKey(s, e)
		}
	}
	return s
}

// with returns a new path extended by elems, never sharing p's array.
func (p path) with(elems ...any) path {
	return append(append(path(nil), p...), elems...)
}

// find returns the deepest node of p that exists under root, so that a
// diagnostic about a missing field points at its parent. When key is true
// and the last element is a mapping key that exists, the key node is
// returned instead of its value.
func (p path) find(root *yaml.Node, key bool) *yaml.Node {
	n := root
	for i, e := range p {
		next, k := child(n, e)
		if next == nil {
			return n
		}
		if key && i == len(p)-1 && k != nil {
			return k
		}
		n = next
	}
	return n
}

// child returns the value of mapping key e (and the key node), or the
// element at index e of a sequence.
func child(n *yaml.Node, e any) (value, key *yaml.Node) {
	if n == nil {
		return nil, nil
	}
	switch e := e.(type) {
	case string:
		if n.Kind != yaml.MappingNode {
			return nil, nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == e {
				return n.Content[i+1], n.Content[i]
			}
		}
	case int:
		if n.Kind == yaml.SequenceNode && e >= 0 && e < len(n.Content) {
			return n.Content[e], nil
		}
	}
	return nil, nil
}
