package suggest

import (
	"slices"
	"strings"
)

// Merge is several refused paths covered by one prefix.
type Merge struct {
	Prefix string   `json:"prefix"`
	Paths  []string `json:"paths"`
}

// minParent is how many segments the parent of sibling paths must have
// for them to merge into it: /repos/acme/a and /repos/acme/b merge into
// /repos/acme, /repos/acme and /repos/other do not merge into /repos.
const minParent = 2

// Prefixes returns the narrowest path prefixes that cover paths (sorted,
// distinct): each path on its own, except that siblings (paths with the
// same parent, of at least minParent segments) merge into their parent,
// which merges reports. A prefix covered by another is dropped. "/"
// comes out only when "/" itself is among the paths.
func Prefixes(paths []string) (prefixes []string, merges []Merge) {
	clusters := map[string][]string{}
	var keys []string
	for _, p := range paths {
		k := clusterKey(p)
		if _, ok := clusters[k]; !ok {
			keys = append(keys, k)
		}
		clusters[k] = append(clusters[k], p)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ps := clusters[k]
		if len(ps) == 1 {
			prefixes = append(prefixes, ps[0])
			continue
		}
		pre := commonPrefix(ps)
		prefixes = append(prefixes, pre)
		merges = append(merges, Merge{Prefix: pre, Paths: ps})
	}
	slices.Sort(prefixes)
	prefixes = slices.Compact(prefixes)
	var kept []string
	for _, p := range prefixes {
		if !slices.ContainsFunc(prefixes, func(q string) bool { return q != p && covers(q, p) }) {
			kept = append(kept, p)
		}
	}
	// A merge whose prefix another covers is reported under that one.
	merges = slices.DeleteFunc(merges, func(m Merge) bool { return !slices.Contains(kept, m.Prefix) })
	return kept, merges
}

// segments splits a path into its segments: "/a/b" is [a b], "/" none.
func segments(p string) []string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// clusterKey is the parent a path merges into, or the path itself.
func clusterKey(p string) string {
	s := segments(p)
	if len(s)-1 < minParent {
		return p
	}
	return "/" + strings.Join(s[:len(s)-1], "/")
}

// commonPrefix is the longest prefix of whole segments the paths share.
func commonPrefix(ps []string) string {
	common := segments(ps[0])
	for _, p := range ps[1:] {
		s := segments(p)
		n := 0
		for n < len(common) && n < len(s) && common[n] == s[n] {
			n++
		}
		common = common[:n]
	}
	return "/" + strings.Join(common, "/")
}

// covers reports whether prefix q matches path p as the proxy's
// pathPrefixes do: whole segments.
func covers(q, p string) bool {
	if q == "/" || q == p {
		return true
	}
	return strings.HasPrefix(p, strings.TrimSuffix(q, "/")+"/")
}
