package source

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// An ApplicationSet's generators make parameter sets from the
// repository (git directories and files, a list, a matrix of two) or
// from the cluster Secrets it declares (clusters, argoclusters.go); its
// template, filled with each set and patched with its templatePatch
// (argotemplate.go), is one Application each. See docs/inputs.md.

// CodeGeneratorMatchesNothing is reported at an ApplicationSet's git
// generator one of whose paths matches nothing in this repository, the
// one its repoURL names: Argo CD makes no Application of it.
const CodeGeneratorMatchesNothing = "GeneratorMatchesNothing"

// CodeArgoCDUnread is reported where Argo CD makes Applications keyhole
// cannot know (the clusters a clusters generator reads that the
// repository does not declare readably, a template calling a function
// whose result changes on every run): they are not checked.
const CodeArgoCDUnread = "ArgoCDUnread"

// genStop is why a generator makes no parameter sets keyhole can read.
type genStop struct {
	msg string
	// advice, for a warning, says what would make it readable.
	advice string
	sev    diag.Severity // Info: out of reach; Warning: unknown; Error: the controller refuses it
}

func genSkip(msg string) *genStop { return &genStop{msg: msg, sev: diag.Info} }
func genUnread(msg, advice string) *genStop {
	return &genStop{msg: msg, advice: advice, sev: diag.Warning}
}
func genError(msg string) *genStop { return &genStop{msg: msg, sev: diag.Error} }

// appSetRun is the reading of one ApplicationSet's generator.
type appSetRun struct {
	t        appSetTmpl
	srcRoots []string
	pos      diag.Pos // the generator's
	what     string   // "Argo CD ApplicationSet NS/NAME"
	// notes are what is said of the generator besides its Applications
	// (a git path that matches nothing).
	notes []engineFound
}

