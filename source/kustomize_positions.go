package source

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/resource"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/kustbuild"
)

// Mapping the objects kustomize built back to the input: each built node
// to the line and column of the file, patch or generator that wrote it.

// build is the state of one kustomize build's mapping back to files.
type build struct {
	l     *loader
	named string // the directory built, as the user named it
	root  string // the directory built, absolute
	kfile string // its kustomization file, absolute
	kname string // its kustomization file, as displayed
	files map[string]*parsedFile
	kusts map[string]*kustPatches
	// from is what every document the build makes shares: its unit, and
	// where kustomize moved their nodes from.
	from *sharedFrom
}

// parsedFile is a source file parsed with the loader's own parser.
type parsedFile struct {
	name string
	docs []Document
	// byName and byKind index docs for bestMatch, built on first use.
	byName map[[2]string][]int // kind and name → indices
	byKind map[string][]int
	names  []string // metadata.name of each doc
}

// kustPatches holds what a kustomization file patches from files, for
// finding where a patched value was written.
type kustPatches struct {
	candidates []patchNode
}

// patchNode is a node of a patch file and the field path it stands at in
// the patched object: the root of a strategic-merge patch, or the value of
// a JSON 6902 add or replace operation.
type patchNode struct {
	at   []string
	node *yaml.Node
	file string
	// kind and name select the objects the patch applies to; empty means
	// any.
	kind, name string
}

// source parses (once) the file at abs with the loader's parser, reporting
// its diagnostics as reading it directly would.
func (b *build) source(abs string) *parsedFile {
	if f, ok := b.files[abs]; ok {
		return f
	}
	f := &parsedFile{name: b.display(abs)}
	b.files[abs] = f
	data, err := b.l.fsys.ReadFile(abs)
	if err != nil || int64(len(data)) > b.l.opts.MaxFileSize {
		return f
	}
	docs, ds := parse(f.name, data, false, nil)
	f.docs = docs
	b.l.diags = append(b.l.diags, ds...)
	return f
}

// document turns one built resource into a Document.
func (b *build) document(r *resource.Resource) (Document, error) {
	origin, err := r.GetOrigin()
	if err != nil {
		return Document{}, fmt.Errorf("reading its origin: %w", err)
	}
	node := kustbuild.BuiltNode(r)
	if node == nil {
		return Document{}, errors.New("not a mapping")
	}
	transformedIn := b.transformedIn(node)
	kustbuild.StripBuildMetadata(node)
	doc := Document{Node: node, from: b.from}

	switch {
	case origin != nil && origin.Repo != "":
		doc.File = origin.Repo + "//" + origin.Path
		note := fmt.Sprintf(kustomizeNoteRemoteBy, doc.File)
		b.placeAll(&doc, node, diag.Pos{File: doc.File}, note)
	case origin != nil && origin.Path != "":
		abs := filepath.Join(b.root, filepath.FromSlash(origin.Path))
		f := b.source(abs)
		doc.File = f.name
		src := f.bestMatch(node)
		if src == nil {
			note := fmt.Sprintf(kustomizeNoteSetBy, b.noteFiles(transformedIn))
			b.placeAll(&doc, node, diag.Pos{File: f.name, Line: 1, Column: 1}, note)
			break
		}
		doc.Index, doc.Pos = src.Index, src.Pos
		m := mapper{b: b, doc: &doc, note: fmt.Sprintf(kustomizeNoteSetBy, b.noteFiles(transformedIn)),
			patches: b.patchesFor(transformedIn, node, src.Node)}
		m.walk(node, src.Node, src.Node, nil)
	default:
		// A generated object (secretGenerator, configMapGenerator): it is
		// written nowhere but in the kustomization that generates it.
		kfile, kabs := b.kname, b.kfile
		if origin != nil && origin.ConfiguredIn != "" {
			kabs = filepath.Join(b.root, filepath.FromSlash(origin.ConfiguredIn))
			kfile = b.display(kabs)
		}
		doc.File = kfile
		pos := diag.Pos{File: kfile, Line: 1, Column: 1}
		if kn := kustomizationNode(b.l.fsys, kabs); kn != nil {
			if g := generatorEntry(kn, stringField(Lookup(node, "metadata"), "name")); g != nil {
				pos.Line, pos.Column = g.Line, g.Column
			}
		}
		doc.Pos = pos
		b.placeAll(&doc, node, pos, fmt.Sprintf(kustomizeNoteGenBy, kfile))
	}
	if doc.Pos.File == "" {
		doc.Pos = diag.Pos{File: doc.File, Line: node.Line, Column: node.Column}
	}
	return doc, nil
}

