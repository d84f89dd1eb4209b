package argocd

import (
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// gitGenerator lists the parameters of a git generator's directories or
// files, found under the repository: named (the directory named on the
// command line) and root (the repository's root, where the generator's
// paths are relative to, when they match there). A path that matches
// nothing goes to run.unmatched, with the repository the generator
// names: the loader says it.
func gitGenerator(run *appSetRun, git *yaml.Node) ([]map[string]any, *appSetStop) {
	root, named := run.in.Roots[0], run.in.Roots[len(run.in.Roots)-1]
	prefix := source.StringField(git, "pathParamPrefix")
	var out []map[string]any
	var unmatched []string
	if dirs := source.Lookup(git, "directories"); dirs != nil && dirs.Kind == yaml.SequenceNode {
		include, exclude := pathPatterns(dirs)
		base := root
		all := run.h.Dirs(base)
		if !slices.ContainsFunc(all, func(d string) bool {
			return slices.ContainsFunc(include, func(g string) bool { return globMatch(g, d) })
		}) && named != root {
			base = named
			all = run.h.Dirs(base)
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
	} else if files := source.Lookup(git, "files"); files != nil && files.Kind == yaml.SequenceNode {
		include, exclude := pathPatterns(files)
		matched := map[string]bool{}
		for _, b := range []string{root, named} {
			for _, f := range run.h.InputFiles(b) {
				rel := f
				if r, err := filepath.Rel(b, f); err == nil {
					rel = r
				}
				rel = filepath.ToSlash(rel)
				hit := false
				for _, g := range include {
					if globMatch(g, rel) {
						matched[g], hit = true, true
					}
				}
				if !hit || slices.ContainsFunc(exclude, func(g string) bool { return globMatch(g, rel) }) {
					continue
				}
				ps, stop := fileParams(run.h.Sniff(f, nil), rel, run.t.goTemplate, prefix)
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
	for _, g := range unmatched {
		run.unmatched = append(run.unmatched, appSetUnmatched{Path: g,
			RepoURL: source.StringField(git, "repoURL"), Revision: source.StringField(git, "revision")})
	}
	return out, nil
}

// pathPatterns are the paths of a git generator's directories or files
// (list), those it includes and those it excludes.
func pathPatterns(list *yaml.Node) (include, exclude []string) {
	for _, e := range list.Content {
		if source.BoolField(e, "exclude") {
			exclude = append(exclude, source.StringField(e, "path"))
		} else {
			include = append(include, source.StringField(e, "path"))
		}
	}
	return include, exclude
}

// fileParams is a git file generator's parameter sets of the file rel
// (its bytes data): one for the mapping it holds, or for each of the
// list it holds; the mapping as it is with goTemplate, else flattened
// to strings.
func fileParams(data []byte, rel string, goTemplate bool, prefix string) ([]map[string]any, *appSetStop) {
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
