package diag

import (
	"slices"
	"strings"
)

// Suggest returns the candidate closest to word when it is close enough to
// be a likely typo, for a message's "did you mean": the same name in
// another case, or one within an optimal-string-alignment distance of a
// third of the shorter name (at least one edit), so "hsots" finds "hosts"
// and "vsc" finds "vcs". It returns "" when none is close, and never word
// itself. Ties go to the lexically first candidate, so the suggestion is
// the same on every run whatever order the candidates come in.
func Suggest(word string, candidates []string) string {
	sorted := slices.Clone(candidates)
	slices.Sort(sorted)
	best, bestD := "", -1
	for _, c := range sorted {
		if c == word {
			continue
		}
		if strings.EqualFold(c, word) {
			return c
		}
		d := editDistance(strings.ToLower(word), strings.ToLower(c))
		limit := max(1, min(len(word), len(c))/3)
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// Distance is the optimal string alignment distance of a and b, as
// Suggest measures it.
func Distance(a, b string) int { return editDistance(a, b) }

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and swaps of two neighbouring bytes each cost
// one.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		// Names are short; a long word is nothing's misspelling and must
		// not cost quadratic time.
		return max(len(a), len(b))
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
