// Package source owns reading keyhole's inputs: files, directory trees
// (honouring .gitignore) and standard input, each split into YAML or JSON
// documents whose nodes keep their file:line:col. It reports what it cannot
// read as diagnostics (YAMLInvalid, InputInvalid, YAMLAliasLimit,
// KindMissing) and leaves every question of meaning (unknown kinds, schema,
// references) to the compiler.
//
// The loader is defensive by construction: files are size-checked before
// they are read, bytes are checked for NULs, invalid UTF-8 and control
// characters before the YAML parser sees them, and alias expansion is
// bounded so that a "billion laughs" document costs a few kilobytes, not
// gigabytes.
package source

import (
	"cmp"
	"path"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/kustbuild"
)

// Document is one YAML (or JSON) document of an input file.
type Document struct {
	// File is the path as the user named it, slash-separated and relative
	// to the working directory when under it; "-" for standard input.
	File string
	// Index is the 0-based index of the document within its file, counting
	// empty documents too, so it matches what a reader of the file counts.
	Index int
	// Node is the document's root mapping node. It is never nil and never a
	// DocumentNode: empty documents are skipped, and documents the loader
	// reported an error for are not returned. Aliases are already resolved
	// into plain copies (which keep the anchor's positions) and merge keys
	// (<<) are applied, so callers never meet a yaml.AliasNode.
	Node *yaml.Node
	// Pos is where the document's root mapping starts.
	Pos diag.Pos

	// digest is what Options.Digest took of the document (wrapped in a
	// keptObject when the tree was released and the digest cannot answer
	// Object).
	digest any
	// from is what the document shares with the others of its file, or
	// of its kustomize build; nil for a document the loader did not read
	// (Parse's).
	from *sharedFrom
}

// sharedFrom is what every document of one file, or of one kustomize
// build, has in common. A Document is kept for every document of the
// input, so what all of a file's share is kept once, not in each.
type sharedFrom struct {
	// unit is the deploy unit (see Document.Unit).
	unit *Unit
	// walked says the documents were found by walking a directory (see
	// Document.Walked).
	walked bool
	// origin is where the file is read again from when a document's tree
	// was released (see release.go); nil when it cannot be (standard
	// input, a kustomize build, no Options.Digest).
	origin *origin
	// where places the nodes of the documents kustomize built whose
	// values were not written at their own line and column of File (see
	// Where); nil for a file read as it is.
	where map[*yaml.Node]Placed
	// lines place the nodes of the documents of a Helm template's output
	// at the template's lines (see Where); nil for a file read as it is.
	lines []TemplateLine
	// copies says a kustomization of the build copies values from one
	// object into another (replacements, vars): what the build set may
	// be what a generator read from a file (see Copied).
	copies bool
}

// Unit is the deploy unit the document belongs to (see docs/inputs.md):
// the kustomization root or engine object that built it, or the loose
// files' unit for a file read on its own. It is never nil.
func (d *Document) Unit() *Unit {
	if d.from == nil || d.from.unit == nil {
		return looseUnit
	}
	return d.from.unit
}

// Walked is true when the document was found by walking a directory
// (directly, or through a kustomization the walk found) rather than
// named: the scope rule then applies to it, and to what it declares
// (docs/inputs.md).
func (d *Document) Walked() bool { return d.from != nil && d.from.walked }

// Copied reports whether the value of node n, a node of d.Node, may be
// a copy of what a kustomize generator read from a file: the build set it
// (Where gives a note) and a kustomization of the build copies values
// between objects (replacements, vars). A message about such a value
// does not repeat it.
func (d *Document) Copied(n *yaml.Node) bool {
	p, ok := d.placedAt(n)
	return ok && p.Note != "" && d.from.copies
}

// placedAt is where Where places node n when kustomize moved it.
func (d *Document) placedAt(n *yaml.Node) (Placed, bool) {
	if d.from == nil {
		return Placed{}, false
	}
	p, ok := d.from.where[n]
	return p, ok
}

// Placed is where a node of a built document was written when that is not
// the node's own line and column in the document's File (Where).
type Placed struct {
	Pos diag.Pos
	// Note is appended to messages about the node: set when Pos is only
	// the nearest position the inputs hold, not the value itself.
	Note string
}

// Where returns where node n, a node of d.Node, was written, and a note to
// append to messages about it ("" when the position is the value's own).
//
// For a document read from a file that is File at n's line and column.
// For a document kustomize built (see docs/inputs.md), a field left as its
// source file wrote it has its exact position in that file; a field a
// patch file set has its position in the patch file; a field a
// transformer or an inline patch set has the position of the same field
// (or its nearest parent) in the source file, and a note naming the
// kustomization that changed it. For a document a Helm template wrote,
// it is the template's line that wrote n (see docs/inputs.md, "Helm
// charts").
func (d *Document) Where(n *yaml.Node) (diag.Pos, string) {
	if p, ok := d.placedAt(n); ok {
		return p.Pos, p.Note
	}
	return d.rendered(n.Line, n.Column), ""
}

// WhereColumn is Where for the character at column col of n's first
// line (a reference inside scalar n): the column is col where the
// position is n's own.
func (d *Document) WhereColumn(n *yaml.Node, col int) (diag.Pos, string) {
	if _, ok := d.placedAt(n); !ok {
		return d.rendered(n.Line, col), ""
	}
	pos, note := d.Where(n)
	if note == "" {
		pos.Column = col
	}
	return pos, note
}