// appSetUnits is the units of the Applications an ApplicationSet (set,
// declared by d) has its generators make from this repository: git
// directories and files, a list, the clusters the repository declares,
// and a matrix of two of those.
func (l *loader) appSetUnits(set *yaml.Node, d *Document, ns string, srcRoots []string) []engineFound {
	spec := Lookup(set, "spec")
	tmpl := Lookup(spec, "template")
	t := appSetTemplating(spec)
	gens := Lookup(spec, "generators")
	what := "Argo CD ApplicationSet " + ns + "/" + stringField(Lookup(set, "metadata"), "name")
	if tmpl == nil || gens == nil || gens.Kind != yaml.SequenceNode {
		return nil
	}
	tp := Lookup(spec, "templatePatch")
	var out []engineFound
	for _, g := range gens.Content {
		run := &appSetRun{t: t, srcRoots: srcRoots, pos: diag.Pos{File: d.File, Line: g.Line, Column: g.Column}, what: what}
		pos := run.pos
		params, stop := l.generatorParams(run, g, 0)
		out = append(out, run.notes...)
		if stop != nil {
			var claim []string
			if stop.sev != diag.Error {
				claim = l.templateDirs(tmpl, srcRoots[0])
			}
			if stop.sev == diag.Warning {
				// What keyhole cannot know matters only where the
				// Applications would build something of keyhole's.
				switch {
				case tp == nil && !templateBuildsRepo(tmpl):
					stop = genSkip(stop.msg + "; its Applications build from a chart repository or a plugin, out of reach in any case")
				case !l.connections:
					stop = genSkip(stop.msg + "; nothing keyhole reads names keyhole's kinds")
				case len(claim) > 0 && !slices.ContainsFunc(claim, l.kustomizationMatters):
					stop = genSkip(stop.msg + "; nothing in the directories its template builds names keyhole's kinds or declares a Secret")
				}
			}
			f := stopFound(pos, what, stop)
			f.claim = claim
			out = append(out, f)
			continue
		}
		for _, p := range params {
			app, err := t.fill(tmpl, p)
			if err == nil && tp != nil {
				app, err = t.patch(app, tp, p)
			}
			if err != nil {
				if stop := changing(err); stop != nil {
					out = append(out, stopFound(pos, what, stop))
					break
				}
				out = append(out, engineFound{pos: pos, err: fmt.Sprintf("%s: its template cannot be filled for %s: %v", what, paramsNamed(p), err)})
				break
			}
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
	}
	return out
}

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

// changing is the stop a template error calling a function whose result
// changes on every run makes, or nil for any other error.
func changing(err error) *genStop {
	var ce changingError
	if !errors.As(err, &ce) {
		return nil
	}
	return genUnread("its template calls "+ce.name+", whose value differs on every run; keyhole does not evaluate it, so which Applications it makes is not known",
		"fill that value from a generator's parameter to have them checked")
}

// stopFound is what is said, at pos, of a generator of the
// ApplicationSet what that makes nothing keyhole reads.
func stopFound(pos diag.Pos, what string, s *genStop) engineFound {
	switch s.sev {
	case diag.Error:
		return engineFound{pos: pos, err: what + ": " + s.msg}
	case diag.Warning:
		return engineFound{pos: pos, warn: what + ": " + s.msg + "; its Applications are not checked (" + s.advice + ")", code: CodeArgoCDUnread}
	}
	return engineFound{pos: pos, skip: what + ": " + s.msg + "; this generator's Applications are not checked"}
}

// paramsNamed names a generator's parameter set in a message: by its
// path, or by its keys and values, sorted.
func paramsNamed(p map[string]any) string {
	if v, ok := p["path"]; ok {
		if s, ok := v.(string); ok {
			return s
		}
		if m, ok := v.(map[string]any); ok {
			return fmt.Sprint(m["path"])
		}
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		kv = append(kv, fmt.Sprintf("%s=%v", k, p[k]))
	}
	return "{" + strings.Join(kv, ", ") + "}"
}

// generatorParams is the parameter sets the ApplicationSet generator g
// makes, as the ApplicationSet controller makes them and as its
// selector keeps them, or why it makes none here. depth counts the
// matrices around g.
func (l *loader) generatorParams(run *appSetRun, g *yaml.Node, depth int) ([]map[string]any, *genStop) {
	git, list, matrix, clusters := Lookup(g, "git"), Lookup(g, "list"), Lookup(g, "matrix"), Lookup(g, "clusters")
	for _, n := range []*yaml.Node{git, list, clusters} {
		if Lookup(n, "template") != nil {
			return nil, genSkip("a generator's own template is not applied")
		}
	}
	var params []map[string]any
	var stop *genStop
	switch {
	case git != nil:
		params, stop = l.gitGenerator(run, git)
		if stop == nil {
			params, stop = generatorValues(run.t, git, params)
		}
	case list != nil:
		params, stop = listGenerator(list, run.t.goTemplate)
	case clusters != nil:
		params, stop = l.clustersGenerator(run, clusters)
		if stop == nil {
			params, stop = generatorValues(run.t, clusters, params)
		}
		if stop == nil && boolField(clusters, "flatList") {
			items := make([]any, len(params))
			for i, p := range params {
				items[i] = p
			}
			params = []map[string]any{{"clusters": items}}
		}
	case matrix != nil:
		params, stop = l.matrixGenerator(run, matrix, depth)
	default:
		kind := "an empty"
		if g.Kind == yaml.MappingNode && len(g.Content) > 0 {
			kind = "the " + g.Content[0].Value
		}
		return nil, genSkip("only git, list, clusters and matrix generators are read, not " + kind + " generator")
	}
	if stop != nil {
		return nil, stop
	}
	if sel := Lookup(g, "selector"); sel != nil {
		var err error
		if params, err = selectParams(sel, params); err != nil {
			return nil, genError(err.Error())
		}
	}
	return params, nil
}

// listGenerator is the parameter sets of a list generator: its elements,
// and those its elementsYaml holds. Without goTemplate every value must
// be a string, but a map of strings under values (values.KEY), as the
// controller requires.
func listGenerator(list *yaml.Node, goTemplate bool) ([]map[string]any, *genStop) {
	var elems []map[string]any
	if e := Lookup(list, "elements"); e != nil {
		if e.Decode(&elems) != nil {
			return nil, genError("its list generator's elements are not a list of mappings")
		}
	}
	if s := stringField(list, "elementsYaml"); s != "" {
		var more []map[string]any
		if yaml.Unmarshal([]byte(s), &more) != nil {
			return nil, genError("its list generator's elementsYaml is not a YAML list of mappings")
		}
		elems = append(elems, more...)
	}
	if goTemplate {
		return elems, nil
	}
	out := make([]map[string]any, 0, len(elems))
	for _, e := range elems {
		p := map[string]any{}
		for k, v := range e {
			if m, ok := v.(map[string]any); ok && k == "values" {
				for vk, vv := range m {
					s, ok := vv.(string)
					if !ok {
						return nil, genError(fmt.Sprintf("its list generator's values.%s is not a string, which the controller refuses without goTemplate", vk))
					}
					p["values."+vk] = s
				}
				continue
			}
			s, ok := v.(string)
			if !ok {
				return nil, genError(fmt.Sprintf("its list generator's %s is not a string, which the controller refuses without goTemplate", k))
			}
			p[k] = s
		}
		out = append(out, p)
	}
	return out, nil
}

// matrixGenerator is the parameter sets of a matrix: each set of its
// first generator joined with each set of its second, which may name
// the first's parameters (filled in before it runs). Without goTemplate
// a key both sets hold with two values is refused, as the controller
// refuses it; with it, the two are merged, the first's values winning.
func (l *loader) matrixGenerator(run *appSetRun, m *yaml.Node, depth int) (out []map[string]any, stop *genStop) {
	gens := Lookup(m, "generators")
	if gens == nil || gens.Kind != yaml.SequenceNode || len(gens.Content) != 2 {
		return nil, genError("a matrix generator must have exactly two generators")
	}
	if depth > 0 {
		return nil, genSkip("a matrix inside a matrix is not read")
	}
	first, stop := l.generatorParams(run, gens.Content[0], depth+1)
	if stop != nil {
		return nil, stop
	}
	second := gens.Content[1]
	for _, a := range first {
		g := second
		if strings.Contains(string(nodeBytes(second)), "{{") {
			filled, err := run.t.fill(second, a)
			if err != nil {
				if stop := changing(err); stop != nil {
					return nil, stop
				}
				return nil, genError(fmt.Sprintf("its matrix's second generator cannot be filled for %s: %v", paramsNamed(a), err))
			}
			g = filled
		}
		bs, stop := l.generatorParams(run, g, depth+1)
		if stop != nil {
			return nil, stop
		}
		if len(out)+len(bs) > maxAppSetParams {
			return nil, genError(fmt.Sprintf("its matrix makes more than %d Applications, more than keyhole reads of one generator", maxAppSetParams))
		}
		for _, b := range bs {
			if run.t.goTemplate {
				out = append(out, mergeParams(b, a))
				continue
			}
			p := maps.Clone(a)
			for k, v := range b {
				if cur, ok := p[k]; ok && fmt.Sprint(cur) != fmt.Sprint(v) {
					return nil, genError(fmt.Sprintf("its matrix's generators both give %s, with two values (%v and %v)", k, cur, v))
				}
				p[k] = v
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// mergeParams is base with over merged in, over's values winning, maps
// merged key by key (as mergo.Merge WithOverride merges them).
func mergeParams(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	for k, v := range over {
		bm, ok1 := out[k].(map[string]any)
		om, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = mergeParams(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}

// maxAppSetParams bounds the Applications one generator makes: a matrix
// of two long lists (or of every directory twice) grows as their
// product.
const maxAppSetParams = 10000

// generatorValues adds the values of a generator (the field of its
// kind) to each of its parameter sets, filled with that set's
// parameters: values.KEY, or a values map with goTemplate.
func generatorValues(t appSetTmpl, gen *yaml.Node, params []map[string]any) ([]map[string]any, *genStop) {
	vals := Lookup(gen, "values")
	if vals == nil {
		return params, nil
	}
	var m map[string]string
	if vals.Kind != yaml.MappingNode || vals.Decode(&m) != nil {
		return nil, genError("a generator's values must be a mapping of strings")
	}
	for i, p := range params {
		filled := map[string]any{}
		for k, v := range m {
			s, err := t.render(v, p)
			if err != nil {
				if stop := changing(err); stop != nil {
					return nil, stop
				}
				return nil, genError(fmt.Sprintf("a generator's values cannot be filled for %s: %v", paramsNamed(p), err))
			}
			filled[k] = s
		}
		p = maps.Clone(p)
		if t.goTemplate {
			p["values"] = filled
		} else {
			for k, v := range filled {
				p["values."+k] = v
			}
		}
		params[i] = p
	}
	return params, nil
}

// nodeBytes is n as YAML, or nil.
func nodeBytes(n *yaml.Node) []byte {
	b, _ := yaml.Marshal(n)
	return b
}

// gitGenerator lists the parameters of a git generator's directories or
// files, found under the repository: named (the directory named on the
// command line) and root (the repository's root, where the generator's
// paths are relative to, when they match there). A path that matches
// nothing is said once: a warning when the generator's repoURL is this
// repository (Argo CD makes nothing of it), else a note.
func (l *loader) gitGenerator(run *appSetRun, git *yaml.Node) ([]map[string]any, *genStop) {
	root, named := run.srcRoots[0], run.srcRoots[len(run.srcRoots)-1]
	prefix := stringField(git, "pathParamPrefix")
	var out []map[string]any
	var unmatched []string
	if dirs := Lookup(git, "directories"); dirs != nil && dirs.Kind == yaml.SequenceNode {
		var include, exclude []string
		for _, e := range dirs.Content {
			if boolField(e, "exclude") {
				exclude = append(exclude, stringField(e, "path"))
			} else {
				include = append(include, stringField(e, "path"))
			}
		}
		base := root
		all := l.allDirs(base)
		if !slices.ContainsFunc(all, func(d string) bool {
			return slices.ContainsFunc(include, func(g string) bool { return globMatch(g, d) })
		}) && named != root {
			base = named
			all = l.allDirs(base)
		}
		for _, g := range include {
			if !slices.ContainsFunc(all, func(d string) bool { return globMatch(g, d) }) {
				unmatched = append(unmatched, g)
			}
		}
		for _, rel := range all {
			if slices.ContainsFunc(include, func(g string) bool { return globMatch(g, rel) }) &&
				!slices.ContainsFunc(exclude, func(g string) bool { return globMatch(g, rel) }) {
				out = append(out, pathParams(rel, "", run.t.goTemplate, prefix))
			}
		}
	} else if files := Lookup(git, "files"); files != nil && files.Kind == yaml.SequenceNode {
		var include, exclude []string
		for _, e := range files.Content {
			if boolField(e, "exclude") {
				exclude = append(exclude, stringField(e, "path"))
			} else {
				include = append(include, stringField(e, "path"))
			}
		}
		matched := map[string]bool{}
		for _, b := range []string{root, named} {
			for _, f := range walkAll(l.fsys, b, &l.paths) {
				rel := filepath.ToSlash(relOrAbs(b, f))
				hit := false
				for _, g := range include {
					if globMatch(g, rel) {
						matched[g], hit = true, true
					}
				}
				if !hit || slices.ContainsFunc(exclude, func(g string) bool { return globMatch(g, rel) }) {
					continue
				}
				ps, stop := fileParams(l.sniff(f, nil), rel, run.t.goTemplate, prefix)
				if stop != nil {
					return nil, stop
				}
				out = append(out, ps...)
			}
			if len(matched) > 0 || named == root {
				break
			}
		}
		for _, g := range include {
			if !matched[g] {
				unmatched = append(unmatched, g)
			}
		}
	}
	repo := stringField(git, "repoURL")
	for _, g := range unmatched {
		msg := fmt.Sprintf("%s: its git generator's path %s matches nothing in this repository", run.what, g)
		run.notes = append(run.notes, engineFound{pos: run.pos,
			skip:    msg + ", so it makes no Application here; if " + cmp.Or(repo, "its repoURL") + " is another repository, that one's are out of reach",
			ownWarn: msg + ", the one its repoURL " + repo + " names, so Argo CD makes no Application of it: a typo, or a directory not yet committed",
			repo:    repoKey(repo, stringField(git, "revision"))})
	}
	return out, nil
}

// fileParams is a git file generator's parameter sets of the file rel
// (its bytes data): one for the mapping it holds, or for each of the
// list it holds; the mapping as it is with goTemplate, else flattened
// to strings.
func fileParams(data []byte, rel string, goTemplate bool, prefix string) ([]map[string]any, *genStop) {
	var objs []map[string]any
	var one map[string]any
	if data == nil {
		return nil, genError("its git file generator cannot read " + rel)
	}
	if err := yaml.Unmarshal(data, &one); err == nil {
		objs = append(objs, one)
	} else if err := yaml.Unmarshal(data, &objs); err != nil {
		return nil, genError("its git file generator cannot read " + rel + ": it is not a YAML or JSON mapping, nor a list of them")
	}
	var out []map[string]any
	for _, o := range objs {
		if o == nil {
			o = map[string]any{}
		}
		var p map[string]any
		if goTemplate {
			p = maps.Clone(o)
		} else {
			p = map[string]any{}
			for k, v := range flattenParams(o) {
				p[k] = v
			}
		}
		maps.Copy(p, pathParams(path.Dir(rel), path.Base(rel), goTemplate, prefix))
		out = append(out, p)
	}
	return out, nil
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

// pathParams are a git generator's parameters for the directory rel (and
// the file named file in it, for a file generator), as the controller
// gives them: a path map with goTemplate, path.KEY and path[N] without,
// under prefix when the generator sets pathParamPrefix.
func pathParams(rel, file string, goTemplate bool, prefix string) map[string]any {
	base := path.Base(rel)
	if goTemplate {
		segs := strings.Split(rel, "/")
		pm := map[string]any{"path": rel, "basename": base, "basenameNormalized": sanitizeName(base), "segments": segs}
		if file != "" {
			pm["filename"], pm["filenameNormalized"] = file, sanitizeName(file)
		}
		if prefix != "" {
			return map[string]any{prefix: map[string]any{"path": pm}}
		}
		return map[string]any{"path": pm}
	}
	name := "path"
	if prefix != "" {
		name = prefix + ".path"
	}
	p := map[string]any{name: rel, name + ".basename": base, name + ".basenameNormalized": sanitizeName(base)}
	if file != "" {
		p[name+".filename"], p[name+".filenameNormalized"] = file, sanitizeName(file)
	}
	for i, s := range strings.Split(rel, "/") {
		if s != "" {
			p[name+"["+strconv.Itoa(i)+"]"] = s
		}
	}
	return p
}

// placeholder is a fasttemplate parameter, {{name}}, as ApplicationSets
// without goTemplate write them.
var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.\[\]-]+)\s*\}\}`)

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
