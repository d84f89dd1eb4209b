package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/pipeline"
	"keyhole.dev/keyhole/render"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// maxResourceList bounds what a KRM function reads from stdin.
const maxResourceList = 64 << 20

// KRM function annotations that say where an item came from.
const (
	krmPathAnnotation         = "config.kubernetes.io/path"
	krmInternalPathAnnotation = "internal.config.kubernetes.io/path"
)

// runKRM is `keyhole render --krm`: a kustomize KRM function. It reads a
// ResourceList on stdin, checks and renders its items, and writes a
// ResourceList whose items are the rendered objects followed by the input
// items keyhole does not consume (Secrets among them, which the cluster
// still needs), and whose results are the diagnostics. On errors it
// writes the results, no items, and exits 1, so kustomize fails the build.
func runKRM(e *env, f *checkFlags, opts render.Options, renderer render.Renderer, target string) int {
	data, err := io.ReadAll(io.LimitReader(e.stdin, maxResourceList+1))
	if err != nil {
		return fail(e, "render --krm", err)
	}
	if len(data) > maxResourceList {
		return fail(e, "render --krm", fmt.Errorf("%w: the ResourceList is larger than %d MiB", errUsage, maxResourceList>>20))
	}
	docs, ds := source.Parse("-", data)
	if len(ds) > 0 || len(docs) != 1 || source.Lookup(docs[0].Node, "kind") == nil || source.Lookup(docs[0].Node, "kind").Value != "ResourceList" {
		fmt.Fprintln(e.stderr, "keyhole render --krm: standard input is not one ResourceList (config.kubernetes.io/v1)")
		for _, d := range ds {
			fmt.Fprintln(e.stderr, d)
		}
		return exitUsage
	}
	var inputs []*source.Document
	var passthrough []*yaml.Node
	if items := source.Lookup(docs[0].Node, "items"); items != nil {
		if items.Kind != yaml.SequenceNode {
			fmt.Fprintln(e.stderr, "keyhole render --krm: the ResourceList's items is not a list")
			return exitUsage
		}
		for i, it := range items.Content {
			if it.Kind != yaml.MappingNode {
				continue
			}
			doc := &source.Document{File: itemPath(it, i), Index: i, Node: it, Pos: diag.Pos{File: "-", Line: it.Line, Column: it.Column}}
			inputs = append(inputs, doc)
			if !consumed(doc, target) {
				passthrough = append(passthrough, it)
			}
		}
	}
	c, err := pipeline.Compile(inputs, nil, f.options(e, nil), nil)
	if err != nil {
		return fail(e, "render --krm", err)
	}
	out := resourceList{APIVersion: "config.kubernetes.io/v1", Kind: "ResourceList", Items: []*yaml.Node{}}
	// The same unit render as render's other outputs: the target's rules
	// and diagnostics, a unit without sandboxes left out.
	units, rerr := pipeline.Render(&c, opts, renderer, "")
	for _, d := range c.Result.Diagnostics {
		if d.Suppressed == "" {
			out.Results = append(out.Results, krmResult(d))
		}
	}
	code := exitOK
	if c.Result.Diagnostics.HasErrors() {
		code = exitFailed
	} else {
		if rerr != nil {
			return fail(e, "render --krm", rerr)
		}
		objs, err := pipeline.Stream(units)
		if err != nil {
			return fail(e, "render --krm", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(objs))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fail(e, "render --krm", fmt.Errorf("reading back the rendered stream: %w", err))
			}
			out.Items = append(out.Items, n.Content[0])
		}
		out.Items = append(out.Items, passthrough...)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return fail(e, "render --krm", err)
	}
	if err := enc.Close(); err != nil {
		return fail(e, "render --krm", err)
	}
	if _, err := e.raw().Write(b.Bytes()); err != nil {
		return fail(e, "render --krm", err)
	}
	return code
}

// consumed reports whether keyhole's render replaces the item: its own
// input kinds, and, for the agent-sandbox target, agent-sandbox's.
// Everything else, Secrets included, passes through.
func consumed(d *source.Document, target string) bool {
	o := d.Object()
	if o.APIVersion == compiler.ConfigAPIVersion && o.Kind == compiler.ConfigKind {
		return true
	}
	if _, ok := schema.LookupAgentSandbox(o.APIVersion, o.Kind); ok {
		// The agent-sandbox target emits them, the template written into.
		return target == render.TargetAgentSandbox
	}
	k, ok := schema.Lookup(o.APIVersion, o.Kind)
	return ok && k != schema.KindSecret
}

func itemPath(n *yaml.Node, i int) string {
	ann := source.Lookup(source.Lookup(n, "metadata"), "annotations")
	for _, k := range []string{krmPathAnnotation, krmInternalPathAnnotation} {
		if v := source.Lookup(ann, k); v != nil && v.Kind == yaml.ScalarNode && v.Value != "" {
			return v.Value
		}
	}
	return "items[" + strconv.Itoa(i) + "]"
}

type resourceList struct {
	APIVersion string       `yaml:"apiVersion"`
	Kind       string       `yaml:"kind"`
	Items      []*yaml.Node `yaml:"items"`
	Results    []result     `yaml:"results,omitempty"`
}

// result is a KRM function result (kustomize's framework.Result).
type result struct {
	Message     string            `yaml:"message"`
	Severity    string            `yaml:"severity"`
	ResourceRef *resourceRef      `yaml:"resourceRef,omitempty"`
	Field       *field            `yaml:"field,omitempty"`
	File        *file             `yaml:"file,omitempty"`
	Tags        map[string]string `yaml:"tags,omitempty"`
}

type resourceRef struct {
	APIVersion string `yaml:"apiVersion,omitempty"`
	Kind       string `yaml:"kind,omitempty"`
	Name       string `yaml:"name,omitempty"`
	Namespace  string `yaml:"namespace,omitempty"`
}

type field struct {
	Path string `yaml:"path"`
}

type file struct {
	Path string `yaml:"path"`
}

func krmResult(d diag.Diagnostic) result {
	r := result{Message: d.Code + ": " + d.Message, Severity: d.Severity.String(), Tags: map[string]string{"code": d.Code}}
	if d.Object.Kind != "" {
		r.ResourceRef = &resourceRef{APIVersion: d.Object.APIVersion, Kind: d.Object.Kind, Name: d.Object.Name, Namespace: d.Object.Namespace}
	}
	if d.Path != "" {
		r.Field = &field{Path: d.Path}
	}
	if d.Pos.File != "" {
		r.File = &file{Path: d.Pos.File}
	}
	return r
}
