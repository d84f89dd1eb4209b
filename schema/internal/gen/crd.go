package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// crd describes one CustomResourceDefinition keyhole publishes.
type crd struct {
	kind, plural string
}

// crds are the kinds keyhole owns the shape of. AgentRuntime and
// ToolRegistry are the omnia operator's: it ships their CRDs, with
// required fields and CEL rules keyhole's schema does not have, and a CRD
// of keyhole's for either would replace the operator's on apply.
var crds = []crd{
	{kind: "Connection", plural: "connections"},
	{kind: "SandboxClass", plural: "sandboxclasses"},
}

// crdsHeader heads crds/all.yaml, what `keyhole schema --crds` prints.
const crdsHeader = `# The CRDs of the kinds keyhole owns the shape of: Connection and
# SandboxClass. AgentRuntime and ToolRegistry are the omnia operator's
# kinds; install the operator's own CRDs for them. keyhole never publishes
# a CRD for a kind the operator ships.
`

const (
	crdGroup   = "omnia.altairalabs.ai"
	crdVersion = "v1alpha1"
)

// crdFiles renders one CRD file per kind plus crds/all.yaml, the stream
// `keyhole schema` prints.
func crdFiles(doc map[string]any) (map[string][]byte, error) {
	defs, _ := doc["$defs"].(map[string]any)
	out := map[string][]byte{}
	var all bytes.Buffer
	all.WriteString("# " + generatedComment + "\n" + crdsHeader)
	for i, c := range crds {
		root, ok := defs[c.kind].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("no JSON Schema for %s", c.kind)
		}
		s, err := structural(root, defs, 0)
		if err != nil {
			return nil, fmt.Errorf("CRD for %s: %w", c.kind, err)
		}
		props := s["properties"].(map[string]any)
		// Kubernetes owns apiVersion, kind and metadata: a CRD may only
		// say they are there.
		props["apiVersion"] = map[string]any{"type": "string"}
		props["kind"] = map[string]any{"type": "string"}
		props["metadata"] = map[string]any{"type": "object"}
		// The API server fills these in; requiring them of a stored object
		// says nothing and some tools reject it.
		if req, ok := s["required"].([]any); ok {
			s["required"] = slices.DeleteFunc(slices.Clone(req), func(f any) bool {
				return f == "apiVersion" || f == "kind" || f == "metadata"
			})
		}
		if st, ok := props["status"].(map[string]any); ok {
			delete(st, "additionalProperties")
			st["x-kubernetes-preserve-unknown-fields"] = true
		}
		obj := map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1",
			"kind":       "CustomResourceDefinition",
			"metadata":   map[string]any{"name": c.plural + "." + crdGroup},
			"spec": map[string]any{
				"group": crdGroup,
				"scope": "Namespaced",
				"names": map[string]any{
					"kind":     c.kind,
					"listKind": c.kind + "List",
					"plural":   c.plural,
					"singular": strings.ToLower(c.kind),
				},
				"versions": []any{map[string]any{
					"name":         crdVersion,
					"served":       true,
					"storage":      true,
					"schema":       map[string]any{"openAPIV3Schema": s},
					"subresources": map[string]any{"status": map[string]any{}},
				}},
			},
		}
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(obj); err != nil {
			return nil, err
		}
		if err := enc.Close(); err != nil {
			return nil, err
		}
		b := buf.Bytes()
		out["crds/"+crdGroup+"_"+c.plural+".yaml"] = append([]byte("# "+generatedComment+"\n"), b...)
		if i > 0 {
			all.WriteString("---\n")
		}
		all.Write(b)
	}
	out["crds/all.yaml"] = all.Bytes()
	return out, nil
}

// structural turns a generated JSON Schema into a Kubernetes structural
// schema: references inlined, const as a one-value enum, every node typed,
// and no additionalProperties: false (structural schemas prune unknown
// fields instead of rejecting them, and forbid it next to properties).
func structural(s map[string]any, defs map[string]any, depth int) (map[string]any, error) {
	if depth > 50 {
		return nil, fmt.Errorf("schema nests too deeply (a recursive definition?)")
	}
	out := map[string]any{}
	if ref, ok := s["$ref"].(string); ok {
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		target, found := defs[name].(map[string]any)
		if !ok || !found {
			return nil, fmt.Errorf("unresolvable $ref %q", ref)
		}
		inl, err := structural(target, defs, depth+1)
		if err != nil {
			return nil, err
		}
		for k, v := range inl {
			out[k] = v
		}
	}
	for k, v := range s {
		switch k {
		case "$ref", "$schema", "$comment", "$defs":
		case "const":
			out["enum"] = []any{v}
			if _, ok := out["type"]; !ok {
				out["type"] = jsonType(v)
			}
		case "enum":
			out["enum"] = v
			if l, ok := v.([]any); ok && len(l) > 0 {
				if _, ok := out["type"]; !ok {
					out["type"] = jsonType(l[0])
				}
			}
		case "additionalProperties":
			switch v := v.(type) {
			case bool:
				if v {
					out["x-kubernetes-preserve-unknown-fields"] = true
				}
			case map[string]any:
				sub, err := structural(v, defs, depth+1)
				if err != nil {
					return nil, err
				}
				out[k] = sub
			}
		case "properties":
			props := map[string]any{}
			m, _ := v.(map[string]any)
			for name, p := range m {
				switch p := p.(type) {
				case bool:
					// "true" accepts anything: keep the field, unpruned.
					props[name] = map[string]any{"x-kubernetes-preserve-unknown-fields": true}
				case map[string]any:
					sub, err := structural(p, defs, depth+1)
					if err != nil {
						return nil, err
					}
					props[name] = sub
				}
			}
			out[k] = props
		case "items":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("items must be a schema")
			}
			sub, err := structural(m, defs, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = sub
		case "not":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("not must be a schema")
			}
			if m["const"] == "" {
				// The one use of not: a non-empty string.
				out["minLength"] = 1
				continue
			}
			return nil, fmt.Errorf("cannot express not %v in a structural schema", m)
		case "anyOf", "oneOf", "allOf":
			return nil, fmt.Errorf("%s is not supported in a CRD schema", k)
		case "description":
			// CUE doc comments name the definition ("#Binding binds ...");
			// kubectl explain reads better without the CUE sigil.
			d, _ := v.(string)
			out[k] = strings.TrimPrefix(d, "#")
		case "required":
			l, _ := v.([]any)
			req := slices.Clone(l)
			out[k] = req
		default:
			out[k] = v
		}
	}
	if _, typed := out["type"]; !typed && out["x-kubernetes-preserve-unknown-fields"] == nil {
		return nil, fmt.Errorf("a schema node has no type: %v", s)
	}
	return out, nil
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "string"
}
