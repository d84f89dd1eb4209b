package compiler

import (
	slashpath "path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// pathPattern is an ignore rule's path: a .gitignore-style pattern
// relative to the directory of the Config that gives it, matched against
// a diagnostic's file (as reported, relative to the working directory). A
// pattern that matches a directory matches every file under it.
type pathPattern struct {
	dir     string // the Config's directory, as reported; "." for the working directory
	pattern gitignore.Pattern
}

func newPathPattern(p, dir string) *pathPattern {
	return &pathPattern{dir: dir, pattern: gitignore.ParsePattern(p, nil)}
}

// pathDir is the directory of a reported file path.
func pathDir(file string) string { return slashpath.Dir(file) }

func (pp *pathPattern) match(file string) bool {
	rel := file
	if pp.dir != "." {
		var ok bool
		if rel, ok = strings.CutPrefix(file, pp.dir+"/"); !ok {
			return false
		}
	}
	parts := strings.Split(rel, "/")
	for i := 1; i <= len(parts); i++ {
		if pp.pattern.Match(parts[:i], i < len(parts)) == gitignore.Exclude {
			return true
		}
	}
	return false
}