// placeAll places every node of n at pos with note.
func (b *build) placeAll(doc *Document, n *yaml.Node, pos diag.Pos, note string) {
	n.Line, n.Column = pos.Line, pos.Column
	doc.from.where[n] = placed{pos: pos, note: note}
	for _, c := range n.Content {
		b.placeAll(doc, c, pos, note)
	}
}

// generatorEntry finds the generator entry of a kustomization whose name
// the generated object's name starts with (kustomize adds a hash suffix,
// and a prefix, to it).
func generatorEntry(k *yaml.Node, built string) *yaml.Node {
	var best *yaml.Node
	bestLen := 0
	for _, field := range []string{"secretGenerator", "configMapGenerator"} {
		seq := Lookup(k, field)
		if seq == nil || seq.Kind != yaml.SequenceNode {
			continue
		}
		for _, e := range seq.Content {
			name := stringField(e, "name")
			if name != "" && strings.Contains(built, name) && len(name) > bestLen {
				best, bestLen = e, len(name)
			}
		}
	}
	return best
}

// transformedIn returns the kustomization files (absolute) that
// configured transformers run on the object, from its transformations
// annotation, in order and without repeats.
func (b *build) transformedIn(n *yaml.Node) []string {
	v := Lookup(Lookup(Lookup(n, "metadata"), "annotations"), kustbuild.TransformationsAnnotation)
	if v == nil || v.Kind != yaml.ScalarNode {
		return nil
	}
	var ts resource.Transformations
	if err := yaml.Unmarshal([]byte(v.Value), &ts); err != nil {
		return nil
	}
	var out []string
	for _, t := range ts {
		if t == nil || t.ConfiguredIn == "" || t.Repo != "" {
			continue
		}
		p := filepath.Join(b.root, filepath.FromSlash(t.ConfiguredIn))
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// noteFiles names the kustomization files that may have set a value: the
// ones that configured transformers for the object, or the root one.
func (b *build) noteFiles(kfiles []string) string {
	if len(kfiles) == 0 {
		return b.kname
	}
	names := make([]string, len(kfiles))
	for i, k := range kfiles {
		names[i] = b.display(k)
	}
	if len(names) == 1 {
		return names[0]
	}
	return "one of " + strings.Join(names, ", ")
}

// patchesFor returns the patch nodes that may apply to the built object
// whose source document is src: those of the patch files the given
// kustomizations name, selected by kind and by the name the object has in
// its source or as built.
func (b *build) patchesFor(kfiles []string, built, src *yaml.Node) []patchNode {
	if len(kfiles) == 0 {
		kfiles = []string{b.kfile}
	}
	kind := stringField(built, "kind")
	names := []string{stringField(Lookup(built, "metadata"), "name"), stringField(Lookup(src, "metadata"), "name")}
	var out []patchNode
	for _, k := range kfiles {
		for _, c := range b.patchesOf(k).candidates {
			if c.kind != "" && c.kind != kind {
				continue
			}
			if c.name != "" && !slices.Contains(names, c.name) {
				continue
			}
			out = append(out, c)
		}
	}
	return out
}

// patchesOf reads (once) the patch files that the kustomization file kfile
// names: patches[].path, patchesStrategicMerge[] and
// patchesJson6902[].path. Inline patches are not files and have no
// positions of their own; values they set get a note instead.
func (b *build) patchesOf(kfile string) *kustPatches {
	if kp, ok := b.kusts[kfile]; ok {
		return kp
	}
	kp := &kustPatches{}
	b.kusts[kfile] = kp
	k := kustomizationNode(b.l.fsys, kfile)
	if k == nil {
		return kp
	}
	dir := filepath.Dir(kfile)
	add := func(file string, target *yaml.Node) {
		if file == "" || strings.Contains(file, "\n") {
			return
		}
		tkind := stringField(target, "kind")
		tname := stringField(target, "name")
		abs := filepath.Join(dir, filepath.FromSlash(file))
		name := b.display(abs)
		data, err := b.l.fsys.ReadFile(abs)
		if err != nil || int64(len(data)) > b.l.opts.MaxFileSize {
			return
		}
		data = sniffText(data)
		var top yaml.Node
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for decode(dec, &top) == nil {
			root := &top
			if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
				root = root.Content[0]
			}
			switch root.Kind {
			case yaml.MappingNode:
				// A strategic-merge patch: shaped like the object it patches.
				kind, pname := cmp.Or(tkind, stringField(root, "kind")), cmp.Or(tname, stringField(Lookup(root, "metadata"), "name"))
				kp.candidates = append(kp.candidates, patchNode{node: root, file: name, kind: kind, name: pname})
			case yaml.SequenceNode:
				// JSON 6902 operations: add and replace write a value at a path.
				for _, op := range root.Content {
					switch stringField(op, "op") {
					case "add", "replace":
					default:
						continue
					}
					v := Lookup(op, "value")
					at, ok := pointer(stringField(op, "path"))
					if v == nil || !ok {
						continue
					}
					kp.candidates = append(kp.candidates, patchNode{at: at, node: v, file: name, kind: tkind, name: tname})
				}
			}
			top = yaml.Node{}
		}
	}
	if seq := Lookup(k, "patches"); seq != nil && seq.Kind == yaml.SequenceNode {
		for _, e := range seq.Content {
			add(stringField(e, "path"), Lookup(e, "target"))
		}
	}
	if seq := Lookup(k, "patchesStrategicMerge"); seq != nil && seq.Kind == yaml.SequenceNode {
		for _, e := range seq.Content {
			if e.Kind == yaml.ScalarNode {
				add(e.Value, nil)
			}
		}
	}
	if seq := Lookup(k, "patchesJson6902"); seq != nil && seq.Kind == yaml.SequenceNode {
		for _, e := range seq.Content {
			add(stringField(e, "path"), Lookup(e, "target"))
		}
	}
	return kp
}

// pointer splits a JSON pointer (RFC 6901) into field path elements. The
// append index "-" has no fixed position and is refused.
func pointer(p string) ([]string, bool) {
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		if s == "-" {
			return nil, false
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts, true
}

// bestMatch picks the document of a source file that a built object came
// from: kustomize's origin names the file but not the document. Among the
// candidates, the one that shares the most field values with the built
// object wins, the earliest on a tie. The candidates are the documents of
// the same kind and name; else those whose name the built name contains
// (a namePrefix or nameSuffix); else every document of the same kind.
// Narrowing by name first keeps a file of thousands of documents from
// costing thousands of tree comparisons per built object.
func (f *parsedFile) bestMatch(built *yaml.Node) *Document {
	if f.byKind == nil {
		f.byName, f.byKind = map[[2]string][]int{}, map[string][]int{}
		f.names = make([]string, len(f.docs))
		for i := range f.docs {
			kind := stringField(f.docs[i].Node, "kind")
			f.names[i] = stringField(Lookup(f.docs[i].Node, "metadata"), "name")
			f.byName[[2]string{kind, f.names[i]}] = append(f.byName[[2]string{kind, f.names[i]}], i)
			f.byKind[kind] = append(f.byKind[kind], i)
		}
	}
	kind := stringField(built, "kind")
	name := stringField(Lookup(built, "metadata"), "name")
	if idx := f.byName[[2]string{kind, name}]; len(idx) > 0 && name != "" {
		return f.best(built, idx)
	}
	var within []int
	for _, i := range f.byKind[kind] {
		if n := f.names[i]; n != "" && strings.Contains(name, n) {
			within = append(within, i)
		}
	}
	if len(within) > 0 {
		// On a tie the longest name wins: prod-cm-12 came from cm-12,
		// not cm-1.
		slices.SortStableFunc(within, func(a, b int) int { return len(f.names[b]) - len(f.names[a]) })
		return f.best(built, within)
	}
	return f.best(built, f.byKind[kind])
}

// best returns the document among idx sharing the most field values with
// built, the first in idx on a tie; nil when idx is empty.
func (f *parsedFile) best(built *yaml.Node, idx []int) *Document {
	var best *Document
	bestScore := -1
	for _, i := range idx {
		if s := shared(built, f.docs[i].Node); s > bestScore {
			best, bestScore = &f.docs[i], s
		}
	}
	return best
}

// shared counts the scalars of a that b holds at the same path with the
// same value.
func shared(a, b *yaml.Node) int {
	if a == nil || b == nil || a.Kind != b.Kind {
		return 0
	}
	switch a.Kind {
	case yaml.ScalarNode:
		if a.Value == b.Value {
			return 1
		}
	case yaml.MappingNode:
		n := 0
		for i := 0; i+1 < len(a.Content); i += 2 {
			n += shared(a.Content[i+1], Lookup(b, a.Content[i].Value))
		}
		return n
	case yaml.SequenceNode:
		n := 0
		for i, c := range a.Content {
			if i < len(b.Content) {
				n += shared(c, b.Content[i])
			}
		}
		return n
	}
	return 0
}

// mapper gives each node of a built object the position of the same field
// in its source document, or in a patch file, or a note.
type mapper struct {
	b       *build
	doc     *Document
	note    string
	patches []patchNode
}

// walk maps built node n, whose counterpart in the source is src (nil when
// the source has no such field). near is the nearest source node on the
// path, where a value no file holds is placed.
func (m *mapper) walk(n, src, near *yaml.Node, at []string) {
	if src != nil && src.Kind == n.Kind && (n.Kind != yaml.ScalarNode || src.Value == n.Value) {
		n.Line, n.Column, n.Style = src.Line, src.Column, src.Style
		near = src
	} else {
		if src != nil {
			near = src // the field is in the source, with another value
		}
		src = nil
		m.changed(n, near, at, false)
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			var sk, sv *yaml.Node
			if src != nil {
				sv, sk = lookupKey(src, k.Value)
			}
			kat := append(slices.Clip(at), k.Value)
			if sk != nil {
				k.Line, k.Column, k.Style = sk.Line, sk.Column, sk.Style
			} else {
				m.changed(k, near, kat, true)
			}
			m.walk(v, sv, near, kat)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			var sc *yaml.Node
			if src != nil && i < len(src.Content) {
				sc = src.Content[i]
			}
			m.walk(c, sc, near, append(slices.Clip(at), strconv.Itoa(i)))
		}
	}
}

// changed places a node whose value kustomize set (or a mapping key it
// added, when key is true): at the patch file node that wrote it when
// there is one, else at the nearest source node, with the note.
func (m *mapper) changed(n, near *yaml.Node, at []string, key bool) {
	for i := len(m.patches) - 1; i >= 0; i-- {
		p := m.patches[i]
		if pn := p.find(at, n, key); pn != nil {
			n.Line, n.Column, n.Style = pn.Line, pn.Column, pn.Style
			m.doc.from.where[n] = placed{pos: diag.Pos{File: p.file, Line: pn.Line, Column: pn.Column}}
			return
		}
	}
	n.Line, n.Column = near.Line, near.Column
	note := m.note
	if u := m.doc.from.unit; u != nil && u.Flux != nil && near.Kind == yaml.ScalarNode && strings.Contains(near.Value, "${") {
		// The source held a variable: Flux's post-build substitution
		// wrote the value, not a kustomization.
		note = fmt.Sprintf(" (value substituted by Flux Kustomization %s's postBuild, %s)", strings.TrimPrefix(u.Name, "flux:"), u.Decl)
	}
	m.doc.from.where[n] = placed{pos: diag.Pos{File: m.doc.File, Line: near.Line, Column: near.Column}, note: note}
}

// find returns the patch's node at field path at when it wrote what the
// built node n holds: the same scalar value, or a collection of the same
// kind; for a mapping key (key true), the key node. Otherwise nil.
func (p patchNode) find(at []string, n *yaml.Node, key bool) *yaml.Node {
	if len(at) < len(p.at) || !slices.Equal(at[:len(p.at)], p.at) {
		return nil
	}
	cur := p.node
	var k *yaml.Node
	for _, e := range at[len(p.at):] {
		switch cur.Kind {
		case yaml.MappingNode:
			cur, k = lookupKey(cur, e)
		case yaml.SequenceNode:
			i, err := strconv.Atoi(e)
			if err != nil || i < 0 || i >= len(cur.Content) {
				return nil
			}
			cur, k = cur.Content[i], nil
		default:
			return nil
		}
		if cur == nil {
			return nil
		}
	}
	switch {
	case key:
		return k
	case cur.Kind != n.Kind:
		return nil
	case cur.Kind == yaml.ScalarNode && cur.Value != n.Value:
		return nil
	}
	return cur
}

// lookupKey is Lookup returning the key node too.
func lookupKey(m *yaml.Node, key string) (value, k *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].Value == key {
			return m.Content[i+1], m.Content[i]
		}
	}
	return nil, nil
}
