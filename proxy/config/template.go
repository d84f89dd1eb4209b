package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"text/template/parse"
)

// Template is a parsed header value template: literal text and
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
// literal text and references to Secret keys are accepted: {{ .key }}, or
// {{ index . "key" }} for a key that is not a Go identifier (tls.crt,
// my-token, 1st), as Go templates spell a map lookup. No other functions,
// pipelines, variables, conditionals, loops or nested fields. A key must
// be one the API server accepts (CheckSecretKey). Errors wrap ErrTemplate
// and never quote more of the template than the offending action.
func ParseTemplate(s string) (*Template, error) {
	if t, ok := parsed.Load(s); ok {
		return t.(*Template), nil
	}
	t, err := parseTemplate(s)
	if err == nil && parsedCount.Add(1) <= maxParsed {
		parsed.Store(s, t)
	}
	return t, err
}

// parsed remembers the templates that parsed, by their text: the same few
// values ("Bearer {{ .token }}") recur in every Connection, and a render
// reads each again for every sandbox that uses it, and then once more to
// check the proxy config it wrote. A Template is never modified once
// parsed, so one serves every caller. At most maxParsed are kept, so a
// proxy reloading configs over months keeps a bounded set.
var (
	parsed      sync.Map
	parsedCount atomic.Int64
)

const maxParsed = 4096

func parseTemplate(s string) (*Template, error) {
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
		return nil, fmt.Errorf("%w: %s%s", ErrTemplate, msg, indexHint(s))
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
			key, offset, err := keyRef(n)
			if err != nil {
				return nil, err
			}
			if err := CheckSecretKey(key); err != nil {
				return nil, fmt.Errorf("%w: %s reads a key Kubernetes cannot hold: %s", ErrTemplate, n, strings.TrimPrefix(err.Error(), ErrName.Error()+": "))
			}
			t.parts = append(t.parts, part{key: key, offset: offset})
		case *parse.CommentNode:
			// Comments render as nothing.
		default:
			return nil, fmt.Errorf("%w: %s is not allowed; use only {{ .key }} references", ErrTemplate, describe(n))
		}
	}
	return t, nil
}

// keyRef reads the key of one action, {{ .key }} or {{ index . "key" }},
// and the byte offset in the template of where it names the key.
func keyRef(n *parse.ActionNode) (string, int, error) {
	p := n.Pipe
	switch {
	case p == nil:
		return "", 0, fmt.Errorf("%w: %s is not a key reference; use {{ .key }}", ErrTemplate, n)
	case len(p.Decl) > 0:
		return "", 0, fmt.Errorf("%w: %s declares a variable; use only {{ .key }} references", ErrTemplate, n)
	case len(p.Cmds) != 1:
		return "", 0, fmt.Errorf("%w: %s is a pipeline; use only {{ .key }} references", ErrTemplate, n)
	}
	args := p.Cmds[0].Args
	if len(args) > 0 {
		if id, ok := args[0].(*parse.IdentifierNode); ok {
			if id.Ident == "index" {
				return indexKey(n, args)
			}
			return "", 0, fmt.Errorf("%w: %s calls the function %q; use only {{ .key }} references", ErrTemplate, n, id.Ident)
		}
	}
	if len(args) != 1 {
		return "", 0, fmt.Errorf("%w: %s is not a plain key reference; use {{ .key }}", ErrTemplate, n)
	}
	f, ok := args[0].(*parse.FieldNode)
	if !ok {
		return "", 0, fmt.Errorf("%w: %s is not a plain key reference; use {{ .key }}", ErrTemplate, n)
	}
	if len(f.Ident) != 1 {
		dotted := strings.Join(f.Ident, ".")
		return "", 0, fmt.Errorf("%w: %s reads the key %q and then its field %q, and a Secret's values have no fields; to read the key %q, write {{ index . %q }}",
			ErrTemplate, n, f.Ident[0], strings.Join(f.Ident[1:], "."), dotted, dotted)
	}
	return f.Ident[0], int(n.Pos), nil
}

// indexKey reads {{ index . "key" }}: the one lookup of a key that is not
// a Go identifier.
func indexKey(n *parse.ActionNode, args []parse.Node) (string, int, error) {
	if len(args) != 3 {
		return "", 0, fmt.Errorf("%w: %s is not a key reference; a key is read with {{ index . \"key\" }}, one key", ErrTemplate, n)
	}
	if _, ok := args[1].(*parse.DotNode); !ok {
		return "", 0, fmt.Errorf("%w: %s does not read a key of the Secret; write {{ index . \"key\" }}", ErrTemplate, n)
	}
	key, ok := args[2].(*parse.StringNode)
	if !ok {
		return "", 0, fmt.Errorf("%w: %s does not name the key as a quoted string; write {{ index . \"key\" }}", ErrTemplate, n)
	}
	return key.Text, int(key.Pos), nil
}

// bareKey is an action that reads a dotted or hyphenated key as if it
// were a field, such as {{ .my-token }}, which Go templates cannot parse.
var bareKey = regexp.MustCompile(`\{\{-?\s*\.([-._a-zA-Z0-9]+)\s*-?\}\}`)

// indexHint explains how to read a key that is not a Go identifier when
// the template tried to read one with {{ .key }}.
func indexHint(s string) string {
	for _, m := range bareKey.FindAllStringSubmatch(s, -1) {
		if !isIdentifier(m[1]) {
			return fmt.Sprintf("; a key that is not a Go identifier is read with {{ index . %q }}", m[1])
		}
	}
	return ""
}

func isIdentifier(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
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

// LiteralBreak reports whether the template's literal text (outside its
// key references) holds a line break or a NUL, which no header value may
// hold: the loader refuses such a value, and check reports it.
func (t *Template) LiteralBreak() bool {
	for _, p := range t.parts {
		if p.key == "" && strings.ContainsAny(p.text, "\r\n\x00") {
			return true
		}
	}
	return false
}

// StrayBrace reports whether a key reference is closed with one brace
// too many ("{{ .token }}}"): Go's template parser reads the extra brace
// as literal text, so the proxy would send it with the credential, and
// the upstream refuse the value. (One too many when opening, "{{{", is a
// parse error already.) A value that means the brace (JSON in a header,
// {"key": {{ .token }}}) has it too, so check warns rather than refuses.
func (t *Template) StrayBrace() bool {
	for i, p := range t.parts {
		if p.key != "" && i+1 < len(t.parts) && t.parts[i+1].key == "" && strings.HasPrefix(t.parts[i+1].text, "}") {
			return true
		}
	}
	return false
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
