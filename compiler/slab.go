package compiler

import (
	"reflect"
	"slices"
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
// objects took 313 MB of heap (docs/benchmarks.md, "Digests packed
// apart from the parser's garbage"). Copied here instead, what lives until
// Compile ends sits in blocks nothing else shares, and the spans of the
// trees are freed whole.
//
// Strings go into byte blocks, which hold no pointers and cost the
// collector nothing to scan; every other value into a block of its own
// type. A block is never written again where it was handed out: a string
// is never modified, and a slice is handed out with its capacity cut to
// its length, so an append copies it elsewhere. A slab is not safe for
// concurrent use: the interner holds it under its lock.
type slab struct {
	bytes  []byte
	blocks map[reflect.Type]reflect.Value // a slice of each element type, with room after its length
	// lists are the lists of strings packed into the object packObject
	// packs, which it hands out again for a list equal to one of them or
	// to a run of one: an inject entry's hosts are most often the
	// Connection's, or some of them.
	lists [][]string
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

// packObject packs v, one object, as pack does, with each list of
// strings that repeats one packed before it in the object, or a run of
// one, sharing that one's memory. Its capacity is cut to its length as
// every list's is, so neither is ever written through the other.
func (sl *slab) packObject(v reflect.Value, keep func(string) (string, bool)) {
	sl.lists = sl.lists[:0]
	sl.pack(v, keep)
	clear(sl.lists[:cap(sl.lists)])
	sl.lists = sl.lists[:0]
}

// packedRun returns the run of a list packObject packed that equals xs.
func (sl *slab) packedRun(xs []string) ([]string, bool) {
	for _, l := range sl.lists {
		for i := 0; i+len(xs) <= len(l); i++ {
			if slices.Equal(l[i:i+len(xs)], xs) {
				return l[i : i+len(xs) : i+len(xs)], true
			}
		}
	}
	return nil, false
}

// pack rewrites v, which must be settable, so that every string, slice
// and pointer it holds, at any depth, is a copy in the slab. Unexported
// fields, maps and interfaces are left as they are: the decoded objects
// the digests keep have exported fields only, and maps only for the
// annotations that few documents carry. keep returns the copy to use for
// a string instead of the slab's, when it has one (an interned string).
func (sl *slab) pack(v reflect.Value, keep func(string) (string, bool)) {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if k, ok := keep(s); ok {
			v.SetString(k)
		} else {
			v.SetString(sl.str(s))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				sl.pack(f, keep)
			}
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		strs, isStrs := v.Addr().Interface().(*[]string)
		if isStrs && len(*strs) > 0 {
			if run, ok := sl.packedRun(*strs); ok {
				*strs = run
				return
			}
		}
		c := sl.slice(v.Type(), v.Len())
		reflect.Copy(c, v)
		for i := range c.Len() {
			sl.pack(c.Index(i), keep)
		}
		v.Set(c)
		if isStrs && len(*strs) > 0 {
			sl.lists = append(sl.lists, *strs)
		}
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		c := sl.slice(reflect.SliceOf(v.Type().Elem()), 1).Index(0)
		c.Set(v.Elem())
		sl.pack(c, keep)
		v.Set(c.Addr())
	}
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
