package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
	"github.com/santhosh-tekuri/jsonschema/v5"
	"go.yaml.in/yaml/v3"
)

// operatorSchema is one operator release's AgentRuntime and ToolRegistry
// schemas, compiled for validation the way the API server validates a
// custom resource: defaults applied first, then the OpenAPI schema made
// strict like the server's field validation (an undeclared field is an
// error), then the CRD's CEL rules wherever they can run offline.
type operatorSchema struct {
	// raw is the converted JSON Schema document, {"$defs": {kind: ...}},
	// which the reporter reads to explain a failure.
	raw     map[string]any
	schemas map[Kind]*jsonschema.Schema
	trees   map[Kind]*crdNode
}

// crdNode is what validation needs of one node of a CRD schema beyond
// JSON Schema: its default, CEL rules, list-map keys and integer type.
type crdNode struct {
	props  map[string]*crdNode
	items  *crdNode
	values *crdNode // additionalProperties
	// def is the default, set when hasDef.
	def     any
	hasDef  bool
	rules   []crdRule
	mapKeys []string
	integer bool
}

// crdRule is one x-kubernetes-validations rule.
type crdRule struct {
	rule, message string
	// prg is nil for a rule that cannot run offline: one that compares
	// with the stored object (oldSelf) or uses a function only the API
	// server's CEL environment has. Those are left to the server.
	prg cel.Program
}

// celCostLimit is the API server's per-call cost limit of a CRD rule; a
// rule that costs more on a document is refused there as well.
const celCostLimit = 1_000_000

// operatorURL is the name the converted schemas are compiled under; it
// never leaves the process.
const operatorURL = "https://keyhole.dev/operator.json"

// compileOperator converts and compiles the CRD of one kind of a release.
func compileOperator(version string, k Kind) (*operatorSchema, error) {
	b, err := operatorCRD(version, k)
	if err != nil {
		return nil, err
	}
	o, err := compileCRDs(map[Kind][]byte{k: b}, Group, rootSchema)
	if err != nil {
		return nil, fmt.Errorf("operator %s: %w", version, err)
	}
	return o, nil
}

// compileCRDs converts and compiles CRDs, one per kind, each serving
// apiVersion (group/version); root adjusts the top of each converted
// schema.
func compileCRDs(crds map[Kind][]byte, apiVersion string, root func(map[string]any, *crdNode)) (*operatorSchema, error) {
	env, err := cel.NewEnv(
		cel.Variable("self", cel.DynType),
		cel.Variable("oldSelf", cel.DynType),
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(), ext.Sets(), ext.Lists(),
	)
	if err != nil {
		return nil, fmt.Errorf("the CEL environment: %w", err)
	}
	defs := map[string]any{}
	trees := map[Kind]*crdNode{}
	kinds := slices.Sorted(maps.Keys(crds))
	for _, k := range kinds {
		s, err := crdSchema(crds[k], apiVersion)
		if err != nil {
			return nil, fmt.Errorf("the %s CRD: %w", k, err)
		}
		conv := crdConverter{env: env}
		js, tree := conv.node(s, 0)
		if conv.err != nil {
			return nil, fmt.Errorf("the %s CRD: %w", k, conv.err)
		}
		root(js, tree)
		defs[string(k)] = js
		trees[k] = tree
	}
	raw := map[string]any{"$defs": defs}
	doc, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	// OpenAPI 3.0, which CRD schemas are written in, follows draft 4
	// (exclusiveMinimum is a boolean; formats are asserted).
	c.Draft = jsonschema.Draft4
	if err := c.AddResource(operatorURL, bytes.NewReader(doc)); err != nil {
		return nil, fmt.Errorf("loading the converted schemas: %w", err)
	}
	schemas, err := compileKinds(c, operatorURL, kinds, "compiling the %s schema: %w")
	if err != nil {
		return nil, err
	}
	return &operatorSchema{raw: raw, schemas: schemas, trees: trees}, nil
}