// Identity is what tells d from the other documents when they are
// counted: Pos, but for a document a Helm template wrote, its place in
// the output, as a range block writes several documents from the
// template's one place. It needs d's tree (d.Node), which such a
// document keeps (it is never released: see release.go).
func (d *Document) Identity() diag.Pos {
	if d.from != nil && d.from.lines != nil && d.Node != nil {
		return diag.Pos{File: d.File, Line: max(d.Node.Line, 1), Column: max(d.Node.Column, 1)}
	}
	return d.Pos
}

// rendered is where line and column of d's own text were written: File
// at them, or the template's line for a Helm template's output.
func (d *Document) rendered(line, col int) diag.Pos {
	if d.from != nil && d.from.lines != nil {
		return templatePos(d.from.lines, d.File, line, col)
	}
	return diag.Pos{File: d.File, Line: line, Column: col}
}

// At is Where for a node known by its line, column and field path, as the
// schema validator reports them. Of several nodes at one position (a base
// and a patch file may share line numbers) the one at fieldPath wins.
func (d *Document) At(line, col int, fieldPath string) (diag.Pos, string) {
	pos, note, _ := d.AtNode(line, col, fieldPath)
	return pos, note
}

// AtNode is At, and the node it found (nil when the document is not a
// build's, or no node is there).
func (d *Document) AtNode(line, col int, fieldPath string) (diag.Pos, string, *yaml.Node) {
	if d.from == nil || len(d.from.where) == 0 || d.Node == nil {
		return d.rendered(line, col), "", nil
	}
	var first, onPath *yaml.Node
	var walk func(n *yaml.Node, p string)
	walk = func(n *yaml.Node, p string) {
		if n.Line == line && n.Column == col {
			if first == nil {
				first = n
			}
			if onPath == nil && p == fieldPath {
				onPath = n
			}
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				kp := diag.JoinKey(p, n.Content[i].Value)
				walk(n.Content[i], kp)
				walk(n.Content[i+1], kp)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, diag.JoinIndex(p, i))
			}
		}
	}
	walk(d.Node, "")
	n := cmp.Or(onPath, first)
	if n == nil {
		return diag.Pos{File: d.File, Line: line, Column: col}, "", nil
	}
	pos, note := d.Where(n)
	return pos, note, n
}

// LooseUnit is the Name of the unit of the documents read from files
// outside any kustomization: all of them, whatever path named them, are
// one deploy unit.
const LooseUnit = ""

// AgentKind is the Kind that Object reports for an agent.yaml file, which
// carries no apiVersion or kind of its own.
const AgentKind = "Agent"

// IsAgent reports whether the document is an agent file: it comes from
// an agent.yaml (or agent.yml) file, the agent platform's format, which
// has no apiVersion or kind and is identified by its file name; a
// document there that has both is an object like any other.
func (d *Document) IsAgent() bool {
	if d.File == "-" {
		return false
	}
	switch path.Base(d.File) {
	case "agent.yaml", "agent.yml":
		// An object kept in a file of that name (a Connection, or the
		// Application of an app called agent) is an object: an agent
		// has neither field.
		return stringField(d.Node, "apiVersion") == "" || stringField(d.Node, "kind") == ""
	}
	return false
}

// Object identifies the document for diagnostics: apiVersion, kind,
// metadata.namespace and metadata.name, each only when it is a string
// scalar. An agent.yaml document reports Kind "Agent" and its top-level
// name.
func (d *Document) Object() diag.Object {
	if d.Node == nil {
		return d.releasedObject()
	}
	if d.IsAgent() {
		return diag.Object{Kind: AgentKind, Name: stringField(d.Node, "name")}
	}
	o := diag.Object{
		APIVersion: stringField(d.Node, "apiVersion"),
		Kind:       stringField(d.Node, "kind"),
	}
	if md := Lookup(d.Node, "metadata"); md != nil && md.Kind == yaml.MappingNode {
		o.Namespace = stringField(md, "namespace")
		o.Name = stringField(md, "name")
	}
	return o
}

// Lookup returns the value node of key in mapping m, or nil when m is not a
// mapping or has no such key. It exists because every caller that walks
// nodes for positions needs it, and yaml.v3 offers no equivalent.
func Lookup(m *yaml.Node, key string) *yaml.Node { return kustbuild.Lookup(m, key) }

// stringField returns the value of key in m when it is a string scalar.
func stringField(m *yaml.Node, key string) string {
	v := Lookup(m, key)
	if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		return ""
	}
	return v.Value
}

// stringMap returns a mapping node's string values by key.
func stringMap(n *yaml.Node) map[string]string {
	out := map[string]string{}
	if n == nil || n.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if v := n.Content[i+1]; v.Kind == yaml.ScalarNode {
			out[n.Content[i].Value] = v.Value
		}
	}
	return out
}

// boolField reports whether key of mapping n is the boolean true.
func boolField(n *yaml.Node, key string) bool {
	v := Lookup(n, key)
	return v != nil && v.Kind == yaml.ScalarNode && v.Value == "true"
}
