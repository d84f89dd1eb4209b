package gitfs

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// Bounds of reading objects. A commit's objects are read one by one, so
// what a read holds is the object and the delta bases it needs; these keep
// a corrupt or hostile repository from making it more.
const (
	// deltaBaseCacheBytes bounds the delta bases kept for the next
	// object: the trees of one commit are deltas of one another, so
	// keeping recent bases spares inflating the chain again (git keeps
	// its own, core.deltaBaseCacheLimit, for the same reason).
	deltaBaseCacheBytes = 8 << 20
	// maxDeltaChain bounds the deltas applied for one object: git makes
	// chains of at most 50 (--depth, 250 with gc --aggressive), so a
	// longer one is a corrupt pack, or a loop of reference deltas.
	maxDeltaChain = 10_000
	// maxAlternates bounds nested objects/info/alternates, as git does.
	maxAlternates = 5
	// idxWindow is how many object names one read of a pack index
	// brings: hashes are uniform, so the first read, placed where the
	// name should be, usually holds it.
	idxWindow = 64
)

// errCorrupt is what an object read fails with when the repository's
// files are not what git writes.
var errCorrupt = errors.New("corrupt git object storage")

// objectStore is a repository's storage for go-git with its objects read
// in place: a pack's index is searched in the file, not loaded, and an
// object is inflated from its pack when asked for, with only its delta
// bases kept. go-git's own reader loads every pack index whole and maps
// every object's offset back to its name on the first delta it resolves,
// which on a long history costs hundreds of megabytes before the first
// file is read; this costs what the objects read hold. References,
// configuration and the shallow list are go-git's (the embedded Storage).
type objectStore struct {
	*filesystem.Storage
	objs *objectReader
}

func newObjectStore(s *filesystem.Storage) *objectStore {
	return &objectStore{Storage: s, objs: newObjectReader(dotgit.New(s.Filesystem()), 0)}
}

// EncodedObject returns the object named h, of type t (or any type for
// plumbing.AnyObject), or plumbing.ErrObjectNotFound.
func (s *objectStore) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	return s.objs.object(t, h)
}

// EncodedObjectSize returns the size of the object named h without
// reading its content (for a delta, its first bytes name the size).
func (s *objectStore) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	return s.objs.size(h)
}

// HasEncodedObject returns nil when the repository holds h, else
// plumbing.ErrObjectNotFound.
func (s *objectStore) HasEncodedObject(h plumbing.Hash) error {
	return s.objs.has(h)
}

// HashesWithPrefix returns the names of the objects that start with
// prefix, loose ones first, as go-git's storage does: it resolves a short
// hash.
func (s *objectStore) HashesWithPrefix(prefix []byte) ([]plumbing.Hash, error) {
	return s.objs.withPrefix(prefix)
}

// Close closes the pack files the store opened.
func (s *objectStore) Close() error {
	return errors.Join(s.objs.close(), s.Storage.Close())
}

// objectReader reads the objects of one objects directory (and its
// alternates). It is safe for concurrent use.
type objectReader struct {
	mu    sync.Mutex
	dir   *dotgit.DotGit
	level int // of alternates: 0 for the repository's own
	// Opened on first use.
	opened     bool
	packs      []*packIndex
	alternates []*objectReader
	bases      baseCache
	// Reused for each inflate.
	br *bufio.Reader
	zr io.ReadCloser
	// sized is the last loose object whose size was asked for, read
	// whole when it is small (sizedLooseBytes): a loose object is
	// inflated for its size as for its bytes, and the loader reads a file
	// right after it stats it.
	sized sizedLoose
}

// sizedLoose is a loose object read whole for its size.
type sizedLoose struct {
	h    plumbing.Hash
	typ  plumbing.ObjectType
	data []byte
}

// sizedLooseBytes bounds the loose object looseSize reads whole.
const sizedLooseBytes = 1 << 20

func newObjectReader(dir *dotgit.DotGit, level int) *objectReader {
	return &objectReader{dir: dir, level: level, bases: baseCache{limit: deltaBaseCacheBytes}}
}

