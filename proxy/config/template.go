package config

import (
	"errors"
	"fmt"
	"strings"
	"text/template/parse"
)

// Template is a parsed header value template: literal text and plain
// references to Secret keys, nothing else. The compiler checks templates
// with it and the proxy renders them with it, so both agree on what a
// template means.
type Template struct {
	parts []part
}

type part struct {
	text string // literal text, when key == ""
	key  string
	// offset is the byte offset in the template of the reference (.key).
	offset int
}

// ErrTemplate is wrapped by every template parse error.
var ErrTemplate = errors.New("invalid template")

// ParseTemplate parses a header value such as "Bearer {{ .token }}". Only
// literal text and {{ .key }} references are accepted: no functions,
// pipelines, variables, conditionals, loops or nested fields. Errors wrap
// ErrTemplate and never quote more of the template than the offending
// action.
func ParseTemplate(s string) (*Template, error) {
	tree := parse.New("value")
	// Functions are rejected below with a message naming them, rather than
	// by the parser as undefined.
	tree.Mode = parse.SkipFuncCheck
	trees := map[string]*parse.Tree{}
	if _, err := tree.Parse(s, "{{", "}}", trees); err != nil {
		msg := err.Error()
		// text/template prefixes "template: value:LINE: "; keep the reason.
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		return nil, fmt.Errorf("%w: %s", ErrTemplate, msg)
	}
	t := &Template{}
	if len(trees) != 1 || trees["value"] != tree {
		return nil, fmt.Errorf("%w: {{ define }} and {{ block }} are not allowed", ErrTemplate)
	}
	if tree.Root == nil {
		return t, nil
	}
	for _, n := range tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			t.parts = append(t.parts, part{text: string(n.Text)})
		case *parse.ActionNode:
			key, err := plainKey(n)
			if err != nil {
				return nil, err
			}
			t.parts = append(t.parts, part{key: key, offset: int(n.Pos)})
		case *parse.CommentNode:
			// Comments render as nothing.
		default:
			return nil, fmt.Errorf("%w: %s is not allowed; use only {{ .key }} references", ErrTemplate, describe(n))
		}
	}
	return t, nil
}

func plainKey(n *parse.ActionNode) (string, error) {
	p := n.Pipe
	if p != nil && len(p.Cmds) > 0 && len(p.Cmds[0].Args) > 0 {
		if id, ok := p.Cmds[0].Args[0].(*parse.IdentifierNode); ok {
			return "", fmt.Errorf("%w: %s calls the function %q; use only {{ .key }} references", ErrTemplate, n, id.Ident)
		}
	}
	switch {
	case p == nil:
		return "", fmt.Errorf("%w: %s is not a key reference; use {{ .key }}", ErrTemplate, n)
	case len(p.Decl) > 0:
		return "", fmt.Errorf("%w: %s declares a variable; use only {{ .key }} references", ErrTemplate, n)
	case len(p.Cmds) != 1:
		return "", fmt.Errorf("%w: %s is a pipeline; use only {{ .key }} references", ErrTemplate, n)
	case len(p.Cmds[0].Args) != 1:
		return "", fmt.Errorf("%w: %s is not a plain key reference; use {{ .key }}", ErrTemplate, n)
	}
	f, ok := p.Cmds[0].Args[0].(*parse.FieldNode)
	if !ok {
		return "", fmt.Errorf("%w: %s is not a plain key reference; use {{ .key }}", ErrTemplate, n)
	}
	if len(f.Ident) != 1 {
		return "", fmt.Errorf("%w: %s reads a nested field; a Secret's keys are flat, use {{ .key }}", ErrTemplate, n)
	}
	return f.Ident[0], nil
}

func describe(n parse.Node) string {
	switch n.Type() {
	case parse.NodeIf:
		return "a conditional ({{ if }})"
	case parse.NodeRange:
		return "a loop ({{ range }})"
	case parse.NodeWith:
		return "{{ with }}"
	case parse.NodeTemplate:
		return "{{ template }}"
	case parse.NodeBreak, parse.NodeContinue:
		return "{{ break }}/{{ continue }}"
	}
	return fmt.Sprintf("the action %s", n)
}

// Keys returns the keys the template reads, in order of first use.
func (t *Template) Keys() []string {
	var keys []string
	seen := map[string]bool{}
	for _, p := range t.parts {
		if p.key != "" && !seen[p.key] {
			seen[p.key] = true
			keys = append(keys, p.key)
		}
	}
	return keys
}

// KeyRef is one reference to a key, and the byte offset of the .key in
// the template, for diagnostics that point at it.
type KeyRef struct {
	Key    string
	Offset int
}

// Refs returns every key reference in order, repeats included.
func (t *Template) Refs() []KeyRef {
	var refs []KeyRef
	for _, p := range t.parts {
		if p.key != "" {
			refs = append(refs, KeyRef{Key: p.key, Offset: p.offset})
		}
	}
	return refs
}

// Render writes the template with each key replaced by lookup(key). It
// stops at the first key lookup cannot supply and returns its error.
func (t *Template) Render(lookup func(key string) (string, error)) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.key == "" {
			b.WriteString(p.text)
			continue
		}
		v, err := lookup(p.key)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
	}
	return b.String(), nil
}
