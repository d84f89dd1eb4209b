package argocd

import (
	"path"
	"strings"
)

// globMatch matches a slash-separated path against a glob whose "*"
// stays within one element and whose "**" spans any number, as an Argo
// CD git generator's paths and a directory application's include and
// exclude match.
func globMatch(glob, p string) bool {
	g, s := strings.Split(glob, "/"), strings.Split(p, "/")
	var match func(g, s []string) bool
	match = func(g, s []string) bool {
		if len(g) == 0 {
			return len(s) == 0
		}
		if g[0] == "**" {
			// A final ** names what lies below, not the directory
			// itself.
			start := 0
			if len(g) == 1 {
				start = 1
			}
			for i := start; i <= len(s); i++ {
				if match(g[1:], s[i:]) {
					return true
				}
			}
			return false
		}
		if len(s) == 0 {
			return false
		}
		ok, err := path.Match(g[0], s[0])
		return err == nil && ok && match(g[1:], s[1:])
	}
	return match(g, s)
}
