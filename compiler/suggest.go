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

// distance is the Levenshtein distance between a and b, by bytes.
func distance(a, b string) int {
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
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