// open lists and opens the packs, and the alternates' readers.
func (r *objectReader) open() error {
	if r.opened {
		return nil
	}
	if _, err := r.rescan(); err != nil {
		r.closeLocked()
		return err
	}
	if r.level < maxAlternates {
		alts, err := r.dir.Alternates()
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			r.closeLocked()
			return fmt.Errorf("reading objects/info/alternates: %w", err)
		}
		for _, d := range alts {
			r.alternates = append(r.alternates, newObjectReader(d, r.level+1))
		}
	}
	r.opened = true
	return nil
}

// rescan opens the packs not open yet, and reports whether there were
// any. A pack listed without its index is left for a later rescan: git
// writes the index last. Git itself looks again this way when an object
// is missing, because a `git gc` running beside the reader (`git commit`
// starts one in the background) moves loose objects into a new pack,
// then deletes them.
func (r *objectReader) rescan() (bool, error) {
	hashes, err := r.dir.ObjectPacks()
	if err != nil {
		return false, fmt.Errorf("listing packs: %w", err)
	}
	added := false
	for _, h := range hashes {
		if slices.ContainsFunc(r.packs, func(p *packIndex) bool { return p.name == h.String() }) {
			continue
		}
		p, err := openPack(r.dir, h)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return added, err
		}
		r.packs = append(r.packs, p)
		added = true
	}
	return added, nil
}

// retry reports whether a read that found no object should run again:
// when packs appeared since they were listed (see rescan).
func (r *objectReader) retry(err error) (bool, error) {
	if !errors.Is(err, plumbing.ErrObjectNotFound) {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	added, rerr := r.rescan()
	if rerr != nil {
		return false, rerr
	}
	return added, err
}

func (r *objectReader) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closeLocked()
}

func (r *objectReader) closeLocked() error {
	var errs []error
	for _, p := range r.packs {
		errs = append(errs, p.close())
	}
	for _, a := range r.alternates {
		errs = append(errs, a.close())
	}
	r.packs, r.alternates, r.opened = nil, nil, false
	r.bases.clear()
	return errors.Join(errs...)
}

// object is EncodedObject's: packs first, then loose objects, then the
// alternates, as git looks.
func (r *objectReader) object(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	typ, data, err := r.read(h)
	if err != nil {
		return nil, err
	}
	if t != plumbing.AnyObject && typ != t {
		return nil, plumbing.ErrObjectNotFound
	}
	return &readObject{h: h, t: typ, data: data}, nil
}

func (r *objectReader) read(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	typ, data, err := r.readOnce(h)
	again, err := r.retry(err)
	if again {
		return r.readOnce(h)
	}
	return typ, data, err
}

func (r *objectReader) readOnce(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.open(); err != nil {
		return 0, nil, err
	}
	return r.readLocked(h, 0)
}

// readLocked reads h at delta depth depth (a reference delta's base is
// read through here).
func (r *objectReader) readLocked(h plumbing.Hash, depth int) (plumbing.ObjectType, []byte, error) {
	for _, p := range r.packs {
		off, ok, err := p.find(h)
		if err != nil {
			return 0, nil, err
		}
		if ok {
			return r.unpack(p, off, depth, depth > 0)
		}
	}
	typ, data, err := r.loose(h)
	if !errors.Is(err, plumbing.ErrObjectNotFound) {
		return typ, data, err
	}
	for _, a := range r.alternates {
		typ, data, err := a.read(h)
		if !errors.Is(err, plumbing.ErrObjectNotFound) {
			return typ, data, err
		}
	}
	return 0, nil, plumbing.ErrObjectNotFound
}

// loose reads h from its own file under objects/; r.mu is held.
func (r *objectReader) loose(h plumbing.Hash) (_ plumbing.ObjectType, _ []byte, err error) {
	if s := r.sized; s.data != nil && s.h == h {
		return s.typ, s.data, nil
	}
	f, err := r.dir.Object(h)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, plumbing.ErrObjectNotFound
	}
	if err != nil {
		return 0, nil, err
	}
	defer closeInto(f, &err)
	or, err := objfile.NewReader(f)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: loose object %s: %w", errCorrupt, h, err)
	}
	defer closeInto(or, &err)
	typ, size, err := or.Header()
	if err != nil {
		return 0, nil, fmt.Errorf("%w: loose object %s: %w", errCorrupt, h, err)
	}
	data, err := readExactly(or, size)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: loose object %s: %w", errCorrupt, h, err)
	}
	return typ, data, nil
}