// rootSchema adjusts the top of a converted CRD schema: Kubernetes
// validates metadata itself and keyhole's schema has closed it already;
// status is the operator's to write; spec.sandbox is the sandbox
// feature's, checked by keyhole's own schema (an operator without the
// feature is reported with its own code, not as an unknown field).
func rootSchema(js map[string]any, tree *crdNode) {
	props := crdRoot(js, tree)
	if spec, ok := props["spec"].(map[string]any); ok {
		sp, _ := spec["properties"].(map[string]any)
		if sp != nil {
			if _, ok := sp["sandbox"]; !ok {
				sp["sandbox"] = map[string]any{}
			}
		}
	}
}

// crdRoot adjusts the top of any converted CRD schema: the API server
// validates metadata itself, and status is the controller's to write. It
// returns the top's properties.
func crdRoot(js map[string]any, tree *crdNode) map[string]any {
	props, _ := js["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		js["properties"] = props
	}
	props["metadata"] = map[string]any{"type": "object"}
	props["status"] = map[string]any{}
	delete(tree.props, "status")
	return props
}

// jsonNumbers returns a copy of a value decoded from YAML with the types
// a document decoded from JSON has: every number a float64, as the
// validator and the defaulting compare them. Its maps and lists are new.
func jsonNumbers(v any) any {
	switch v := v.(type) {
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case uint64:
		return float64(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = jsonNumbers(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = jsonNumbers(x)
		}
		return out
	}
	return v
}

// crdConverter turns an OpenAPI v3 CRD schema into JSON Schema and the
// crdNode tree beside it.
type crdConverter struct {
	env *cel.Env
	err error
}

// node converts one schema node.
func (c *crdConverter) node(s map[string]any, depth int) (map[string]any, *crdNode) {
	n := &crdNode{}
	js := map[string]any{}
	if depth > maxDepth {
		c.err = errors.New("the schema nests too deeply")
		return js, n
	}
	preserve := s["x-kubernetes-preserve-unknown-fields"] == true
	for k, v := range s {
		switch k {
		case "type":
			js[k] = v
			n.integer = v == "integer"
		case "properties":
			m, _ := v.(map[string]any)
			props := map[string]any{}
			n.props = map[string]*crdNode{}
			for name, p := range m {
				pm, _ := p.(map[string]any)
				props[name], n.props[name] = c.node(pm, depth+1)
			}
			js[k] = props
		case "items":
			if m, ok := v.(map[string]any); ok {
				js[k], n.items = c.node(m, depth+1)
			}
		case "additionalProperties":
			switch v := v.(type) {
			case map[string]any:
				js[k], n.values = c.node(v, depth+1)
			case bool:
				js[k] = v
			}
		case "allOf", "anyOf", "oneOf":
			l, _ := v.([]any)
			var out []any
			for _, x := range l {
				m, _ := x.(map[string]any)
				sub, _ := c.node(m, depth+1)
				// A branch constrains only: it must not close the object.
				delete(sub, "additionalProperties")
				out = append(out, sub)
			}
			js[k] = out
		case "not":
			if m, ok := v.(map[string]any); ok {
				sub, _ := c.node(m, depth+1)
				delete(sub, "additionalProperties")
				js[k] = sub
			}
		case "required", "enum", "pattern", "minLength", "maxLength", "minimum", "maximum",
			"exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems", "minProperties",
			"maxProperties", "multipleOf", "uniqueItems":
			js[k] = jsonNumbers(v)
		case "format":
			// Only the formats the API server checks and draft 4 knows;
			// int32, int64, double and the like are type hints.
			if f, _ := v.(string); f == "date-time" || f == "email" || f == "ipv4" || f == "ipv6" || f == "uri" || f == "hostname" {
				js[k] = f
			}
		case "default":
			n.def, n.hasDef = jsonNumbers(v), true
		case "x-kubernetes-list-type":
			switch v {
			case "set":
				js["uniqueItems"] = true
			case "map":
				keys, _ := s["x-kubernetes-list-map-keys"].([]any)
				for _, key := range keys {
					if ks, ok := key.(string); ok {
						n.mapKeys = append(n.mapKeys, ks)
					}
				}
			}
		case "x-kubernetes-validations":
			l, _ := v.([]any)
			for _, x := range l {
				m, _ := x.(map[string]any)
				rule, _ := m["rule"].(string)
				msg, _ := m["message"].(string)
				n.rules = append(n.rules, crdRule{rule: rule, message: msg, prg: c.program(rule)})
			}
		}
	}
	if s["x-kubernetes-int-or-string"] == true {
		js["type"] = []any{"integer", "string"}
	}
	if s["nullable"] == true {
		if t, ok := js["type"].(string); ok {
			js["type"] = []any{t, "null"}
		}
		if e, ok := js["enum"].([]any); ok {
			js["enum"] = append(slices.Clone(e), nil)
		}
	}
	// The API server's strict field validation refuses a field an object
	// schema does not declare, unless the schema preserves unknown fields.
	_, hasAP := js["additionalProperties"]
	if !preserve && !hasAP && (s["type"] == "object" || s["properties"] != nil) {
		js["additionalProperties"] = false
	}
	return js, n
}

// program compiles a rule for offline evaluation, or returns nil when it
// cannot run offline.
func (c *crdConverter) program(rule string) cel.Program {
	if rule == "" || strings.Contains(rule, "oldSelf") {
		return nil
	}
	ast, iss := c.env.Compile(rule)
	if iss.Err() != nil {
		return nil
	}
	prg, err := c.env.Program(ast, cel.CostLimit(celCostLimit))
	if err != nil {
		return nil
	}
	return prg
}

// ValidateOperator checks an AgentRuntime or ToolRegistry document against
// the operator's own CRD schema of op's version, as the operator's API
// server would with strict field validation: defaults applied, then
// required fields, undeclared fields, types, enums, patterns and limits,
// then the CRD's CEL rules that can run offline and the uniqueness of
// list-map keys. spec.sandbox is left to keyhole's own schema. It returns
// the violations sorted by position; nil means the server would accept
// the document's spec.
func (v *Validator) ValidateOperator(op Operator, k Kind, doc *yaml.Node) []Violation {
	if doc == nil {
		return []Violation{{Message: "the document is empty"}}
	}
	sch, err := v.operator(op.Version, k)
	if err != nil {
		return []Violation{{Line: doc.Line, Column: doc.Column, Message: "cannot check against the operator's schema: " + err.Error()}}
	}
	return sch.validate(k, doc)
}

// validate checks doc against the compiled schema of kind k.
func (o *operatorSchema) validate(k Kind, doc *yaml.Node) []Violation {
	s, ok := o.schemas[k]
	if !ok {
		return []Violation{{Message: fmt.Sprintf("%s is not a kind the operator owns", k)}}
	}
	c := converter{}
	val := c.value(doc, 0)
	if c.overflow || len(c.vs) > 0 {
		return sortViolations(c.vs)
	}
	tree := o.trees[k]
	val = applyDefaults(val, tree, 0)
	r := reporter{raw: o.raw, kind: k, doc: doc, val: val, nodes: nodeIndex{root: doc}}
	var vs []Violation
	var ve *jsonschema.ValidationError
	switch err := s.Validate(val); {
	case err == nil:
	case errors.As(err, &ve):
		vs = append(vs, r.report(ve)...)
	default:
		vs = append(vs, Violation{Line: doc.Line, Column: doc.Column, Message: "cannot check the document: " + err.Error()})
	}
	// A rule that fails to evaluate (a field it reads is missing) says
	// nothing the schema's own findings have not said better.
	rw := ruleWalker{r: &r, quietErrors: len(vs) > 0}
	rw.walk(val, tree, nil)
	vs = append(vs, rw.vs...)
	return capViolations(sortViolations(vs), doc)
}

// operator returns the compiled schema of one kind of a release,
// compiling it on first use: most runs never need it, and the
// AgentRuntime CRD is large (docs/schema.md has the figures).
func (v *Validator) operator(version string, k Kind) (*operatorSchema, error) {
	v.opMu.Lock()
	defer v.opMu.Unlock()
	key := version + "/" + string(k)
	if o, ok := v.ops[key]; ok {
		return o.schema, o.err
	}
	if _, err := LookupOperator(version); err != nil {
		return nil, err
	}
	if _, ok := operatorFile(k); !ok {
		return nil, fmt.Errorf("%s is not a kind the operator owns", k)
	}
	o, err := compileOperator(version, k)
	if v.ops == nil {
		v.ops = map[string]compiledOperator{}
	}
	v.ops[key] = compiledOperator{schema: o, err: err}
	return o, err
}

// compiledOperator is the outcome of compiling one release's schemas.
type compiledOperator struct {
	schema *operatorSchema
	err    error
}

// applyDefaults fills in each absent field that has a default, as the API
// server does before it validates; a default is copied, never shared.
func applyDefaults(v any, n *crdNode, depth int) any {
	if n == nil || depth > maxDepth {
		return v
	}
	switch val := v.(type) {
	case map[string]any:
		for name, p := range n.props {
			if _, ok := val[name]; !ok && p.hasDef {
				val[name] = jsonNumbers(p.def) // a copy: its numbers are float64 already
			}
		}
		for k, x := range val {
			child := n.props[k]
			if child == nil && n.props == nil {
				child = n.values
			}
			val[k] = applyDefaults(x, child, depth+1)
		}
	case []any:
		for i, x := range val {
			val[i] = applyDefaults(x, n.items, depth+1)
		}
	}
	return v
}

// ruleWalker runs the CEL rules and list-map checks over a document.
type ruleWalker struct {
	r  *reporter
	vs []Violation
	// quietErrors drops evaluation errors, reporting only rules that
	// evaluate to false.
	quietErrors bool
}

func (w *ruleWalker) at(segs []string, msg string) {
	node, key := w.r.nodes.lookup(segs)
	if key != nil {
		node = key
	}
	v := Violation{Path: formatPath(w.r.typed(segs)), Message: msg}
	if node != nil {
		v.Line, v.Column = node.Line, node.Column
	}
	w.vs = append(w.vs, v)
}

func (w *ruleWalker) walk(v any, n *crdNode, segs []string) {
	if n == nil || v == nil || len(segs) > maxDepth {
		return
	}
	if len(n.rules) > 0 {
		self := celValue(v, n, 0)
		for _, rule := range n.rules {
			if rule.prg == nil {
				continue
			}
			out, _, err := rule.prg.Eval(map[string]any{"self": self})
			switch {
			case err != nil:
				if w.quietErrors {
					continue
				}
				w.at(segs, fmt.Sprintf("the operator's rule %s cannot be evaluated on this value: %v", quote(rule.rule), err))
			case out.Value() == false:
				msg := rule.message
				if msg == "" {
					msg = "failed rule: " + rule.rule
				}
				w.at(segs, msg)
			}
		}
	}
	switch val := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(val) {
			child := n.props[k]
			if child == nil && n.props == nil {
				child = n.values
			}
			w.walk(val[k], child, append(slices.Clip(segs), k))
		}
	case []any:
		if len(n.mapKeys) > 0 {
			w.uniqueKeys(val, n.mapKeys, segs)
		}
		for i, x := range val {
			w.walk(x, n.items, append(slices.Clip(segs), strconv.Itoa(i)))
		}
	}
}

