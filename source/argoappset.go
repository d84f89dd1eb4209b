package source

import (
	"cmp"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// An ApplicationSet's generators make its Applications as the Argo CD
// engine (source/argocd) makes them; each is read as an Application is
// (argocd.go). What a generator keyhole cannot read may deploy, and
// what is said of it, is the loader's.

// CodeGeneratorMatchesNothing is reported at an ApplicationSet's git
// generator one of whose paths matches nothing in this repository, the
// one its repoURL names: Argo CD makes no Application of it.
const CodeGeneratorMatchesNothing = "GeneratorMatchesNothing"

// CodeArgoCDUnread is reported where Argo CD makes Applications keyhole
// cannot know (the clusters a clusters generator reads that the
// repository does not declare readably, a template calling a function
// whose result changes on every run): they are not checked.
const CodeArgoCDUnread = "ArgoCDUnread"

// appSetUnits is the units of the Applications an ApplicationSet (set,
// declared by d) has its generators make from this repository, as the
// Argo CD engine makes them: git directories and files, a list, the
// clusters the repository declares, and a matrix of two of those.
func (l *loader) appSetUnits(set *yaml.Node, d *Document, ns string, srcRoots []string) []engineFound {
	spec := Lookup(set, "spec")
	tmpl := Lookup(spec, "template")
	gens := Lookup(spec, "generators")
	what := "Argo CD ApplicationSet " + ns + "/" + stringField(Lookup(set, "metadata"), "name")
	if tmpl == nil || gens == nil || gens.Kind != yaml.SequenceNode {
		return nil
	}
	if l.opts.Engines.Argo == nil {
		return []engineFound{{pos: diag.Pos{File: d.File, Line: gens.Line, Column: gens.Column}, err: what + ": " + errNoArgo.Error()}}
	}
	tp := Lookup(spec, "templatePatch")
	in := AppSetInput{Roots: srcRoots, Clusters: func() []ArgoCluster { return l.clusterSecrets(srcRoots[0]) }}
	var out []engineFound
	for _, g := range l.opts.Engines.Argo.ApplicationSet(Host{l}, spec, in) {
		pos := diag.Pos{File: d.File, Line: g.Line, Column: g.Column}
		for _, u := range g.Unmatched {
			msg := fmt.Sprintf("%s: its git generator's path %s matches nothing in this repository", what, u.Path)
			out = append(out, engineFound{pos: pos,
				skip:    msg + ", so it makes no Application here; if " + cmp.Or(u.RepoURL, "its repoURL") + " is another repository, that one's are out of reach",
				ownWarn: msg + ", the one its repoURL " + u.RepoURL + " names, so Argo CD makes no Application of it: a typo, or a directory not yet committed",
				repo:    repoKey(u.RepoURL, u.Revision)})
		}
		if stop := g.Stop; stop != nil {
			var claim []string
			if stop.Severity != diag.Error {
				claim = l.templateDirs(tmpl, srcRoots[0])
			}
			if stop.Severity == diag.Warning {
				// What keyhole cannot know matters only where the
				// Applications would build something of keyhole's.
				switch {
				case tp == nil && !templateBuildsRepo(tmpl):
					stop = appSetSkip(stop.Message + "; its Applications build from a chart repository or a plugin, out of reach in any case")
				case !l.connections:
					stop = appSetSkip(stop.Message + "; nothing keyhole reads names keyhole's kinds")
				case len(claim) > 0 && !slices.ContainsFunc(claim, l.kustomizationMatters):
					stop = appSetSkip(stop.Message + "; nothing in the directories its template builds names keyhole's kinds or declares a Secret")
				}
			}
			f := stopFound(pos, what, stop)
			f.claim = claim
			out = append(out, f)
			continue
		}
		for _, app := range g.Apps {
			name := stringField(Lookup(app, "metadata"), "name")
			// The controller makes each Application in the
			// ApplicationSet's namespace, whatever the template says.
			for _, f := range l.appUnits(app, d, ns, name, srcRoots) {
				if f.unit != nil {
					f.unit.Decl = pos
				}
				out = append(out, f)
			}
		}
		if g.Failed != nil {
			out = append(out, stopFound(pos, what, g.Failed))
		}
	}
	return out
}

// appSetSkip is a stop saying a generator's Applications are out of
// reach.
func appSetSkip(msg string) *AppSetStop { return &AppSetStop{Severity: diag.Info, Message: msg} }

// templateDirs are the directories under root the ApplicationSet
// template tmpl's sources may build, whatever its parameters: each
// source's path with every {{...}} read as "*", when some element of it
// is written out (envs/{{.name}}, not {{.path}}).
func (l *loader) templateDirs(tmpl *yaml.Node, root string) []string {
	spec := Lookup(tmpl, "spec")
	srcs := []*yaml.Node{Lookup(spec, "source")}
	if ss := Lookup(spec, "sources"); ss != nil && ss.Kind == yaml.SequenceNode {
		srcs = append(srcs, ss.Content...)
	}
	var globs []string
	for _, s := range srcs {
		p := strings.Trim(path.Clean("/"+stringField(s, "path")), "/")
		g := templateTag.ReplaceAllString(p, "*")
		if p != "" && p != "." && slices.ContainsFunc(strings.Split(g, "/"), func(e string) bool { return !strings.Contains(e, "*") }) {
			globs = append(globs, g)
		}
	}
	if len(globs) == 0 {
		return nil
	}
	var out []string
	for _, d := range l.allDirs(root) {
		if slices.ContainsFunc(globs, func(g string) bool { return globMatch(g, d) }) {
			out = append(out, filepath.Join(root, filepath.FromSlash(d)))
		}
	}
	return out
}

// templateBuildsRepo reports whether the ApplicationSet template tmpl
// has a source that may build a directory of a repository: not a chart
// from a chart repository, a plugin or a source of values alone.
func templateBuildsRepo(tmpl *yaml.Node) bool {
	spec := Lookup(tmpl, "spec")
	srcs := []*yaml.Node{Lookup(spec, "source")}
	if ss := Lookup(spec, "sources"); ss != nil && ss.Kind == yaml.SequenceNode {
		srcs = append(srcs, ss.Content...)
	}
	return slices.ContainsFunc(srcs, func(s *yaml.Node) bool {
		return s != nil && Lookup(s, "chart") == nil && Lookup(s, "plugin") == nil && (Lookup(s, "ref") == nil || stringField(s, "path") != "")
	})
}

// templateTag is a template's {{...}}.
var templateTag = regexp.MustCompile(`\{\{.*?\}\}`)

// stopFound is what is said, at pos, of a generator of the
// ApplicationSet what that makes nothing keyhole reads.
func stopFound(pos diag.Pos, what string, s *AppSetStop) engineFound {
	switch s.Severity {
	case diag.Error:
		return engineFound{pos: pos, err: what + ": " + s.Message}
	case diag.Warning:
		return engineFound{pos: pos, warn: what + ": " + s.Message + "; its Applications are not checked (" + s.Advice + ")", code: CodeArgoCDUnread}
	}
	return engineFound{pos: pos, skip: what + ": " + s.Message + "; this generator's Applications are not checked"}
}

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
	var walk func(dir string)
	walk = func(dir string) {
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

// globMatch matches a slash-separated path against a glob whose "*"
// stays within one element and whose "**" spans any number.
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