func closeInto(c io.Closer, err *error) {
	if cerr := c.Close(); *err == nil {
		*err = cerr
	}
}

// size is EncodedObjectSize's.
func (r *objectReader) size(h plumbing.Hash) (int64, error) {
	size, err := r.sizeOnce(h)
	again, err := r.retry(err)
	if again {
		return r.sizeOnce(h)
	}
	return size, err
}

func (r *objectReader) sizeOnce(h plumbing.Hash) (int64, error) {
	r.mu.Lock()
	if err := r.open(); err != nil {
		r.mu.Unlock()
		return 0, err
	}
	for _, p := range r.packs {
		off, ok, err := p.find(h)
		if err != nil {
			r.mu.Unlock()
			return 0, err
		}
		if ok {
			defer r.mu.Unlock()
			return r.packedSize(p, off)
		}
	}
	alts := r.alternates
	r.mu.Unlock()
	size, err := r.looseSize(h)
	if !errors.Is(err, plumbing.ErrObjectNotFound) {
		return size, err
	}
	for _, a := range alts {
		size, err := a.size(h)
		if !errors.Is(err, plumbing.ErrObjectNotFound) {
			return size, err
		}
	}
	return 0, plumbing.ErrObjectNotFound
}

// looseSize reads the size in the header of h's own file, and the rest
// of a small object (sized).
func (r *objectReader) looseSize(h plumbing.Hash) (_ int64, err error) {
	r.mu.Lock()
	s := r.sized
	r.mu.Unlock()
	if s.data != nil && s.h == h {
		return int64(len(s.data)), nil
	}
	f, err := r.dir.Object(h)
	if errors.Is(err, os.ErrNotExist) {
		return 0, plumbing.ErrObjectNotFound
	}
	if err != nil {
		return 0, err
	}
	defer closeInto(f, &err)
	or, err := objfile.NewReader(f)
	if err != nil {
		return 0, fmt.Errorf("%w: loose object %s: %w", errCorrupt, h, err)
	}
	defer closeInto(or, &err)
	typ, size, err := or.Header()
	if err != nil {
		return 0, fmt.Errorf("%w: loose object %s: %w", errCorrupt, h, err)
	}
	if size <= sizedLooseBytes {
		data, err := readExactly(or, size)
		if err != nil {
			return 0, fmt.Errorf("%w: loose object %s: %w", errCorrupt, h, err)
		}
		r.mu.Lock()
		r.sized = sizedLoose{h: h, typ: typ, data: data}
		r.mu.Unlock()
	}
	return size, nil
}

// has is HasEncodedObject's.
func (r *objectReader) has(h plumbing.Hash) error {
	again, err := r.retry(r.hasOnce(h))
	if again {
		return r.hasOnce(h)
	}
	return err
}

func (r *objectReader) hasOnce(h plumbing.Hash) error {
	r.mu.Lock()
	if err := r.open(); err != nil {
		r.mu.Unlock()
		return err
	}
	for _, p := range r.packs {
		_, ok, err := p.find(h)
		if err != nil || ok {
			r.mu.Unlock()
			return err
		}
	}
	alts := r.alternates
	r.mu.Unlock()
	if _, err := r.dir.ObjectStat(h); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, a := range alts {
		if err := a.has(h); !errors.Is(err, plumbing.ErrObjectNotFound) {
			return err
		}
	}
	return plumbing.ErrObjectNotFound
}

