package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"go.yaml.in/yaml/v3"
)

// k8sSchemas validates Kubernetes objects against pinned schemas shipped
// in testdata (see testdata/README.md): the Kubernetes OpenAPI v3 documents
// for the built-in kinds, cert-manager's CRDs for its kinds.
type k8sSchemas struct {
	byGVK map[string]*jsonschema.Schema // "group/version/Kind"; core group is ""
}

// loadSchemas is shared by the tests of one run: compiling the OpenAPI
// documents takes a moment.
var loadSchemas = sync.OnceValues(func() (*k8sSchemas, error) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft4
	s := &k8sSchemas{byGVK: map[string]*jsonschema.Schema{}}
	gvkRefs := map[string]string{}

	openapi, err := filepath.Glob("testdata/k8s-openapi/*.json")
	if err != nil || len(openapi) == 0 {
		return nil, fmt.Errorf("no OpenAPI documents in testdata/k8s-openapi: %v", err)
	}
	for _, file := range openapi {
		var doc map[string]any
		if err := readJSON(file, &doc); err != nil {
			return nil, err
		}
		schemas, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)
		for name, sch := range schemas {
			m := sch.(map[string]any)
			gvks, _ := m["x-kubernetes-group-version-kind"].([]any)
			for _, g := range gvks {
				g := g.(map[string]any)
				gvkRefs[fmt.Sprintf("%s/%s/%s", g["group"], g["version"], g["kind"])] = file + "#/components/schemas/" + name
			}
		}
		strict(doc)
		if err := addResource(c, file, doc); err != nil {
			return nil, err
		}
	}
	crds, err := filepath.Glob("testdata/cert-manager-crds/*.yaml")
	if err != nil || len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs in testdata/cert-manager-crds: %v", err)
	}
	for _, file := range crds {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var crd crdDoc
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		ids, err := addCRD(c, file, &crd)
		if err != nil {
			return nil, err
		}
		maps.Copy(gvkRefs, ids)
	}
	for gvk, ref := range gvkRefs {
		sch, err := c.Compile(ref)
		if err != nil {
			return nil, fmt.Errorf("compiling %s: %w", gvk, err)
		}
		s.byGVK[gvk] = sch
	}
	return s, nil
})

// crdDoc is what the tests read of a CustomResourceDefinition: its group,
// kind and each version's schema.
type crdDoc struct {
	Spec struct {
		Group    string                `yaml:"group"`
		Names    struct{ Kind string } `yaml:"names"`
		Versions []struct {
			Name   string `yaml:"name"`
			Schema struct {
				OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
			} `yaml:"schema"`
		} `yaml:"versions"`
	} `yaml:"spec"`
}

// addCRD adds each version's schema of crd to c, made strict, as
// prefix/<version>.json, and returns those ids by group/version/kind.
func addCRD(c *jsonschema.Compiler, prefix string, crd *crdDoc) (map[string]string, error) {
	ids := map[string]string{}
	for _, v := range crd.Spec.Versions {
		sch := v.Schema.OpenAPIV3Schema
		strict(sch)
		id := prefix + "/" + v.Name + ".json"
		if err := addResource(c, id, sch); err != nil {
			return nil, err
		}
		ids[crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Kind] = id
	}
	return ids, nil
}

func readJSON(file string, v any) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

func addResource(c *jsonschema.Compiler, url string, doc any) error {
	data, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return c.AddResource(url, bytes.NewReader(data))
}

// strict makes every object schema that lists its properties refuse
// others, as the API server does with strict field validation: without
// it a misspelt field would validate. Schemas that preserve unknown
// fields are left open.
func strict(v any) {
	switch v := v.(type) {
	case map[string]any:
		_, hasProps := v["properties"]
		_, hasAdditional := v["additionalProperties"]
		if hasProps && !hasAdditional && v["x-kubernetes-preserve-unknown-fields"] != true {
			v["additionalProperties"] = false
		}
		for _, c := range v {
			strict(c)
		}
	case []any:
		for _, c := range v {
			strict(c)
		}
	}
}

// jsonValue decodes one rendered YAML object, as a map and as the JSON
// values the schema validator wants (float64, not int).
func jsonValue(data []byte) (map[string]any, any, error) {
	var o map[string]any
	if err := yaml.Unmarshal(data, &o); err != nil {
		return nil, nil, err
	}
	j, err := json.Marshal(o)
	if err != nil {
		return nil, nil, err
	}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		return nil, nil, err
	}
	return o, v, nil
}

// validate checks one rendered object against the schema of its kind.
func (s *k8sSchemas) validate(data []byte) error {
	o, v, err := jsonValue(data)
	if err != nil {
		return err
	}
	apiVersion, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	sch := s.byGVK[group+"/"+version+"/"+kind]
	if sch == nil {
		return fmt.Errorf("no schema for %s %s", apiVersion, kind)
	}
	return sch.Validate(v)
}

// TestManifestsValidate: every rendered Kubernetes object validates
// against the pinned Kubernetes OpenAPI schema or cert-manager CRD.
func TestManifestsValidate(t *testing.T) {
	s, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			files := mustRender(t, twoSandboxPlan(), Options{ProxyMode: mode, DefaultSandboxImage: "ghcr.io/acme/sandbox:1.0"})
			n := 0
			for path := range objects(t, files) {
				if err := s.validate(fileMap(files)[path]); err != nil {
					t.Errorf("%s: %v", path, err)
				}
				n++
			}
			if n == 0 {
				t.Fatal("no objects validated")
			}
		})
	}
}

// TestSchemasCatchMistakes: the validator is strict enough to matter: a
// misspelt field, a wrong type and an unknown kind each fail.
func TestSchemasCatchMistakes(t *testing.T) {
	s, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"unknown field":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndatta: {a: b}\n",
		"wrong type":         "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: two}\n",
		"unknown kind":       "apiVersion: v1\nkind: Gadget\nmetadata: {name: x}\n",
		"cert-manager field": "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: x}\nspec: {secretName: s, issuerRef: {name: i}, isCa: true}\n",
		"pod field":          "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {selector: {}, template: {spec: {containers: [{name: c, imag: x}]}}}\n",
	}
	for name, doc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := s.validate([]byte(doc)); err == nil {
				t.Errorf("validated:\n%s", doc)
			}
		})
	}
}
