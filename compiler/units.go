package compiler

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// Deploy units (docs/inputs.md): each kustomization root, and the files
// outside any kustomization, is what a cluster applies as one. An object
// defined twice in one unit is an error, since the cluster keeps one and
// silently loses the other; the same object in two units is normal (two
// overlays of one base).

const codeDuplicateObject = "DuplicateObject"

// duplicate reports, and returns true for, an object of keyhole's kinds
// that its deploy unit already defines; the first definition is kept.
// Secrets are indexSecret's.
func (p *pass) duplicate(kind schema.Kind, it *item, dg *digested) bool {
	k, ok := objectKeyOf(kind, it, dg)
	if !ok {
		return false
	}
	prev := p.defined.add(k, it.doc, p.objectKeyOfDoc)
	if prev == nil {
		return false
	}
	what, at := string(kind)+" "+it.ref().String(), path{"metadata", "name"}
	if kind == schema.KindAgent {
		what, at = "agent "+k.name, path{"name"}
	}
	p.report(codeDuplicateObject, it, at, false, "%s", p.duplicateMessage(what, prev, it))
	return true
}

// objectKey is what tells apart the objects duplicate compares: kind,
// namespace and name, and for an agent its name alone. Two keys are the
// same object when their String is.
type objectKey struct {
	kind     schema.Kind
	ns, name string
}

// String is the key written out: kind, namespace and name, joined by
// slashes.
func (k objectKey) String() string {
	return string(k.kind) + "/" + ref{k.ns, k.name}.String()
}

// sum hashes what String writes, without writing it.
func (k objectKey) sum(seed maphash.Seed) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(string(k.kind))
	h.WriteByte('/')
	if k.ns != "" {
		h.WriteString(k.ns)
		h.WriteByte('/')
	}
	h.WriteString(k.name)
	return h.Sum64()
}

// objectKeyOf is the key of it, an object of kind whose digest is dg; ok
// is false for a kind duplicate does not compare, or an agent without a
// name (the schema says what is wrong).
func objectKeyOf(kind schema.Kind, it *item, dg *digested) (k objectKey, ok bool) {
	switch {
	case slices.Contains(groupKinds(), kind), isAgentSandboxKind(kind):
		return objectKey{kind, it.ns, it.obj().Name}, true
	case kind == schema.KindAgent:
		name := ""
		if dg.more != nil {
			name = dg.more.agentName
		}
		return objectKey{kind: kind, name: name}, name != ""
	}
	return objectKey{}, false
}

// objectKeyOfDoc is the key duplicate gave doc, read again from it as
// add read it.
func (p *pass) objectKeyOfDoc(doc *source.Document) objectKey {
	obj := doc.Object()
	it := item{doc: doc, ns: cmp.Or(obj.Namespace, p.opts.DefaultNamespace)}
	kind, ok := schema.Lookup(obj.APIVersion, obj.Kind)
	if !ok {
		kind, _ = schema.LookupAgentSandbox(obj.APIVersion, obj.Kind)
	}
	k, _ := objectKeyOf(kind, &it, p.digests.of(doc))
	return k
}

// definedIndex holds the objects of keyhole's kinds one deploy unit
// defines, by their objectKey, for DuplicateObject. It keeps a word per
// object, a hash of its key, where a map of the keys written out kept a
// string of 30 to 60 bytes besides: at a hundred thousand objects, 6 MB.
// A key whose hash another already holds is told apart by reading the
// other's key again from its document, and kept whole.
type definedIndex struct {
	hash   func(objectKey) uint64
	byHash map[uint64]*source.Document
	// byKey holds the objects whose key's hash another key held first.
	byKey map[string]*source.Document
}

// newDefinedIndex returns an empty index keyed by hash, or by a seeded
// maphash when hash is nil.
func newDefinedIndex(hash func(objectKey) uint64) definedIndex {
	if hash == nil {
		seed := maphash.MakeSeed()
		hash = func(k objectKey) uint64 { return k.sum(seed) }
	}
	return definedIndex{hash: hash, byHash: map[uint64]*source.Document{}}
}

