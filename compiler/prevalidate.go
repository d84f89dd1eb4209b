package compiler

import (
	"keyhole.dev/keyhole/internal/parallel"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// prevalidated holds, by document, what validating it against its kind's
// schema (and, for the operator's kinds, the operator's) found. Validation
// reads nothing but the document and the schemas, so it runs before the
// passes, spread over every core; the passes then read the findings in
// their own order, which keeps the output the same whatever the number
// of workers.
type prevalidated struct {
	// operator is the operator the operator findings were made against.
	operator schema.Operator
	docs     map[*source.Document]*validation
}

type validation struct {
	schema, operator []schema.Violation
}

// prevalidate validates every document of a kind keyhole checks, on
// workers goroutines (runtime.GOMAXPROCS(0) when workers <= 0).
func prevalidate(docs []*source.Document, v *schema.Validator, op schema.Operator, workers int) prevalidated {
	type job struct {
		doc  *source.Document
		kind schema.Kind
	}
	var jobs []job
	for _, d := range docs {
		if d.Node == nil || digestOfDoc(d) != nil {
			continue // Digest validated it, or it was not read
		}
		obj := d.Object()
		if isConfig(obj) {
			continue
		}
		if kind, ok := schema.Lookup(obj.APIVersion, obj.Kind); ok {
			jobs = append(jobs, job{d, kind})
		}
	}
	found := make([]validation, len(jobs))
	parallel.For(len(jobs), workers, func(i int) {
		j := jobs[i]
		found[i].schema = v.Validate(j.kind, j.doc.Node)
		if len(found[i].schema) == 0 && (j.kind == "AgentRuntime" || j.kind == "ToolRegistry") {
			found[i].operator = v.ValidateOperator(op, j.kind, j.doc.Node)
		}
	})
	pre := prevalidated{operator: op, docs: make(map[*source.Document]*validation, len(jobs))}
	for i, j := range jobs {
		pre.docs[j.doc] = &found[i]
	}
	return pre
}

// validate is v.Validate(kind, doc.Node), found beforehand when it could be.
func (p *pass) validate(v *schema.Validator, kind schema.Kind, doc *source.Document) []schema.Violation {
	if dg := digestOfDoc(doc); dg != nil && dg.validated && dg.schemaKind() == kind {
		return dg.schemaFindings()
	}
	if f := p.pre.docs[doc]; f != nil {
		return f.schema
	}
	return v.Validate(kind, doc.Node)
}

// validateOperator is v.ValidateOperator(op, kind, doc.Node), found
// beforehand when it could be.
func (p *pass) validateOperator(v *schema.Validator, op schema.Operator, kind schema.Kind, doc *source.Document) []schema.Violation {
	if dg := digestOfDoc(doc); dg != nil && dg.validated && dg.schemaKind() == kind && len(dg.schemaFindings()) == 0 && dg.checkedAgainst(op) {
		return dg.opFindings()
	}
	if f := p.pre.docs[doc]; f != nil && op == p.pre.operator && len(f.schema) == 0 {
		return f.operator
	}
	n, err := doc.Tree()
	if err != nil {
		return []schema.Violation{{Line: doc.Pos.Line, Column: doc.Pos.Column, Message: "cannot check it against the operator's schema: " + err.Error()}}
	}
	return v.ValidateOperator(op, kind, n)
}
