package source

import (
	"cmp"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// An ApplicationSet's generators make its Applications as the Argo CD
// engine (source/argocd) makes them, each read as an Application is.
// The codes it reports stay with the loader's table of codes, and so
// do the repository's tree as generators read it (allDirs, visitTree)
// and the key a source's repository is compared by (repoKey), which the
// loader's revisions and Flux's sources use too.

// CodeGeneratorMatchesNothing is reported at an ApplicationSet's git
// generator one of whose paths matches nothing in this repository, the
// one its repoURL names: Argo CD makes no Application of it.
const CodeGeneratorMatchesNothing = "GeneratorMatchesNothing"

// CodeArgoCDUnread is reported where Argo CD makes Applications keyhole
// cannot know (the clusters a clusters generator reads that the
// repository does not declare readably, a template calling a function
// whose result changes on every run): they are not checked.
const CodeArgoCDUnread = "ArgoCDUnread"

// allDirs lists the directories under base (relative, slash-separated),
// sorted; walked once for every generator that asks.
func (l *loader) allDirs(base string) []string {
	if out, ok := l.argoDirs[base]; ok {
		return out
	}
	if l.argoDirs == nil {
		l.argoDirs = map[string][]string{}
	}
	var out []string
	defer func() { l.argoDirs[base] = out }()
	l.visitTree(base, func(rel string, fi fs.FileInfo) bool {
		if !fi.IsDir() {
			return false
		}
		out = append(out, rel)
		return true
	})
	slices.Sort(out)
	return out
}

// visitTree calls visit for each entry under root but hidden ones, in
// order, with its path relative to root (slash-separated); it descends
// into a directory when visit returns true for it.
func (l *loader) visitTree(root string, visit func(rel string, fi fs.FileInfo) bool) {
	guard := l.guardListing(root)
	var walk func(dir string)
	walk = func(dir string) {
		key, ok := guard.enter(dir)
		if !ok {
			return
		}
		defer guard.leave(key)
		entries, err := l.fsys.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			full := filepath.Join(dir, e.Name())
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			fi, err := l.fsys.Stat(full)
			if err != nil {
				continue
			}
			if visit(filepath.ToSlash(relOrAbs(root, full)), fi) && fi.IsDir() {
				walk(full)
			}
		}
	}
	walk(root)
}

// repoKey is how an Argo CD source's repository and revision are
// compared: the repoURL without scheme, user, ".git" or a trailing "/",
// in lower case (git@host:org/repo and https://host/org/repo are one),
// and the revision, HEAD when none is set.
func repoKey(repoURL, revision string) string {
	if repoURL == "" {
		return ""
	}
	u := strings.ToLower(strings.TrimSpace(repoURL))
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	} else if at, rest, ok := strings.Cut(u, "@"); ok && !strings.Contains(at, "/") {
		u = strings.Replace(rest, ":", "/", 1) // scp-like: git@host:org/repo
	}
	if at := strings.Index(u, "@"); at >= 0 && at < strings.Index(u+"/", "/") {
		u = u[at+1:]
	}
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	return u + "@" + cmp.Or(revision, "HEAD")
}
