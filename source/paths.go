package source

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"go.yaml.in/yaml/v3"
)

// The repository's settings: one document of this apiVersion and kind,
// conventionally keyhole.yaml at the repository's root. The compiler owns
// what it means; the loader reads its include and exclude patterns,
// which it needs before it walks.
const (
	ConfigAPIVersion = "keyhole.dev/v1alpha1"
	ConfigKind       = "Config"
)

// configFileNames are the names under which the loader looks for the
// Config before it walks.
var configFileNames = []string{"keyhole.yaml", "keyhole.yml"}

// pathFilter says which paths a walk reads: not those an exclude pattern
// matches and, when there are include patterns, only those an include
// pattern matches (or that lie under a directory one matches). Patterns
// are .gitignore's, each relative to the directory it was given for (the
// working directory for --exclude, the Config's directory for its own).
// Matching is on absolute path elements, so patterns of several bases
// mix.
type pathFilter struct {
	exclude []gitignore.Pattern
	include []gitignore.Pattern
}

// parsePatterns parses .gitignore-style patterns relative to base, an
// absolute directory. Blank lines and comments are skipped as in a
// .gitignore.
func parsePatterns(lines []string, base string) []gitignore.Pattern {
	var out []gitignore.Pattern
	domain := elements(base)
	for _, line := range lines {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, gitignore.ParsePattern(line, domain))
	}
	return out
}

// elements splits an absolute path into its elements.
func elements(abs string) []string {
	var out []string
	for _, e := range strings.Split(filepath.ToSlash(abs), "/") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

// excluded reports whether an exclude pattern matches the path.
func (f *pathFilter) excluded(abs string, isDir bool) bool {
	if f == nil || len(f.exclude) == 0 {
		return false
	}
	return gitignore.NewMatcher(f.exclude).Match(elements(abs), isDir)
}

// included reports whether the path may be read under the include
// patterns: always when there are none; otherwise when one matches the
// path or a directory above it.
func (f *pathFilter) included(abs string, isDir bool) bool {
	if f == nil || len(f.include) == 0 {
		return true
	}
	m := gitignore.NewMatcher(f.include)
	parts := elements(abs)
	for i := 1; i <= len(parts); i++ {
		if m.Match(parts[:i], i < len(parts) || isDir) {
			return true
		}
	}
	return false
}

// readConfigs reads, before any walk, the Config that governs each
// path: the keyhole.yaml (or keyhole.yml) in the path's directory or the
// nearest one above it, up to the enclosing git working tree's root (or,
// outside one, the working directory). The file is read as an input like
// any other, and its include and exclude patterns filter the walks.
func (l *loader) readConfigs(paths []string) {
	for _, p := range paths {
		if p == "-" {
			continue
		}
		abs := l.osPath(p)
		fi, err := l.fsys.Stat(abs)
		if err != nil {
			continue // Load reports it
		}
		dir := abs
		if !fi.IsDir() {
			dir = filepath.Dir(abs)
		}
		cfg := l.nearestConfig(dir)
		if cfg == "" || l.seen[cfg] {
			continue
		}
		name := l.display(cfg, cfg)
		before := len(l.docs)
		l.readFile(cfg, name, false)
		for _, d := range l.docs[before:] {
			o := d.Object()
			if o.APIVersion != ConfigAPIVersion || o.Kind != ConfigKind {
				continue
			}
			base := filepath.Dir(cfg)
			l.paths.exclude = append(l.paths.exclude, parsePatterns(stringList(Lookup(d.Node, "exclude")), base)...)
			l.paths.include = append(l.paths.include, parsePatterns(stringList(Lookup(d.Node, "include")), base)...)
		}
	}
}

// nearestConfig returns the Config file in dir or the nearest directory
// above it, up to the boundary readConfigs describes; "" when none.
func (l *loader) nearestConfig(dir string) string {
	boundary := l.gitRoot(dir)
	if boundary == "" {
		boundary = dir
		if rel, err := filepath.Rel(l.dir, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			boundary = l.dir
		}
	}
	for d := dir; ; {
		for _, n := range configFileNames {
			p := filepath.Join(d, n)
			if fi, err := l.fsys.Stat(p); err == nil && fi.Mode().IsRegular() {
				if root, git := confinement(l.fsys, d); git && linkOutside(l.fsys, root, p) != "" {
					return "" // not followed: a walk that finds it says so
				}
				return p
			}
		}
		parent := filepath.Dir(d)
		if d == boundary || parent == d {
			return ""
		}
		d = parent
	}
}

// gitRoot returns the git working tree enclosing dir, or "".
func (l *loader) gitRoot(dir string) string {
	for d := dir; ; {
		if _, err := l.fsys.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// stringList returns the string scalars of a sequence node.
func stringList(n *yaml.Node) []string {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	var out []string
	for _, e := range n.Content {
		if e.Kind == yaml.ScalarNode && e.ShortTag() == "!!str" {
			out = append(out, e.Value)
		}
	}
	return slices.Clip(out)
}