// add returns the document that already defines k, else records doc as
// defining it and returns nil. keyOf reads a recorded document's key
// again.
func (ix *definedIndex) add(k objectKey, doc *source.Document, keyOf func(*source.Document) objectKey) *source.Document {
	h := ix.hash(k)
	prev, ok := ix.byHash[h]
	if !ok {
		ix.byHash[h] = doc
		return nil
	}
	key := k.String()
	if keyOf(prev).String() == key {
		return prev
	}
	if prev := ix.byKey[key]; prev != nil {
		return prev
	}
	if ix.byKey == nil {
		ix.byKey = map[string]*source.Document{}
	}
	ix.byKey[key] = doc
	return nil
}

// duplicateMessage says what is defined twice, where, and how the two
// differ.
func (p *pass) duplicateMessage(what string, prevDoc *source.Document, it *item) string {
	differ := "; the two are identical"
	prev := &item{doc: prevDoc}
	a, _ := prev.tree()
	b, _ := it.tree()
	if fields := differences(a, b); len(fields) > 0 {
		if len(fields) > 3 {
			fields = append(fields[:3], "more")
		}
		differ = "; they differ in " + strings.Join(fields, ", ")
	}
	return fmt.Sprintf("%s is defined twice in %s: here and at %s; the cluster keeps only one of them, and which one is an accident of order, so remove one or rename it%s",
		what, unitPhrase(p.unit), prev.doc.Pos, differ)
}

// unitPhrase names a deploy unit in a message.
func unitPhrase(unit *source.Unit) string {
	if unit.Loose() {
		return "the files read outside any kustomization (one deploy unit)"
	}
	return "deploy unit " + unit.Name
}

// differences lists, in order, the field paths (at most three levels
// deep) where two objects differ.
func differences(a, b *yaml.Node) []string {
	var out []string
	var walk func(a, b *yaml.Node, at string, depth int)
	walk = func(a, b *yaml.Node, at string, depth int) {
		if a == nil || b == nil || a.Kind != b.Kind || depth == 3 || a.Kind != yaml.MappingNode {
			if !sameNode(a, b) && !slices.Contains(out, at) {
				out = append(out, at)
			}
			return
		}
		keys := map[string]bool{}
		var order []string
		for _, m := range []*yaml.Node{a, b} {
			for i := 0; i+1 < len(m.Content); i += 2 {
				if k := m.Content[i].Value; !keys[k] {
					keys[k] = true
					order = append(order, k)
				}
			}
		}
		for _, k := range order {
			walk(source.Lookup(a, k), source.Lookup(b, k), diag.JoinKey(at, k), depth+1)
		}
	}
	walk(a, b, "", 0)
	return out
}