// withPrefix is HashesWithPrefix's: the loose objects, then each pack's
// in its order, each name once.
func (r *objectReader) withPrefix(prefix []byte) ([]plumbing.Hash, error) {
	hashes, err := r.dir.ObjectsWithPrefix(prefix)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.open(); err != nil {
		return nil, err
	}
	seen := make(map[plumbing.Hash]bool, len(hashes))
	for _, h := range hashes {
		seen[h] = true
	}
	for _, p := range r.packs {
		err := p.withPrefix(prefix, func(h plumbing.Hash) {
			if !seen[h] {
				seen[h] = true
				hashes = append(hashes, h)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return hashes, nil
}

// delta is one step of a delta chain: the object at off is its base with
// delta applied.
type delta struct {
	off  int64
	data []byte
}

// unpack reads the object at off of p: it walks the delta chain down to
// an object it holds whole (in the pack or the base cache), then applies
// the deltas back up. The bases on the way are cached; the object itself
// only when it is a base (cache).
func (r *objectReader) unpack(p *packIndex, off int64, depth int, cache bool) (plumbing.ObjectType, []byte, error) {
	var chain []delta
	var typ plumbing.ObjectType
	var data []byte
	for cur := off; ; {
		if len(chain)+depth > maxDeltaChain {
			return 0, nil, fmt.Errorf("%w: pack %s: a delta chain longer than %d", errCorrupt, p.name, maxDeltaChain)
		}
		if b, ok := r.bases.get(p, cur); ok {
			typ, data = b.typ, b.data
			break
		}
		hdr, err := p.header(cur)
		if err != nil {
			return 0, nil, err
		}
		body, err := r.inflate(p, hdr.data, hdr.size)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: pack %s: object at %d: %w", errCorrupt, p.name, cur, err)
		}
		if !hdr.typ.IsDelta() {
			typ, data = hdr.typ, body
			if len(chain) > 0 || cache {
				r.bases.put(p, cur, typ, data)
			}
			break
		}
		chain = append(chain, delta{off: cur, data: body})
		if hdr.typ == plumbing.OFSDeltaObject {
			cur = hdr.base
			continue
		}
		// A reference delta names its base: in this pack as a rule,
		// anywhere in the repository in a thin pack made whole.
		bo, ok, err := p.find(hdr.ref)
		if err != nil {
			return 0, nil, err
		}
		if ok {
			cur = bo
			continue
		}
		if typ, data, err = r.readLocked(hdr.ref, depth+len(chain)); err != nil {
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				err = fmt.Errorf("%w: pack %s: the base %s of a delta is missing", errCorrupt, p.name, hdr.ref)
			}
			return 0, nil, err
		}
		break
	}
	for i := len(chain) - 1; i >= 0; i-- {
		var err error
		if data, err = applyDelta(data, chain[i].data); err != nil {
			return 0, nil, fmt.Errorf("%w: pack %s: object at %d: %w", errCorrupt, p.name, chain[i].off, err)
		}
		if i > 0 || cache {
			r.bases.put(p, chain[i].off, typ, data)
		}
	}
	return typ, data, nil
}

// applyDelta applies a delta of git's pack format (the sizes of base and
// target, then instructions to copy a range of base or insert bytes of
// the delta) to base. It writes into one buffer of the target's size,
// which a chain of deltas on a large file makes once per step.
func applyDelta(base, delta []byte) ([]byte, error) {
	bad := func(why string) error { return fmt.Errorf("a delta %s", why) }
	baseSize, n := binary.Uvarint(delta)
	if n <= 0 || baseSize != uint64(len(base)) {
		return nil, bad("for a base of another size")
	}
	delta = delta[n:]
	size, n := binary.Uvarint(delta)
	if n <= 0 {
		return nil, bad("without its target's size")
	}
	delta = delta[n:]
	// A target is its base with a few changes, as a rule: that much is
	// made at once, not what a corrupt size claims.
	out := make([]byte, 0, min(size, 2*uint64(len(base)+len(delta))))
	for len(delta) > 0 {
		cmd := delta[0]
		delta = delta[1:]
		switch {
		case cmd&0x80 != 0: // copy: which offset and size bytes follow
			var off, sz uint64
			for i := range 7 {
				if cmd&(1<<i) == 0 {
					continue
				}
				if len(delta) == 0 {
					return nil, bad("cut in an instruction")
				}
				if i < 4 {
					off |= uint64(delta[0]) << (8 * i)
				} else {
					sz |= uint64(delta[0]) << (8 * (i - 4))
				}
				delta = delta[1:]
			}
			if sz == 0 {
				sz = 0x10000
			}
			if off+sz > uint64(len(base)) {
				return nil, bad("copying from beyond its base")
			}
			if uint64(len(out))+sz > size {
				return nil, bad("longer than its target's size")
			}
			out = append(out, base[off:off+sz]...)
		case cmd != 0: // insert the next cmd bytes
			if len(delta) < int(cmd) {
				return nil, bad("cut in an insert")
			}
			if uint64(len(out))+uint64(cmd) > size {
				return nil, bad("longer than its target's size")
			}
			out = append(out, delta[:cmd]...)
			delta = delta[cmd:]
		default:
			return nil, bad("with the reserved instruction 0")
		}
	}
	if uint64(len(out)) != size {
		return nil, bad("shorter than its target's size")
	}
	return out, nil
}

// packedSize is the size of the object at off of p: its header's, or for
// a delta the target size its first bytes give.
func (r *objectReader) packedSize(p *packIndex, off int64) (int64, error) {
	hdr, err := p.header(off)
	if err != nil {
		return 0, err
	}
	if !hdr.typ.IsDelta() {
		return hdr.size, nil
	}
	zr, err := r.inflater(p, hdr.data)
	if err != nil {
		return 0, fmt.Errorf("%w: pack %s: object at %d: %w", errCorrupt, p.name, off, err)
	}
	// Two sizes of at most 10 bytes each: the base's, then the target's.
	var head [20]byte
	n, err := io.ReadFull(zr, head[:min(int64(len(head)), hdr.size)])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, fmt.Errorf("%w: pack %s: object at %d: %w", errCorrupt, p.name, off, err)
	}
	b := head[:n]
	_, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, fmt.Errorf("%w: pack %s: object at %d: a delta without its sizes", errCorrupt, p.name, off)
	}
	size, k2 := binary.Uvarint(b[k:])
	if k2 <= 0 || size > 1<<62 {
		return 0, fmt.Errorf("%w: pack %s: object at %d: a delta without its sizes", errCorrupt, p.name, off)
	}
	return int64(size), nil
}

