package source

import (
	"errors"
	"fmt"
	"hash/maphash"
	"sync"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// Holding every document's node tree until the last check has run makes
// the loader's memory grow with the repository: the trees are most of
// it. A caller that takes what it needs of a document as it is parsed
// (Options.Digest) lets the loader drop the tree there and then, on the
// worker that parsed it; the few later questions that need the tree (a
// diagnostic's exact position, a target that re-emits the object) read
// it again from its file with Tree.

// Digest is what a caller takes of each document as the loader parses it
// (see Options.Digest): a value it gets back with Document.Digested, and
// whether the document's node tree may be dropped.
type Digest func(d *Document) (digest any, release bool)

// ObjectDigest is what a digest implements when it can say, exactly as
// Document.Object would, what its document is (ok false when it cannot):
// a released document then answers Object from its digest, and the
// loader keeps no copy. A Document is kept for every document of the
// input, so the 64 bytes of a copy are a tenth of what the loader keeps.
type ObjectDigest interface {
	DigestObject() (o diag.Object, ok bool)
}

// keptObject is the digest of a released document whose digest cannot
// say what the document is, with the loader's copy of its Object.
type keptObject struct {
	digest any
	obj    diag.Object
}

// origin is where a released document's file is read again from: shared
// by every document of one file.
type origin struct {
	name   string // as reported, the Document's File
	abs    string // as the file system reads it; "" for standard input
	walked bool
	size   int
	sum    uint64
	files  *rereader
}

// rereader reads released documents' files again, one at a time (a
// commit's tree is not safe for concurrent reads), keeping the last file
// parsed: callers ask for a file's documents one after another.
type rereader struct {
	fsys fileSystem
	mu   sync.Mutex
	last *origin
	docs []Document
}

// seed makes a file's sum comparable within this process only: it tells
// whether the file changed between two reads, nothing else.
var seed = maphash.MakeSeed()

// originOf returns the origin of the file reported as name, read from abs
// on the loader's file system, whose bytes were data.
func (l *loader) originOf(name, abs string, walked bool, data []byte) *origin {
	if l.opts.Digest == nil || abs == "" {
		return nil
	}
	return &origin{name: name, abs: abs, walked: walked, size: len(data), sum: maphash.Bytes(seed, data), files: l.reread}
}

// digest gives a document just parsed to Options.Digest and drops its
// node tree if the digest releases it and the file can be read again
// (its origin is known).
func (l *loader) digest(d *Document) {
	if l.opts.Digest == nil {
		return
	}
	dg, release := l.opts.Digest(d)
	d.digest = dg
	if release && d.from != nil && d.from.origin != nil && d.from.where == nil {
		if od, ok := dg.(ObjectDigest); !ok || !sameObject(od, d.Object()) {
			d.digest = &keptObject{digest: dg, obj: d.Object()}
		}
		d.Node = nil
	}
}

// Digested returns what Options.Digest took of the document, nil when it
// was not given one (a document kustomize built, or Load called without
// Digest).
func (d *Document) Digested() any {
	if k, ok := d.digest.(*keptObject); ok {
		return k.digest
	}
	return d.digest
}

// sameObject reports whether od says what o says.
func sameObject(od ObjectDigest, o diag.Object) bool {
	got, ok := od.DigestObject()
	return ok && got == o
}

// releasedObject is Object of a released document.
func (d *Document) releasedObject() diag.Object {
	switch dg := d.digest.(type) {
	case *keptObject:
		return dg.obj
	case ObjectDigest:
		o, _ := dg.DigestObject()
		return o
	}
	return diag.Object{}
}

// Released reports whether the loader dropped the document's node tree
// (Node is nil); Tree reads it again.
func (d *Document) Released() bool {
	return d.Node == nil && d.from != nil && d.from.origin != nil
}

// ErrChanged is Tree's error when a released document's file no longer
// holds what was read the first time.
var ErrChanged = errors.New("the file changed while keyhole read it")

// Tree returns the document's node tree: Node when the loader kept it,
// else the tree read again from its file, with the same positions.
func (d *Document) Tree() (*yaml.Node, error) {
	if !d.Released() {
		return d.Node, nil
	}
	o := d.from.origin
	return o.files.tree(o, d.Index, d.Pos)
}

func (r *rereader) tree(o *origin, index int, pos diag.Pos) (*yaml.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != o {
		r.last, r.docs = nil, nil
		data, err := r.fsys.ReadFile(o.abs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
		if len(data) != o.size || maphash.Bytes(seed, data) != o.sum {
			return nil, fmt.Errorf("%s: %w", o.name, ErrChanged)
		}
		r.docs, _ = parse(o.name, data, o.walked, nil)
		r.last = o
	}
	for i := range r.docs {
		if d := &r.docs[i]; d.Index == index && d.Pos == pos {
			return d.Node, nil
		}
	}
	return nil, fmt.Errorf("%s: %w", o.name, ErrChanged)
}
