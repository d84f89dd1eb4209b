package source

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// CodeConfigInvalid is the compiler's code for a Config it cannot accept;
// the loader reports with it a Config that is not the repository's
// root's.
const CodeConfigInvalid = "ConfigInvalid"

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

// readConfigs reads, before any walk, the Config that governs the paths:
// the keyhole.yaml (or keyhole.yml) at the root of the repository each
// path is in (repoRoot), whatever path is named, so that a Config a change
// adds deeper in the tree never stands in for the root's. The file is
// read as an input like any other, and its include and exclude patterns
// filter the walks. A Config anywhere else is refused (refuseConfigs).
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
		root := l.repoRoot(dir)
		if !slices.Contains(l.roots, root) {
			l.roots = append(l.roots, root)
		}
		cfg := l.rootConfig(root)
		if cfg == "" || l.seen[cfg] {
			continue
		}
		name := l.display(cfg, cfg)
		l.governing = append(l.governing, name)
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
			l.readFluxConfig(d, base)
			l.readArgoConfig(d, base)
		}
	}
}

// repoRoot is the root of the repository the path at dir is in, whose
// Config governs it: Options.Root when set; else the enclosing git
// working tree's top; else, outside one, the working directory, or the
// directory itself when it lies outside the working directory too.
func (l *loader) repoRoot(dir string) string {
	if l.opts.Root != "" {
		return l.osPath(l.opts.Root)
	}
	if root := l.gitRoot(dir); root != "" {
		return root
	}
	if within(l.dir, dir) {
		return l.dir
	}
	return dir
}

// rootConfig returns the Config file at root, "" when there is none or
// it is a link out of the repository (a walk that finds it says so).
func (l *loader) rootConfig(root string) string {
	for _, n := range configFileNames {
		p := filepath.Join(root, n)
		if fi, err := l.fsys.Stat(p); err == nil && fi.Mode().IsRegular() {
			if r, git := confinement(l.fsys, root); git && linkOutside(l.fsys, r, p) != "" {
				return ""
			}
			return p
		}
	}
	return ""
}

// refuseConfigs drops every Config document that is not the governing
// one's (readConfigs), each an error at its place: a keyhole.yaml in a
// subdirectory, one a kustomization lists, one on standard input. A
// change cannot bring a Config of its own, with a ceiling, excludes and
// ignores of its choosing, by adding one where the paths it names lead.
func (l *loader) refuseConfigs() {
	kept := l.docs[:0]
	for _, d := range l.docs {
		o := d.Object()
		if o.APIVersion != ConfigAPIVersion || o.Kind != ConfigKind || slices.Contains(l.governing, d.File) {
			kept = append(kept, d)
			continue
		}
		var where []string
		for _, r := range l.roots {
			where = append(where, filepath.ToSlash(l.display(filepath.Join(r, configFileNames[0]), filepath.Join(r, configFileNames[0]))))
		}
		root := "the repository's root"
		if len(where) > 0 {
			root = strings.Join(where, ", ")
		}
		l.diags = append(l.diags, diag.Diagnostic{Code: CodeConfigInvalid, Severity: diag.Error, Pos: d.Pos, Object: o,
			Message: fmt.Sprintf("a Config outside the repository's root is not read: the one Config is %s (the git working tree's top, or the working directory outside one), whatever paths are named, so that its ceiling, exclude and ignore govern every path; move these settings there, where its owners review them, and delete this one", root)})
	}
	clear(l.docs[len(kept):])
	l.docs = kept
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
