package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Nearly every document Validate sees is valid, and the validator spends
// much of its time on references: each $ref is one more level of its
// recursion, with its own copy of the scope, its own closures and its own
// map of property names. So Validate first checks a document against a
// copy of its kind's schema with every reference written out in place,
// which accepts exactly the documents the original accepts, and validates
// with the original only when that copy refuses: the original's keyword
// locations name the $defs that the messages are written from (see
// reporter). docs/schema.md has the figures.

// inlineURL is the name the inlined copies are compiled under.
const inlineURL = "https://keyhole.dev/schema-inlined/"

// compileInlined compiles, for each kind, the inlined copy of its schema.
// A kind whose schema cannot be inlined (see inline) has none, and
// Validate uses the original alone.
func compileInlined(src []byte) (map[Kind]*jsonschema.Schema, error) {
	var doc map[string]any
	d := json.NewDecoder(bytes.NewReader(src))
	d.UseNumber() // numbers go back out as they came in
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decoding the embedded JSON Schema: %w", err)
	}
	defs, _ := doc["$defs"].(map[string]any)
	out := map[Kind]*jsonschema.Schema{}
	for _, k := range kinds {
		in, ok := inline(defs, defs[string(k)], nil)
		if !ok {
			continue
		}
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("inlining the schema of %s: %w", k, err)
		}
		c := newCompiler()
		url := inlineURL + string(k) + ".json"
		if err := c.AddResource(url, bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("loading the inlined schema of %s: %w", k, err)
		}
		s, err := c.Compile(url)
		if err != nil {
			return nil, fmt.Errorf("compiling the inlined schema of %s: %w", k, err)
		}
		out[k] = s
	}
	return out, nil
}

// newCompiler is the compiler both the schema and its inlined copies are
// compiled with: the same draft and the same assertions, so that the two
// accept the same documents.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	return c
}

// inline returns schema v with every reference to a definition
// ("#/$defs/Name") replaced by that definition, itself inlined. A
// reference alone becomes the definition; a reference beside other
// keywords becomes one more entry of allOf, which is what a reference
// means in draft 2020-12. Only the keywords whose values are schemas are
// walked; the others (type, enum, const, pattern, ...) hold data and are
// copied. ok is false when v holds what cannot be written out in place
// and keep its meaning: a reference to anything but a whole definition, a
// definition that refers to itself, or another keyword that names or
// resolves a schema ($id, $anchor, $dynamicRef and the like). stack holds
// the definitions being inlined, to find the cycles.
func inline(defs map[string]any, v any, stack []string) (out any, ok bool) {
	obj, isObject := v.(map[string]any)
	if !isObject {
		return v, true // true and false are schemas too
	}
	m := make(map[string]any, len(obj))
	var ref any
	for key, e := range obj {
		switch {
		case key == "$ref":
			s, isString := e.(string)
			name, local := strings.CutPrefix(s, "#/$defs/")
			if !isString || !local || strings.Contains(name, "/") {
				return nil, false
			}
			name = unescapePointer(name)
			def, found := defs[name]
			if !found || slices.Contains(stack, name) {
				return nil, false
			}
			if ref, ok = inline(defs, def, append(stack, name)); !ok {
				return nil, false
			}
			continue
		case key == "$comment":
			m[key] = e
			continue
		case strings.HasPrefix(key, "$"):
			return nil, false
		}
		switch schemaKeywords[key] {
		case oneSchema:
			m[key], ok = inline(defs, e, stack)
		case schemaList:
			m[key], ok = inlineEach(e, func(e any) (any, bool) { return inline(defs, e, stack) })
		case schemaByName:
			m[key], ok = inlineByName(e, func(e any) (any, bool) { return inline(defs, e, stack) })
		default:
			m[key], ok = e, true
		}
		if !ok {
			return nil, false
		}
	}
	if ref == nil {
		return m, true
	}
	if len(m) == 0 {
		return ref, true
	}
	all, _ := m["allOf"].([]any)
	m["allOf"] = append(slices.Clip(all), ref)
	return m, true
}

// What the value of each applicator keyword of draft 2020-12 is: a schema,
// a list of them, or a map of names to them.
const (
	oneSchema = iota + 1
	schemaList
	schemaByName
)

var schemaKeywords = map[string]int{
	"additionalProperties": oneSchema, "items": oneSchema, "contains": oneSchema,
	"propertyNames": oneSchema, "not": oneSchema, "if": oneSchema, "then": oneSchema,
	"else": oneSchema, "unevaluatedProperties": oneSchema, "unevaluatedItems": oneSchema,
	"allOf": schemaList, "anyOf": schemaList, "oneOf": schemaList, "prefixItems": schemaList,
	"properties": schemaByName, "patternProperties": schemaByName, "dependentSchemas": schemaByName,
}

// inlineEach inlines each schema of a list.
func inlineEach(v any, f func(any) (any, bool)) (any, bool) {
	list, ok := v.([]any)
	if !ok {
		return v, true // not a list: the compiler says so, for both
	}
	out := make([]any, len(list))
	for i, e := range list {
		if out[i], ok = f(e); !ok {
			return nil, false
		}
	}
	return out, true
}

// inlineByName inlines each schema of a map of names to schemas.
func inlineByName(v any, f func(any) (any, bool)) (any, bool) {
	byName, ok := v.(map[string]any)
	if !ok {
		return v, true
	}
	out := make(map[string]any, len(byName))
	for name, e := range byName {
		if out[name], ok = f(e); !ok {
			return nil, false
		}
	}
	return out, true
}
