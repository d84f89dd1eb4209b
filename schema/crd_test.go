package schema

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestCRDsAreStructural checks the rules Kubernetes applies to a CRD's
// openAPIV3Schema that the generator must get right: every node typed (or
// explicitly preserving unknown fields), no $ref, no const, no
// additionalProperties next to properties or set to false, metadata only
// typed. Only the kinds keyhole owns are published: a CRD for the
// operator's AgentRuntime or ToolRegistry would replace the operator's.
func TestCRDsAreStructural(t *testing.T) {
	dec := yaml.NewDecoder(bytes.NewReader(CRDs()))
	got := map[string]map[string]any{}
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		spec := doc["spec"].(map[string]any)
		got[spec["names"].(map[string]any)["kind"].(string)] = doc
	}
	tests := map[string]struct {
		plural string
	}{
		"Connection":   {plural: "connections"},
		"SandboxClass": {plural: "sandboxclasses"},
	}
	for _, k := range OperatorKinds() {
		if _, ok := got[string(k)]; ok {
			t.Errorf("CRDs() defines %s, a kind the operator ships", k)
		}
	}
	if !bytes.Contains(CRDs(), []byte("keyhole never publishes\n# a CRD for a kind the operator ships")) {
		t.Error("CRDs() does not say why AgentRuntime and ToolRegistry are not there")
	}
	if len(got) != len(tests) {
		t.Errorf("CRDs() holds %d CRDs, want %d", len(got), len(tests))
	}
	for kind, tc := range tests {
		t.Run(kind, func(t *testing.T) {
			doc, ok := got[kind]
			if !ok {
				t.Fatal("missing")
			}
			if doc["apiVersion"] != "apiextensions.k8s.io/v1" || doc["kind"] != "CustomResourceDefinition" {
				t.Errorf("not a v1 CRD: %v %v", doc["apiVersion"], doc["kind"])
			}
			if name := doc["metadata"].(map[string]any)["name"]; name != tc.plural+".omnia.altairalabs.ai" {
				t.Errorf("name = %v", name)
			}
			spec := doc["spec"].(map[string]any)
			if spec["group"] != "omnia.altairalabs.ai" || spec["scope"] != "Namespaced" {
				t.Errorf("group %v scope %v", spec["group"], spec["scope"])
			}
			versions := spec["versions"].([]any)
			if len(versions) != 1 {
				t.Fatalf("%d versions", len(versions))
			}
			ver := versions[0].(map[string]any)
			if ver["name"] != "v1alpha1" || ver["served"] != true || ver["storage"] != true {
				t.Errorf("version %v", ver)
			}
			root := ver["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
			for _, problem := range structuralProblems(root, "") {
				t.Error(problem)
			}
			props := root["properties"].(map[string]any)
			if md := props["metadata"].(map[string]any); len(md) != 1 || md["type"] != "object" {
				t.Errorf("metadata schema %v: a CRD may only say metadata is an object here", md)
			}
			if props["spec"].(map[string]any)["x-kubernetes-preserve-unknown-fields"] == true {
				t.Error("spec preserves unknown fields; keyhole owns all of it")
			}
		})
	}
}

func structuralProblems(s map[string]any, path string) []string {
	var out []string
	for _, k := range []string{"$ref", "const", "anyOf", "oneOf", "allOf", "not", "$defs"} {
		if _, ok := s[k]; ok {
			out = append(out, fmt.Sprintf("%s: has %s", path, k))
		}
	}
	_, typed := s["type"]
	if !typed && s["x-kubernetes-preserve-unknown-fields"] != true {
		out = append(out, path+": no type")
	}
	ap, hasAP := s["additionalProperties"]
	if hasAP {
		if ap == false {
			out = append(out, path+": additionalProperties: false")
		}
		if _, ok := s["properties"]; ok {
			out = append(out, path+": additionalProperties next to properties")
		}
		if m, ok := ap.(map[string]any); ok {
			out = append(out, structuralProblems(m, path+"/additionalProperties")...)
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, structuralProblems(props[k].(map[string]any), path+"/"+k)...)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		out = append(out, structuralProblems(items, path+"/items")...)
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 && !strings.HasPrefix(fmt.Sprint(s["type"]), "string") {
		out = append(out, path+": enum on a non-string type")
	}
	return out
}