// sameNode reports whether two nodes hold the same value, wherever they
// were written.
func sameNode(a, b *yaml.Node) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Kind != b.Kind || len(a.Content) != len(b.Content) {
		return false
	}
	if a.Kind == yaml.ScalarNode {
		return a.Value == b.Value && a.ShortTag() == b.ShortTag()
	}
	for i := range a.Content {
		if !sameNode(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}

// indexSecret indexes a Secret (or what declares one) under r. A second
// declaration of r in the unit is a DuplicateObject, kept with the
// Secret's findings (see deferSecret); the first stays.
func (p *pass) indexSecret(r ref, s *secret) {
	p.lastSecret, p.lastSecretDoc = r, s.doc
	prev := p.secrets[r]
	if prev == nil {
		p.secrets[r] = s
		return
	}
	if prev.merges || s.merges {
		p.secrets[r] = mergedSecret(prev, s)
		return
	}
	what := "Secret " + r.String()
	if s.decl().from != "" || prev.decl().from != "" {
		what += " (declared by " + orPlain(prev.decl().from) + " and by " + orPlain(s.decl().from) + ")"
	}
	if s.doc.Walked() {
		// A walked Secret's findings wait for a Connection to read it
		// (deferSecret), and most are never read. The message reads both
		// trees again, from their files, to say how they differ: it is
		// written only if settleSecrets reports it. Until then a
		// placeholder holds its place and its code, which the note on
		// an unread Secret lists.
		p.lazyDups = append(p.lazyDups, lazyDup{what: what, prev: prev.doc, it: s.item})
		p.diags = append(p.diags, diag.Diagnostic{Code: codeDuplicateObject, Severity: p.severity(codeDuplicateObject),
			Pos: s.doc.Pos, Object: s.item.obj(), Message: lazyMarker + strconv.Itoa(len(p.lazyDups)-1)})
		return
	}
	p.report(codeDuplicateObject, &s.item, path{"metadata", "name"}, false, "%s", p.duplicateMessage(what, prev.doc, &s.item))
}

// mergedSecret is the Secret that a and b declare together when one of
// them (or both) is an ExternalSecret with creationPolicy Merge or
// CreateOrMerge: the controller adds its keys to the Secret something
// else creates, so the two are no duplicate. The one that creates the
// Secret, if either does, is the base; the keys are both's, a merged
// key's value the fetched one.
func mergedSecret(a, b *secret) *secret {
	base, other := a, b
	if base.merges && !other.merges {
		base, other = b, a
	}
	m := *base
	m.values = slices.Clone(base.values)
	for _, k := range other.values {
		m.values.set(k.name, k.v)
	}
	m.merges = base.merges && other.merges
	d := m.edit()
	d.from = orPlain(base.decl().from) + " and " + other.decl().from + " (creationPolicy Merge)"
	if !m.keysUnknown && other.keysUnknown {
		m.keysUnknown, d.unknownWhy = true, other.decl().unknownWhy
	}
	if d.replacedBy == "" {
		o := other.decl()
		d.replaced, m.replacedAny, d.replacedBy = o.replaced, other.replacedAny, o.replacedBy
	}
	m.invalid = base.invalid || other.invalid
	m.read = base.read || other.read
	return &m
}

// lazyDup is a walked Secret's DuplicateObject finding, not yet written.
type lazyDup struct {
	what string
	prev *source.Document
	it   item
}

// lazyMarker begins the message of a lazyDup's placeholder, followed by
// its index in pass.lazyDups; no message keyhole writes begins with NUL.
const lazyMarker = "\x00lazy "

// written is d, or the finding its placeholder stands for, written now.
func (p *pass) written(d diag.Diagnostic) {
	i, ok := strings.CutPrefix(d.Message, lazyMarker)
	if !ok {
		p.diags = append(p.diags, d)
		return
	}
	n, _ := strconv.Atoi(i)
	l := p.lazyDups[n]
	p.report(codeDuplicateObject, &l.it, path{"metadata", "name"}, false, "%s", p.duplicateMessage(l.what, l.prev, &l.it))
}

func orPlain(from string) string {
	if from == "" {
		return "a Secret"
	}
	return from
}

// deferSecret sets aside the findings about a Secret (or its stand-in)
// that a walk found, made since mark: such a Secret is keyhole's
// business only when a Connection reads it (docs/inputs.md), and
// settleSecrets reports them then. A Secret named explicitly is checked
// whatever reads it.
func (p *pass) deferSecret(it *item, mark int) {
	if !it.doc.Walked() || len(p.diags) == mark {
		return
	}
	r := it.ref()
	if p.lastSecretDoc == it.doc {
		if r = p.lastSecret; r == (ref{}) {
			return
		}
	}
	p.pending[r] = append(p.pending[r], p.diags[mark:]...)
	p.diags = p.diags[:mark]
}

// settleSecrets reports the set-aside findings of each Secret a
// Connection reads (in any unit), and says once, at info, for each other
// one, that its findings were skipped.
func (p *pass) settleSecrets() {
	for _, r := range slices.SortedFunc(maps.Keys(p.pending), func(a, b ref) int { return strings.Compare(a.String(), b.String()) }) {
		ds := p.pending[r]
		if s := p.secrets[r]; s != nil && s.read || r.namespace == "" && p.selectionRead(r.name) {
			for _, d := range ds {
				p.written(d)
			}
			continue
		}
		var codes []string
		for _, d := range ds {
			if d.Severity > diag.Info && !slices.Contains(codes, d.Code) {
				codes = append(codes, d.Code)
			}
		}
		if len(codes) == 0 {
			continue
		}
		pos := ds[0].Pos
		if s := p.secrets[r]; s != nil {
			pos = s.doc.Pos
		}
		p.diags = append(p.diags, diag.Diagnostic{
			Code:     source.CodeInputSkipped,
			Severity: diag.Info,
			Pos:      pos,
			Object:   ds[0].Object,
			Message: fmt.Sprintf("Secret %s is read by no Connection, so what is wrong in it (%s) is not keyhole's to report; skipped (name its file explicitly to check it)",
				r, strings.Join(codes, ", ")),
		})
	}
}

// merge turns the diagnostics of every unit (and the loader's) into one
// list: a finding several units share, the same code at the same position
// and field, is one diagnostic naming them all. Its message is the first
// unit's (by name); where another unit's differs (an overlay's namespace
// in a name it quotes), the note says whose it is. When the input has
// several units and a finding's file lies outside each unit's own
// directory (a base the units build), its message says which units it
// affects.
func merge(all diag.List, multi bool) diag.List {
	type key struct {
		code, path, suppressed string
		severity               diag.Severity
		pos                    diag.Pos
	}
	index := map[key][]int{}
	var out diag.List
	differs := map[int]bool{}
	for _, d := range all {
		units := d.Units
		if len(units) == 0 {
			units = []string{source.LooseUnit}
		}
		k := key{d.Code, d.Path, d.Suppressed, d.Severity, d.Pos}
		// The same finding from another unit: the entry with the same
		// message, else the first one that unit has not joined yet (two
		// findings of one unit at one place stay two).
		at := -1
		for _, i := range index[k] {
			if slices.ContainsFunc(units, func(u string) bool { return slices.Contains(out[i].Units, u) }) {
				continue
			}
			if out[i].Message == d.Message {
				at = i
				break
			}
			if at < 0 {
				at = i
			}
		}
		if at >= 0 {
			out[at].Units = append(out[at].Units, units...)
			if d.Message != out[at].Message {
				differs[at] = true
			}
			continue
		}
		d.Units = slices.Clone(units)
		index[k] = append(index[k], len(out))
		out = append(out, d)
	}
	for i := range out {
		d := &out[i]
		first := d.Units[0]
		slices.Sort(d.Units)
		if !multi {
			continue
		}
		var built []string
		for _, u := range d.Units {
			if u != source.LooseUnit {
				built = append(built, u)
			}
		}
		if len(built) == 0 || slices.ContainsFunc(built, func(u string) bool { return within(d.Pos.File, u) }) {
			continue
		}
		switch {
		case len(built) == 1:
			d.Message += fmt.Sprintf(" (in deploy unit %s)", built[0])
		case differs[i]:
			d.Message += fmt.Sprintf(" (in %d deploy units: %s; as %s builds it)", len(built), strings.Join(built, ", "), first)
		default:
			d.Message += fmt.Sprintf(" (in %d deploy units: %s)", len(built), strings.Join(built, ", "))
		}
	}
	return out
}

// within reports whether file lies in directory dir (both as reported).
func within(file, dir string) bool {
	return dir == "." || file == dir || strings.HasPrefix(file, dir+"/")
}

// SkippedOf counts, from a check's diagnostics, what it skipped as not
// keyhole's business: objects of other kinds (KindUnknown) and of how many
// kinds, and the files, charts and kustomizations not read as objects
// (InputSkipped), for the summary the printers give. Suppressed
// diagnostics do not count.
func SkippedOf(ds diag.List) diag.Skipped {
	var sk diag.Skipped
	kinds, files := map[[2]string]bool{}, map[string]bool{}
	for _, d := range ds {
		if d.Suppressed != "" {
			continue
		}
		switch d.Code {
		case source.CodeFluxSourceUnmapped:
			sk.Units++
		case codeKindUnknown:
			sk.Objects++
			sk.Notes++
			kinds[[2]string{d.Object.APIVersion, d.Object.Kind}] = true
		case source.CodeInputSkipped:
			sk.Notes++
			if d.Object.Kind != "" { // an object skipped, such as a Secret no Connection reads
				sk.Objects++
				kinds[[2]string{d.Object.APIVersion, d.Object.Kind}] = true
			} else {
				files[d.Pos.File] = true
			}
		}
	}
	sk.Kinds, sk.Files = len(kinds), len(files)
	return sk
}