// inflater returns the zlib stream of p that starts at off.
func (r *objectReader) inflater(p *packIndex, off int64) (io.Reader, error) {
	if off < 0 || off >= p.packSize {
		return nil, errors.New("data beyond the end of the pack")
	}
	sr := io.NewSectionReader(p.pack, off, p.packSize-off)
	if r.br == nil {
		r.br = bufio.NewReaderSize(sr, 16<<10)
	} else {
		r.br.Reset(sr)
	}
	if r.zr == nil {
		zr, err := zlib.NewReader(r.br)
		if err != nil {
			return nil, err
		}
		r.zr = zr
		return zr, nil
	}
	if err := r.zr.(zlib.Resetter).Reset(r.br, nil); err != nil {
		return nil, err
	}
	return r.zr, nil
}

// inflate reads the zlib stream of p at off, which must hold size bytes
// and end there (its checksum is read and checked).
func (r *objectReader) inflate(p *packIndex, off, size int64) ([]byte, error) {
	zr, err := r.inflater(p, off)
	if err != nil {
		return nil, err
	}
	return readExactly(zr, size)
}

// readExactly reads r to its end, which must come after size bytes. It
// allocates as the bytes come, not the size a corrupt header claims.
func readExactly(r io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return nil, fmt.Errorf("a negative size %d", size)
	}
	b := make([]byte, 0, min(size, 1<<20))
	for int64(len(b)) < size {
		if len(b) == cap(b) {
			b = slices.Grow(b, int(min(size-int64(len(b)), int64(len(b)))))
		}
		n, err := r.Read(b[len(b):int(min(int64(cap(b)), size))])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			if int64(len(b)) == size {
				return b, nil
			}
			return nil, fmt.Errorf("%d bytes where the header says %d", len(b), size)
		}
		if err != nil {
			return nil, err
		}
	}
	// Reading on to the end checks the stream's checksum.
	var more [1]byte
	for {
		n, err := r.Read(more[:])
		if n > 0 {
			return nil, fmt.Errorf("more bytes than the %d the header says", size)
		}
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readObject is an object as read, in the plumbing.EncodedObject go-git
// decodes commits, trees and blobs from. Its bytes may be shared with the
// delta base cache: it reads them, and refuses to be written.
type readObject struct {
	h    plumbing.Hash
	t    plumbing.ObjectType
	data []byte
}

var errReadObject = errors.New("an object read from the repository cannot be written")

func (o *readObject) Hash() plumbing.Hash             { return o.h }
func (o *readObject) Type() plumbing.ObjectType       { return o.t }
func (o *readObject) SetType(t plumbing.ObjectType)   { o.t = t }
func (o *readObject) Size() int64                     { return int64(len(o.data)) }
func (o *readObject) SetSize(int64)                   {}
func (o *readObject) Writer() (io.WriteCloser, error) { return nil, errReadObject }
func (o *readObject) Reader() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(o.data)), nil
}

