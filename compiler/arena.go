package compiler

import (
	"strings"
	"unsafe"
)

// arena hands out values of one type from chunks of their own.
//
// A digest is made on a loader worker right after its document is parsed,
// from the parser's strings and the decoder's slices: small objects
// allocated between the node trees of the same documents, which are
// garbage as soon as the digest is taken. The collector does not move
// objects, so each kept string or slice pins the whole span it was
// allocated in (docs/benchmarks.md, "The compiler's representation of
// documents"). Copied into chunks of their own, what lives until Compile
// ends sits in spans nothing else shares, and the spans of the trees are
// freed whole.
//
// A chunk is never written again where it was handed out: a slice is
// handed out with its capacity cut to its length, so an append copies it
// elsewhere. An arena is not safe for concurrent use: the interner holds
// its arenas under its lock.
type arena[T any] struct {
	chunk []T // with room after its length
}

// arenaChunk is the size in bytes of a chunk: large enough that a
// chunk's span holds nothing else, small enough that the last chunk's
// unused room is noise.
const arenaChunk = 16 << 10

// make returns n zero values from the arena, nil for n == 0: callers
// keep a nil list nil and an empty one empty themselves.
func (a *arena[T]) make(n int) []T {
	if n == 0 {
		return nil
	}
	size := max(int(unsafe.Sizeof(*new(T))), 1)
	if n*size > arenaChunk/4 {
		return make([]T, n)
	}
	if cap(a.chunk)-len(a.chunk) < n {
		a.chunk = make([]T, 0, arenaChunk/size)
	}
	l := len(a.chunk)
	a.chunk = a.chunk[:l+n]
	return a.chunk[l : l+n : l+n]
}

// new returns a pointer to a copy of x in the arena.
func (a *arena[T]) new(x T) *T {
	p := &a.make(1)[0]
	*p = x
	return p
}

// clone returns a copy of xs in the arena: nil for nil, empty for empty.
func (a *arena[T]) clone(xs []T) []T {
	if xs == nil {
		return nil
	}
	if len(xs) == 0 {
		return []T{}
	}
	c := a.make(len(xs))
	copy(c, xs)
	return c
}

// stringArena copies strings into byte chunks of their own, which hold no
// pointers and cost the collector nothing to scan.
type stringArena struct {
	bytes []byte
}

// stringChunk is the size of a byte chunk; a string longer than a
// sixteenth of it is copied on its own.
const stringChunk = 64 << 10

// str returns a copy of s in a byte chunk.
func (sc *stringArena) str(s string) string {
	if len(s) == 0 {
		return ""
	}
	if len(s) > stringChunk/16 {
		return strings.Clone(s)
	}
	if cap(sc.bytes)-len(sc.bytes) < len(s) {
		sc.bytes = make([]byte, 0, stringChunk)
	}
	n := len(sc.bytes)
	sc.bytes = append(sc.bytes, s...)
	return unsafe.String(&sc.bytes[n], len(s))
}