// uniqueKeys reports an item of a list-map whose keys repeat an earlier
// item's, as the API server does.
func (w *ruleWalker) uniqueKeys(items []any, keys []string, segs []string) {
	seen := map[string]int{}
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		var parts []string
		for _, k := range keys {
			b, _ := json.Marshal(m[k])
			parts = append(parts, k+"="+string(b))
		}
		id := strings.Join(parts, ", ")
		if first, dup := seen[id]; dup {
			w.at(append(slices.Clip(segs), strconv.Itoa(i)), fmt.Sprintf("duplicate entry: item %d has the same %s", first, id))
			continue
		}
		seen[id] = i
	}
}

// celValue gives CEL the value with the types the API server would: a
// whole number where the schema says integer is an int, not a double.
func celValue(v any, n *crdNode, depth int) any {
	if depth > maxDepth {
		return v
	}
	switch val := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(val))
		for k, x := range val {
			var child *crdNode
			if n != nil {
				child = n.props[k]
				if child == nil && n.props == nil {
					child = n.values
				}
			}
			out[k] = celValue(x, child, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(val))
		var items *crdNode
		if n != nil {
			items = n.items
		}
		for i, x := range val {
			out[i] = celValue(x, items, depth+1)
		}
		return out
	case float64:
		if n != nil && n.integer && val == math.Trunc(val) && math.Abs(val) < 1<<63 {
			return int64(val)
		}
	}
	return v
}
