package compiler

import (
	"reflect"
	"unsafe"
)

// slab packs what the digests keep into large blocks of their own.
//
// A digest is made on a loader worker right after its document is parsed,
// from the parser's strings and the decoder's slices: small objects
// allocated between the node trees of the same documents, which are
// garbage as soon as the digest is taken. The collector does not move
// objects, so each kept string or slice pins the whole span it was
// allocated in: at 100,000 Connections, spans holding 146 MB of live
// objects took 313 MB of heap (docs/benchmarks.md, "The compiler's
// representation of documents"). Copied here instead, what lives until
// Compile ends sits in blocks nothing else shares, and the spans of the
// trees are freed whole.
//
// Strings go into byte blocks, which hold no pointers and cost the
// collector nothing to scan, and so do the objects the digests keep,
// each packed into one string (packed.go); every other value (the digests
// themselves) into a block of its own type. A block is never written again where it was handed out: a string
// is never modified, and a slice is handed out with its capacity cut to
// its length, so an append copies it elsewhere. A slab is not safe for
// concurrent use: the interner holds it under its lock.
type slab struct {
	bytes  []byte
	blocks map[reflect.Type]reflect.Value // a slice of each element type, with room after its length
}

const (
	// slabBytes is the size of a byte block, and slabBlock that of a
	// block of values: large enough that a block's span holds nothing
	// else, small enough that the last block's unused room is noise.
	slabBytes = 64 << 10
	slabBlock = 16 << 10
)

// str returns a copy of s in the slab.
func (sl *slab) str(s string) string {
	if len(s) == 0 || len(s) > slabBytes/16 {
		return s
	}
	if cap(sl.bytes)-len(sl.bytes) < len(s) {
		sl.bytes = make([]byte, 0, slabBytes)
	}
	n := len(sl.bytes)
	sl.bytes = append(sl.bytes, s...)
	return unsafe.String(&sl.bytes[n], len(s))
}

// strOf returns a copy of b as a string: in the slab, unless it is too
// long for a byte block.
func (sl *slab) strOf(b []byte) string {
	if len(b) > slabBytes/16 {
		return string(b)
	}
	return sl.str(unsafe.String(unsafe.SliceData(b), len(b)))
}

// slice returns n zero values of the slice type t, from t's block.
func (sl *slab) slice(t reflect.Type, n int) reflect.Value {
	size := int(t.Elem().Size())
	if n*size > slabBlock/4 {
		return reflect.MakeSlice(t, n, n)
	}
	b, ok := sl.blocks[t]
	if !ok || b.Cap()-b.Len() < n {
		if sl.blocks == nil {
			sl.blocks = map[reflect.Type]reflect.Value{}
		}
		b = reflect.MakeSlice(t, 0, max(slabBlock/max(size, 1), n))
	}
	l := b.Len()
	sl.blocks[t] = b.Slice(0, l+n)
	return b.Slice3(l, l+n, l+n)
}

// slabNew returns a pointer to a copy of x in sl.
func slabNew[T any](sl *slab, x T) *T {
	p := sl.slice(reflect.TypeFor[[]T](), 1).Index(0).Addr().Interface().(*T)
	*p = x
	return p
}

// slabSlice returns a copy of xs in sl, nil for nil.
func slabSlice[T any](sl *slab, xs []T) []T {
	if xs == nil {
		return nil
	}
	c := sl.slice(reflect.TypeFor[[]T](), len(xs)).Interface().([]T)
	copy(c, xs)
	return c
}