var _ plumbing.EncodedObject = (*readObject)(nil)

// packIndex is one pack and its index (version 2, what git has written
// since 2007), read in place: only the fan-out table is held.
type packIndex struct {
	name     string
	idx      packFile
	pack     packFile
	packSize int64
	fanout   [256]uint32
	count    int64 // objects in the pack
	large    int64 // entries of the 64-bit offset table
	// scratch is what reads of the files go through (under the
	// objectReader's lock): a buffer passed to ReadAt would otherwise be
	// allocated anew for every read.
	scratch [idxWindow * 20]byte
}

// packFile is what is read of a pack or its index: go-git's files, opened
// through the repository's filesystem (a linked worktree's common
// directory included).
type packFile interface {
	io.ReaderAt
	io.Seeker
	io.Closer
	Name() string
}

// Layout of a version 2 pack index: header, fan-out, then per object its
// name, CRC and offset, then the 64-bit offsets, then two checksums.
const (
	idxHeader  = 8
	idxNames   = idxHeader + 256*4
	idxTrailer = 2 * 20
)

func openPack(dir *dotgit.DotGit, h plumbing.Hash) (_ *packIndex, err error) {
	fsys := dir.Fs()
	base := fsys.Join("objects", "pack", "pack-"+h.String())
	p := &packIndex{name: h.String()}
	defer func() {
		if err != nil {
			_ = p.close()
		}
	}()
	if p.idx, err = fsys.Open(base + ".idx"); err != nil {
		return nil, fmt.Errorf("opening the index of pack %s: %w", p.name, err)
	}
	if p.pack, err = fsys.Open(base + ".pack"); err != nil {
		return nil, fmt.Errorf("opening pack %s: %w", p.name, err)
	}
	idxSize, err := fileSize(p.idx)
	if err != nil {
		return nil, err
	}
	if p.packSize, err = fileSize(p.pack); err != nil {
		return nil, err
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: the index of pack %s: %s", errCorrupt, p.name, why)
	}
	var head [idxNames]byte
	if _, err := p.idx.ReadAt(head[:], 0); err != nil {
		return nil, bad(fmt.Sprintf("reading its header: %v", err))
	}
	if !bytes.Equal(head[:4], []byte{0xff, 't', 'O', 'c'}) || binary.BigEndian.Uint32(head[4:8]) != 2 {
		return nil, bad("not a version 2 pack index")
	}
	prev := uint32(0)
	for i := range p.fanout {
		p.fanout[i] = binary.BigEndian.Uint32(head[idxHeader+4*i:])
		if p.fanout[i] < prev {
			return nil, bad("its fan-out table decreases")
		}
		prev = p.fanout[i]
	}
	p.count = int64(p.fanout[255])
	rest := idxSize - idxNames - p.count*28 - idxTrailer
	if rest < 0 || rest%8 != 0 {
		return nil, bad(fmt.Sprintf("%d bytes for %d objects", idxSize, p.count))
	}
	p.large = rest / 8
	var sum [20]byte
	if _, err := p.idx.ReadAt(sum[:], idxSize-idxTrailer); err != nil {
		return nil, bad(fmt.Sprintf("reading its checksum: %v", err))
	}
	if sum != h {
		return nil, bad(fmt.Sprintf("it indexes pack %x", sum))
	}
	var packHead [12]byte
	if _, err := p.pack.ReadAt(packHead[:], 0); err != nil || !bytes.Equal(packHead[:4], []byte("PACK")) {
		return nil, fmt.Errorf("%w: pack %s: not a pack file", errCorrupt, p.name)
	}
	return p, nil
}

func fileSize(f packFile) (int64, error) {
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return n, nil
}

