package schema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// Violation is one way a document breaks its schema.
type Violation struct {
	// Line and Column locate the offending node: the key node for an
	// unknown field, the mapping for a missing field, the value node
	// otherwise. Both are 1-based; zero means the node has no position.
	Line, Column int
	// Path is the field path inside the document, such as
	// spec.placement.inject[0].rules[1].methods[0]; empty for the root.
	Path string
	// Message says what is wrong in a sentence. It quotes at most 64 bytes
	// of a value, and never a Secret's data or stringData value.
	Message string
}

// String renders the violation as line:col: path: message, for tests and
// debugging; the compiler turns violations into diagnostics.
func (v Violation) String() string {
	if v.Path == "" {
		return fmt.Sprintf("%d:%d: %s", v.Line, v.Column, v.Message)
	}
	return fmt.Sprintf("%d:%d: %s: %s", v.Line, v.Column, v.Path, v.Message)
}

// schemaURL is the name the generated JSON Schema is compiled under; it
// never leaves the process.
const schemaURL = "https://keyhole.dev/schema.json"

// Validator checks documents against the generated JSON Schema. Build one
// with NewValidator and share it: it is safe for concurrent use.
type Validator struct {
	schemas map[Kind]*jsonschema.Schema
	// inlined holds each kind's schema with its references written out
	// in place, which Validate tries first (see inline.go).
	inlined map[Kind]*jsonschema.Schema
	// raw is the decoded schema document, read when a failure needs the
	// schema that failed (its properties, required fields, enum, format).
	raw map[string]any

	// ops holds the operator schemas compiled so far, by version.
	opMu sync.Mutex
	ops  map[string]compiledOperator
}

// NewValidator compiles the schema of every kind, once.
func NewValidator() (*Validator, error) {
	var raw map[string]any
	if err := json.Unmarshal(jsonSchemaSource, &raw); err != nil {
		return nil, fmt.Errorf("decoding the embedded JSON Schema: %w", err)
	}
	c := newCompiler()
	if err := c.AddResource(schemaURL, bytes.NewReader(jsonSchemaSource)); err != nil {
		return nil, fmt.Errorf("loading the embedded JSON Schema: %w", err)
	}
	inlined, err := compileInlined(jsonSchemaSource)
	if err != nil {
		return nil, err
	}
	schemas, err := compileKinds(c, schemaURL, kinds[:], "compiling the schema of %s: %w")
	if err != nil {
		return nil, err
	}
	return &Validator{schemas: schemas, inlined: inlined, raw: raw}, nil
}

// compileKinds compiles the schema of each of ks, $defs/<kind> of the
// resource at url in c; errFormat words a failure, given the kind and the
// error.
func compileKinds(c *jsonschema.Compiler, url string, ks []Kind, errFormat string) (map[Kind]*jsonschema.Schema, error) {
	schemas := map[Kind]*jsonschema.Schema{}
	for _, k := range ks {
		s, err := c.Compile(url + "#/$defs/" + string(k))
		if err != nil {
			return nil, fmt.Errorf(errFormat, k, err)
		}
		schemas[k] = s
	}
	return schemas, nil
}

// Validate checks doc (a document node or its root mapping) against the
// schema of k and returns the violations sorted by position. A nil result
// means the document is valid. Validate never panics on input: trees too
// deep or too large, such as alias bombs, are reported, not walked.
func (v *Validator) Validate(k Kind, doc *yaml.Node) []Violation {
	s, ok := v.schemas[k]
	if !ok {
		return []Violation{{Message: fmt.Sprintf("no schema for kind %q", string(k))}}
	}
	if doc == nil {
		return []Violation{{Message: "the document is empty"}}
	}
	c := converter{}
	val := c.value(doc, 0)
	if c.overflow {
		return c.vs
	}
	vs := c.vs
	var err error
	if in := v.inlined[k]; in == nil || in.Validate(val) != nil {
		err = s.Validate(val)
	}
	var ve *jsonschema.ValidationError
	switch {
	case err == nil:
	case errors.As(err, &ve):
		r := reporter{raw: v.raw, kind: k, doc: doc, val: val, nodes: nodeIndex{root: doc}}
		vs = append(vs, notAt(r.report(ve), c.vs)...)
	default:
		// Only a schema bug (an infinite $ref loop) gets here.
		vs = append(vs, Violation{Line: doc.Line, Column: doc.Column, Message: "cannot check the document: " + err.Error()})
	}
	return capViolations(sortViolations(vs), doc)
}

// notAt drops the violations at a node the converter already reported
// (at): what it said, such as a tag the text is not a value of, is the
// cause, and the schema's word on the text kept in the node's place
// ("want true or false, got a string") would only repeat it.
func notAt(vs, at []Violation) []Violation {
	if len(at) == 0 {
		return vs
	}
	type pos struct{ line, col int }
	seen := make(map[pos]bool, len(at))
	for _, a := range at {
		seen[pos{a.Line, a.Column}] = true
	}
	return slices.DeleteFunc(vs, func(v Violation) bool { return seen[pos{v.Line, v.Column}] })
}

// maxViolations caps what one document reports: past a hundred problems
// a list of them stops helping, and building each message costs time.
const maxViolations = 100

// capViolations keeps the first maxViolations of vs and, past them, one
// violation at the document's start (doc) saying how many more there are.
func capViolations(vs []Violation, doc *yaml.Node) []Violation {
	if len(vs) <= maxViolations {
		return vs
	}
	more := len(vs) - maxViolations
	return append(vs[:maxViolations:maxViolations], Violation{Line: doc.Line, Column: doc.Column,
		Message: fmt.Sprintf("%d more violations not shown; fix these first", more)})
}

// sortViolations orders by position, then path and message, and drops
// exact repeats, so that output is the same on every run.
func sortViolations(vs []Violation) []Violation {
	slices.SortFunc(vs, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column),
			strings.Compare(a.Path, b.Path), strings.Compare(a.Message, b.Message))
	})
	return slices.Compact(vs)
}

// pathSeg is one step of a field path: a mapping key or a list index.
type pathSeg struct {
	key   string
	index int
	isKey bool
}

// formatPath renders path segments as a field path:
// spec.hosts[0], metadata.labels["app.kubernetes.io/name"].
func formatPath(segs []pathSeg) string {
	p := ""
	for _, s := range segs {
		if s.isKey {
			p = diag.JoinKey(p, s.key)
		} else {
			p = diag.JoinIndex(p, s.index)
		}
	}
	return p
}
