package diag

import "testing"

func TestPosSet(t *testing.T) {
	tests := map[string]struct {
		add  []Pos
		want int
	}{
		"empty": {want: 0},
		"one position twice": {
			add:  []Pos{{File: "a.yaml", Line: 3, Column: 1}, {File: "a.yaml", Line: 3, Column: 1}},
			want: 1,
		},
		"same line and column in two files": {
			add:  []Pos{{File: "a.yaml", Line: 3, Column: 1}, {File: "b.yaml", Line: 3, Column: 1}},
			want: 2,
		},
		"line and column do not bleed into each other": {
			// Packed without care, line 1 column 65536 and line 2
			// column 0 would be one word.
			add:  []Pos{{File: "a.yaml", Line: 1, Column: 1 << posColumnBits}, {File: "a.yaml", Line: 2, Column: 0}, {File: "a.yaml", Line: 2, Column: 0}},
			want: 2,
		},
		"past what packs, kept whole": {
			add: []Pos{
				{File: "a.yaml", Line: 1 << posLineBits, Column: 1},
				{File: "a.yaml", Line: 1 << posLineBits, Column: 1},
				{File: "a.yaml", Line: 0, Column: 1},
				{File: "a.yaml", Line: -1, Column: 1},
				{File: "a.yaml", Line: 5, Column: 1<<posColumnBits + 7},
			},
			want: 4,
		},
		"unknown positions": {
			add:  []Pos{{}, {}, {File: "-"}, {File: "-", Line: 1}},
			want: 3,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewPosSet()
			for _, p := range tt.add {
				s.Add(p)
			}
			if got := s.Len(); got != tt.want {
				t.Errorf("Len() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestPosSetManyFiles(t *testing.T) {
	s := NewPosSet()
	seen := map[Pos]bool{}
	for f := range 300 {
		for l := range 40 {
			p := Pos{File: string(rune('a'+f%26)) + "/" + string(rune('0'+f/26)) + ".yaml", Line: l * 997, Column: (f * l) % 70000}
			s.Add(p)
			seen[p] = true
		}
	}
	if s.Len() != len(seen) {
		t.Errorf("Len() = %d, want %d", s.Len(), len(seen))
	}
}

// TestPosSetRepeats: adding the same few positions many times, with Len
// read in between, counts each once and does not grow the set.
func TestPosSetRepeats(t *testing.T) {
	s := NewPosSet()
	for i := range 100000 {
		s.Add(Pos{File: "a.yaml", Line: i % 7, Column: 1})
		if i%9999 == 0 && s.Len() != min(i+1, 7) {
			t.Fatalf("after %d adds, Len() = %d", i+1, s.Len())
		}
	}
	if s.Len() != 7 {
		t.Errorf("Len() = %d, want 7", s.Len())
	}
	if cap(s.packed) > 64 {
		t.Errorf("the set grew to %d words for 7 positions", cap(s.packed))
	}
}
