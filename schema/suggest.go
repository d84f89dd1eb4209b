package schema

import "strings"

// suggest returns the known field closest to an unknown one, when it is
// close enough to be a likely misspelling: a different case, or an edit
// distance of at most a third of the name (at least one edit).
func suggest(unknown string, known []string) (string, bool) {
	best, bestD := "", -1
	for _, k := range known {
		if strings.EqualFold(k, unknown) {
			return k, true
		}
		d := editDistance(strings.ToLower(unknown), strings.ToLower(k))
		limit := max(1, min(len(unknown), len(k))/3)
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = k, d
		}
	}
	return best, bestD >= 0
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of adjacent bytes each cost
// one, so "hsots" is one edit from "hosts".
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		// Field names are short; a long key is nothing's misspelling and
		// must not cost quadratic time.
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
