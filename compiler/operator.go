package compiler

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
)

// Codes of the operator checks: an AgentRuntime or ToolRegistry the omnia
// operator's API server would refuse, judged from the operator's own CRD
// schema for the declared version.
const (
	codeOperatorSchemaInvalid      = "OperatorSchemaInvalid"
	codeOperatorSandboxUnsupported = "OperatorSandboxUnsupported"
)

// operatorChecks are the rows of the operator checks in the check table.
func operatorChecks() []Check {
	return []Check{
		{Code: codeOperatorSchemaInvalid, Severity: diag.Error,
			Purpose: "An AgentRuntime or ToolRegistry that the omnia operator's API server would refuse, judged from the operator's own CRD for the declared version (keyhole.yaml's `operator.version`, else the newest keyhole knows): a required field missing (`promptPackRef`, `facades`, `handlers`), an undeclared field, a wrong type, a value outside an enum or pattern, a duplicate list key, or a CEL rule of the CRD that fails (those that need the stored object, or functions only the API server has, are left to the server).",
			Help:    "Correct the field named in the message; the operator's CRDs (`kubectl explain agentruntime.spec`) say what each field takes."},
		{Code: codeOperatorSandboxUnsupported, Severity: diag.Error,
			Purpose: "An AgentRuntime or ToolRegistry sets `spec.sandbox`, but the declared operator version has no sandbox feature: its CRD refuses the field under strict validation, and prunes it otherwise, leaving the sandbox without its Connections.",
			Help:    "Declare an operator version that serves the sandbox feature, remove `spec.sandbox`, or remove `operator.version` from keyhole.yaml and use the default kubernetes target, whose own proxy needs no operator."},
	}
}

// operatorWire is keyhole.yaml's operator section.
type operatorWire struct {
	Version string `yaml:"version"`
}

// readOperator reads keyhole.yaml's operator section, reporting unknown
// fields and versions keyhole has no schema for.
func (p *pass) readOperator(it *item, n *yaml.Node) {
	if n == nil {
		return
	}
	at := path{"operator"}
	if n.Kind != yaml.MappingNode {
		p.report(codeConfigInvalid, it, at, false, "operator must be a mapping, such as {version: %s}", schema.OperatorVersions()[0])
		return
	}
	known := []string{"version"}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if !slices.Contains(known, k) {
			p.report(codeConfigInvalid, it, at.with(k), true, "unknown field %q in operator%s", clip(k), didYouMean(k, known))
		}
	}
	var w operatorWire
	if err := n.Decode(&w); err != nil {
		p.report(codeConfigInvalid, it, at, false, "cannot read operator: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return
	}
	if w.Version == "" {
		p.report(codeConfigInvalid, it, at, false, "operator names no version; set operator.version to the release the cluster runs (keyhole knows %s)", strings.Join(schema.OperatorVersions(), ", "))
		return
	}
	if p.opts.OperatorVersion != "" {
		return // the flag wins; it was checked by setOperator
	}
	op, err := schema.LookupOperator(w.Version)
	if err != nil {
		p.report(codeConfigInvalid, it, at.with("version"), false, "operator version %q has no schema in keyhole (it knows %s)%s",
			clip(w.Version), strings.Join(schema.OperatorVersions(), ", "), didYouMean(w.Version, schema.OperatorVersions()))
		return
	}
	p.plan.Operator = op
}

// checkOperatorObject reports what checking an AgentRuntime or
// ToolRegistry that passed keyhole's schema against the operator's own
// found, as its digest holds it.
func (p *pass) checkOperatorObject(it *item, dg *digested, kind schema.Kind) {
	op, doc := p.plan.Operator, it.doc
	var found []schema.Violation
	if dg.more != nil {
		found = dg.more.opFindings
	}
	for _, vi := range found {
		pos, msg := violationAt(doc, vi.Line, vi.Column, vi.Path, fmt.Sprintf("%s (%s CRD of operator %s)", vi.Message, kind, op.Version))
		p.diags = append(p.diags, p.diagnostic(codeOperatorSchemaInvalid, it, pos, vi.Path, msg))
	}
	if op.Sandbox {
		return
	}
	if dg.sandbox {
		p.report(codeOperatorSandboxUnsupported, it, path{"spec", "sandbox"}, true,
			"operator %s has no sandbox feature: its %s CRD declares no spec.sandbox, so the API server refuses this %s under strict field validation and drops the field otherwise, leaving the sandbox without its Connections",
			op.Version, kind, kind)
	}
}

// setOperator starts the pass with the operator the flag names, else the
// default; keyhole.yaml's operator section may replace the default.
func (p *pass) setOperator() {
	p.plan.Operator = schema.DefaultOperator()
	if p.opts.OperatorVersion == "" {
		return
	}
	op, err := schema.LookupOperator(p.opts.OperatorVersion)
	if err != nil {
		p.diags = append(p.diags, diag.Diagnostic{Code: codeConfigInvalid, Severity: diag.Error,
			Message: fmt.Sprintf("--operator-version %q has no schema in keyhole (it knows %s)", clip(p.opts.OperatorVersion), strings.Join(schema.OperatorVersions(), ", "))})
		return
	}
	p.plan.Operator = op
}