func (p *packIndex) close() error {
	var errs []error
	for _, f := range []packFile{p.idx, p.pack} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// bucket is the range of positions whose names start with b.
func (p *packIndex) bucket(b byte) (lo, hi int64) {
	if b > 0 {
		lo = int64(p.fanout[b-1])
	}
	return lo, int64(p.fanout[b])
}

// names reads the names at positions [lo, hi) into buf.
func (p *packIndex) names(buf []byte, lo, hi int64) ([]byte, error) {
	b := buf[:(hi-lo)*20]
	if _, err := p.idx.ReadAt(b, idxNames+lo*20); err != nil {
		return nil, fmt.Errorf("%w: the index of pack %s: reading names: %v", errCorrupt, p.name, err)
	}
	return b, nil
}

// search is the first position in [lo, hi) whose name is not below key
// (hi when every name is), and whether that name starts with key. It
// reads a window of names at a time: the first window is placed where a
// uniform name would be, the next ones halve what is left.
func (p *packIndex) search(key []byte, lo, hi int64) (int64, bool, error) {
	buf := p.scratch[:]
	guess := true
	for hi-lo > idxWindow {
		var mid int64
		if guess {
			var frac [4]byte
			if len(key) > 1 {
				copy(frac[:], key[1:])
			}
			mid = lo + int64((uint64(hi-lo)*uint64(binary.BigEndian.Uint32(frac[:])))>>32)
			guess = false
		} else {
			mid = lo + (hi-lo)/2
		}
		start := min(max(mid-idxWindow/2, lo), hi-idxWindow)
		b, err := p.names(buf, start, start+idxWindow)
		if err != nil {
			return 0, false, err
		}
		switch {
		case bytes.Compare(key, b[:20]) <= 0:
			hi = start
			if bytes.HasPrefix(b[:20], key) {
				// The first name of the window may be the answer.
				hi = start + 1
			}
		case bytes.Compare(key, b[len(b)-20:]) > 0:
			lo = start + idxWindow
		default:
			i, ok := searchNames(b, key)
			return start + int64(i), ok, nil
		}
	}
	b, err := p.names(buf, lo, hi)
	if err != nil {
		return 0, false, err
	}
	i, ok := searchNames(b, key)
	return lo + int64(i), ok, nil
}

// searchNames is the first of the 20-byte names in b not below key, and
// whether it starts with key.
func searchNames(b, key []byte) (int, bool) {
	n := len(b) / 20
	i := sort.Search(n, func(i int) bool { return bytes.Compare(b[i*20:i*20+20], key) >= 0 })
	return i, i < n && bytes.HasPrefix(b[i*20:i*20+20], key)
}

// find returns the pack offset of h, and whether the pack holds it.
func (p *packIndex) find(h plumbing.Hash) (int64, bool, error) {
	lo, hi := p.bucket(h[0])
	if lo >= hi {
		return 0, false, nil
	}
	pos, ok, err := p.search(h[:], lo, hi)
	if err != nil || !ok {
		return 0, false, err
	}
	off, err := p.offset(pos)
	return off, err == nil, err
}

// offset is the pack offset of the object at position pos.
func (p *packIndex) offset(pos int64) (int64, error) {
	b := p.scratch[:8]
	if _, err := p.idx.ReadAt(b[:4], idxNames+p.count*24+pos*4); err != nil {
		return 0, fmt.Errorf("%w: the index of pack %s: reading an offset: %v", errCorrupt, p.name, err)
	}
	off := int64(binary.BigEndian.Uint32(b[:4]))
	if off&(1<<31) != 0 {
		i := off &^ (1 << 31)
		if i >= p.large {
			return 0, fmt.Errorf("%w: the index of pack %s: a large offset out of its table", errCorrupt, p.name)
		}
		if _, err := p.idx.ReadAt(b, idxNames+p.count*28+i*8); err != nil {
			return 0, fmt.Errorf("%w: the index of pack %s: reading an offset: %v", errCorrupt, p.name, err)
		}
		off = int64(binary.BigEndian.Uint64(b))
	}
	if off < 12 || off >= p.packSize-20 {
		return 0, fmt.Errorf("%w: the index of pack %s: an offset out of the pack", errCorrupt, p.name)
	}
	return off, nil
}

// withPrefix calls f with each name in the pack that starts with prefix,
// in order.
func (p *packIndex) withPrefix(prefix []byte, f func(plumbing.Hash)) error {
	lo, hi := int64(0), p.count
	if len(prefix) > 0 {
		lo, hi = p.bucket(prefix[0])
	}
	if lo >= hi {
		return nil
	}
	pos, _, err := p.search(prefix, lo, hi)
	if err != nil {
		return err
	}
	for pos < hi {
		end := min(pos+idxWindow, hi)
		b, err := p.names(p.scratch[:], pos, end)
		if err != nil {
			return err
		}
		for i := 0; i < len(b); i += 20 {
			if !bytes.HasPrefix(b[i:i+20], prefix) {
				return nil
			}
			f(plumbing.Hash(b[i : i+20]))
		}
		pos = end
	}
	return nil
}

// packHeader is an object's header in a pack.
type packHeader struct {
	typ  plumbing.ObjectType
	size int64         // of the object, or of a delta's instructions
	data int64         // offset of the zlib stream
	base int64         // an offset delta's base
	ref  plumbing.Hash // a reference delta's base
}

// header reads the header of the object at off.
func (p *packIndex) header(off int64) (packHeader, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: pack %s: object at %d: %s", errCorrupt, p.name, off, why)
	}
	b := p.scratch[:32]
	n, err := p.pack.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return packHeader{}, bad(err.Error())
	}
	buf := b[:n]
	if len(buf) == 0 {
		return packHeader{}, bad("beyond the end of the pack")
	}
	c := buf[0]
	h := packHeader{typ: plumbing.ObjectType((c >> 4) & 7), size: int64(c & 15)}
	i := 1
	for shift := 4; c&0x80 != 0; shift += 7 {
		if i >= len(buf) || shift > 56 {
			return packHeader{}, bad("its size does not end")
		}
		c = buf[i]
		i++
		h.size |= int64(c&0x7f) << shift
	}
	switch h.typ {
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
	case plumbing.OFSDeltaObject:
		if i >= len(buf) {
			return packHeader{}, bad("its base offset does not end")
		}
		c = buf[i]
		i++
		back := int64(c & 0x7f)
		for c&0x80 != 0 {
			if i >= len(buf) || back > 1<<55 {
				return packHeader{}, bad("its base offset does not end")
			}
			c = buf[i]
			i++
			back = (back+1)<<7 | int64(c&0x7f)
		}
		if back <= 0 || back > off-12 {
			return packHeader{}, bad("its base is not before it in the pack")
		}
		h.base = off - back
	case plumbing.REFDeltaObject:
		if i+20 > len(buf) {
			return packHeader{}, bad("its base name is cut")
		}
		copy(h.ref[:], buf[i:i+20])
		i += 20
	default:
		return packHeader{}, bad(fmt.Sprintf("an unknown type %d", h.typ))
	}
	h.data = off + int64(i)
	return h, nil
}

