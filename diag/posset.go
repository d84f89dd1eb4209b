package diag

import "slices"

// PosSet is a set of positions, for counting objects and documents once
// however many deploy units read them. A position usually packs into one
// word (a number for its file, its line, its column), kept in a slice
// sorted and compacted as it fills, so a set of hundreds of thousands
// costs about eight bytes per entry where a map of whole positions cost
// sixty. The zero value is not ready: use NewPosSet.
type PosSet struct {
	files  map[string]uint64
	packed []uint64
	// sorted is how many of packed, from the start, are sorted and
	// distinct.
	sorted int
	other  map[Pos]struct{}
}

// NewPosSet returns an empty set.
func NewPosSet() *PosSet {
	return &PosSet{files: map[string]uint64{}, other: map[Pos]struct{}{}}
}

// The packing: 24 bits of file number, 24 of line, 16 of column.
const (
	posFileBits   = 24
	posLineBits   = 24
	posColumnBits = 16
)

// Add puts pos in the set.
func (s *PosSet) Add(pos Pos) {
	id, ok := s.files[pos.File]
	if !ok {
		id = uint64(len(s.files))
		s.files[pos.File] = id
	}
	if id >= 1<<posFileBits || pos.Line < 0 || pos.Line >= 1<<posLineBits || pos.Column < 0 || pos.Column >= 1<<posColumnBits {
		s.other[pos] = struct{}{}
		return
	}
	if len(s.packed) == cap(s.packed) && len(s.packed) > 0 {
		// Full: drop the repeats before growing, so that adding one
		// position many times does not grow the set.
		s.compact()
		if len(s.packed) > cap(s.packed)/2 {
			s.packed = slices.Grow(s.packed, len(s.packed))
		}
	}
	s.packed = append(s.packed, id<<(posLineBits+posColumnBits)|uint64(pos.Line)<<posColumnBits|uint64(pos.Column))
}

func (s *PosSet) compact() {
	if s.sorted == len(s.packed) {
		return
	}
	slices.Sort(s.packed)
	s.packed = slices.Compact(s.packed)
	s.sorted = len(s.packed)
}

// Len is the number of distinct positions added.
func (s *PosSet) Len() int {
	s.compact()
	return len(s.packed) + len(s.other)
}
