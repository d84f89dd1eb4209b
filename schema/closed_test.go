package schema

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
)

// TestOnlyForeignShapesAreOpen walks the generated JSON Schema and fails
// on any object that accepts unknown fields, except the ones keyhole does
// not own. It guards the CUE-to-JSON-Schema step: some CUE forms (a
// pattern constraint keyed by a definition, a struct conjoined with a
// validator) generate an open object, silently dropping checks.
func TestOnlyForeignShapesAreOpen(t *testing.T) {
	allowed := []string{
		"/$defs/Agent/properties/sandbox_options", // the sandbox provider's options
		"/$defs/AgentRuntime/properties/spec",     // the operator's, but for spec.sandbox
		"/$defs/ToolRegistry/properties/spec",     // likewise
		"/$defs/Status",                           // operator-written status
	}
	var doc map[string]any
	if err := json.Unmarshal(JSONSchema(), &doc); err != nil {
		t.Fatal(err)
	}
	var open []string
	var walk func(s any, ptr string)
	walk = func(s any, ptr string) {
		switch s := s.(type) {
		case map[string]any:
			_, ref := s["$ref"]
			if s["type"] == "object" && !ref {
				switch ap := s["additionalProperties"].(type) {
				case bool:
					if ap {
						open = append(open, ptr)
					}
				case map[string]any:
					// A map whose values have a schema: closed enough.
				default:
					open = append(open, ptr)
				}
			}
			for k, v := range s {
				walk(v, ptr+"/"+k)
			}
		case []any:
			for i, v := range s {
				walk(v, ptr+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc, "")
	slices.Sort(open)
	slices.Sort(allowed)
	if !slices.Equal(open, allowed) {
		t.Errorf("open objects in the JSON Schema:\n got %q\nwant %q", open, allowed)
	}
}
