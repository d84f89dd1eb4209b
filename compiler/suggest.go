package compiler

import "slices"

// suggest returns the candidate nearest to word when it is near enough to
// be a likely typo (an edit distance of at most a third of the word, and
// at least 1), or "" when none is. Ties go to the lexically first, so the
// suggestion is the same on every run.
func suggest(word string, candidates []string) string {
	limit := max(1, len(word)/3)
	best, bestD := "", limit+1
	sorted := slices.Clone(candidates)
	slices.Sort(sorted)
	for _, c := range sorted {
		if c == word {
			continue
		}
		if d := distance(word, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the optimal-string-alignment distance between a and b, by
// bytes: Levenshtein plus the swap of two neighbours, the commonest typo
// ("vsc" for "vcs").
func distance(a, b string) int {
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
