package compiler

import (
	"sync"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/schema"
)

// Memo remembers what validating documents against their schemas found,
// by document node, so that a second Compile of documents sharing nodes
// with a first (the other side of a diff, both loaded with one
// source.Memo, which gives a file of the same name and bytes the same
// nodes) does not validate them again. Validation reads nothing but the
// node, its kind, the operator and the schemas (which every
// schema.Validator holds alike), and nothing modifies a loaded node, so a
// node validated once validates the same again. Set it in Options.Memo;
// it is safe for concurrent use. It keeps every node it saw alive.
type Memo struct {
	mu    sync.Mutex
	found map[memoKey]validation
	hits  int
}

type memoKey struct {
	node *yaml.Node
	kind schema.Kind
	op   schema.Operator
}

// NewMemo returns an empty Memo.
func NewMemo() *Memo { return &Memo{found: map[memoKey]validation{}} }

// Hits is how many documents' validations were reused.
func (m *Memo) Hits() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits
}

// validation is what validating node as kind found, against operator op
// too when the kind is the operator's and the schema found nothing.
func (m *Memo) validation(v *schema.Validator, node *yaml.Node, kind schema.Kind, op schema.Operator) validation {
	key := memoKey{node: node, kind: kind, op: op}
	if m != nil {
		m.mu.Lock()
		f, ok := m.found[key]
		if ok {
			m.hits++
		}
		m.mu.Unlock()
		if ok {
			return f
		}
	}
	var f validation
	f.schema = v.Validate(kind, node)
	if len(f.schema) == 0 && (kind == "AgentRuntime" || kind == "ToolRegistry") {
		f.operator = v.ValidateOperator(op, kind, node)
	}
	if m != nil {
		m.mu.Lock()
		m.found[key] = f
		m.mu.Unlock()
	}
	return f
}