// baseCache keeps recently resolved delta bases, by pack and offset, up
// to limit bytes, dropping the least recently used.
type baseCache struct {
	limit, used int64
	order       list.List // of *cachedBase, most recent first
	byKey       map[baseKey]*list.Element
}

type baseKey struct {
	pack *packIndex
	off  int64
}

type cachedBase struct {
	key  baseKey
	typ  plumbing.ObjectType
	data []byte
}

func (c *baseCache) get(p *packIndex, off int64) (*cachedBase, bool) {
	e, ok := c.byKey[baseKey{p, off}]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedBase), true
}

func (c *baseCache) put(p *packIndex, off int64, typ plumbing.ObjectType, data []byte) {
	size := int64(len(data))
	k := baseKey{p, off}
	if size > c.limit/4 {
		return // one base should not evict every other
	}
	if c.byKey == nil {
		c.byKey = map[baseKey]*list.Element{}
	}
	if _, ok := c.byKey[k]; ok {
		return
	}
	c.byKey[k] = c.order.PushFront(&cachedBase{key: k, typ: typ, data: data})
	c.used += size
	for c.used > c.limit {
		last := c.order.Back()
		b := c.order.Remove(last).(*cachedBase)
		delete(c.byKey, b.key)
		c.used -= int64(len(b.data))
	}
}

func (c *baseCache) clear() {
	c.order.Init()
	c.byKey, c.used = nil, 0
}
