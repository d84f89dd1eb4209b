package source

import (
	"cmp"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// A repository deployed by Argo CD says what a cluster applies in its
// Applications: each source's path (spec.source, or each of
// spec.sources), built as Argo CD's repo server builds it. A path with a
// kustomization is built with kustomize after the Application's
// kustomize options are written into it (as the repo server's `kustomize
// edit` does); a path without one is a directory application, its YAML
// and JSON files read as they are (recurse, include and exclude as
// spec.source.directory says). An ApplicationSet's generators make its
// Applications as its controller makes them (argoappset.go). A path
// holding a Helm chart is rendered as the repo server's helm template
// renders it, with the source's helm options (helm.go). Charts from chart repositories and plugin sources are out
// of reach: said once.
// See docs/inputs.md.

// argoGroup is the API group of Argo CD's Application and ApplicationSet.
const argoGroup = "argoproj.io/"

// UnitArgoCD is an Argo CD Application's source (or one an ApplicationSet
// generates).
const UnitArgoCD UnitSource = "argocd"

// ArgoOverlay is what Argo CD's repo server applies to an Application
// source's path.
type ArgoOverlay struct {
	// Kustomize is spec.source.kustomize, as written.
	Kustomize *yaml.Node
	// Directory is spec.source.directory, as written.
	Directory *yaml.Node
}

// argoUnits is the units the Argo CD Application or ApplicationSet d
// makes, one per source (or per generated Application), as the Argo CD
// engine reads it: from vals, the object as the Argo CD unit applying it
// builds it in namespace ns, or from d when vals is nil. With no Argo CD
// engine, it says so at d (errNoArgo), and the paths its sources name
// are no one else's to read.
func (l *loader) argoUnits(d *Document, vals *yaml.Node, ns string, srcRoots []string) []engineFound {
	if l.opts.Engines.Argo == nil {
		return l.noArgo(d, cmp.Or(vals, d.Node), srcRoots)
	}
	var out []engineFound
	for _, f := range l.opts.Engines.Argo.Units(Host{l}, d, vals, ns, srcRoots) {
		out = append(out, argoFound(f))
	}
	return out
}

// noArgo is what the Application or ApplicationSet d (its fields those
// of obj) makes when Load was given no Argo CD engine: an error at its
// generators, or at the object, and a claim on its sources' paths.
func (l *loader) noArgo(d *Document, obj *yaml.Node, srcRoots []string) []engineFound {
	o := d.Object()
	what := "Argo CD " + o.Kind + " " + cmp.Or(o.Namespace, "argocd") + "/" + o.Name
	spec := Lookup(obj, "spec")
	if o.Kind == "ApplicationSet" {
		gens := Lookup(spec, "generators")
		if Lookup(spec, "template") == nil || gens == nil || gens.Kind != yaml.SequenceNode {
			return nil
		}
		return []engineFound{{pos: diag.Pos{File: d.File, Line: gens.Line, Column: gens.Column}, err: what + ": " + errNoArgo.Error()}}
	}
	f := engineFound{pos: d.Pos, err: what + ": " + errNoArgo.Error()}
	sources := []*yaml.Node{Lookup(spec, "source")}
	if ss := Lookup(spec, "sources"); ss != nil && ss.Kind == yaml.SequenceNode {
		sources = append(sources, ss.Content...)
	}
	for _, s := range sources {
		if rel := stringField(s, "path"); rel != "" {
			if dir, _ := l.enginePath(rel, srcRoots); dir != "" {
				f.claim = append(f.claim, dir)
			}
		}
	}
	return []engineFound{f}
}

// argoOwnRepo says, of each Argo CD source of found whose path is not a
// directory of this repository, and of each git generator path that
// matches nothing here, what Argo CD does when its repository is this
// one: when another source of found builds from the same repository
// and revision (repoKey) out of this repository, it is this one, and
// the path is a mistake Argo CD stops at.
func argoOwnRepo(found []engineFound) {
	own := map[string]bool{}
	for _, f := range found {
		if f.unit != nil && f.unit.Argo != nil && f.repo != "" {
			own[f.repo] = true
		}
	}
	for i, f := range found {
		if f.repo == "" || !own[f.repo] || f.unit != nil {
			continue
		}
		switch {
		case f.ownErr != "":
			found[i].skip, found[i].err = "", f.ownErr
		case f.ownWarn != "":
			found[i].skip, found[i].warn, found[i].code = "", f.ownWarn, CodeGeneratorMatchesNothing
		}
	}
}

// prepareArgo readies the build of the Argo CD unit u as the repo server
// does it, or says why there is nothing to build.
func (l *loader) prepareArgo(u *Unit) engineJob {
	j := engineJob{u: u, named: l.unitName(u)}
	if !l.engineUnitMatters(u) {
		j.note = skipped(u.Decl, "Argo CD Application "+strings.TrimPrefix(u.Name, "argocd:")+" not built: nothing under its path or in its components names keyhole's kinds or declares a Secret")
		return j
	}
	l.jsonnetNotEvaluated(u)
	if b := l.applying[u]; b != nil && (b.run.m != nil || b.run.err != nil) {
		j.build, j.built, j.run = true, true, b.run
		return j
	}
	j.bo = l.buildOptions(u.Root)
	j.bo.KFile, j.bo.KData = l.argoManifest(u)
	j.build = true
	return j
}

// CodeJsonnetNotEvaluated is reported at a Jsonnet file of an Argo CD
// directory application that names keyhole's kinds or declares a
// Secret: Argo CD evaluates it, keyhole does not.
const CodeJsonnetNotEvaluated = "JsonnetNotEvaluated"

// jsonnetNotEvaluated says, of each Jsonnet file the directory
// application u evaluates (its files, as directoryKustomization picks
// them) that names keyhole's kinds or declares a Secret, that what it
// declares is not checked.
func (l *loader) jsonnetNotEvaluated(u *Unit) {
	if kustomizationFile(l.fsys, u.Root) != "" {
		return // a kustomize application: Jsonnet is not evaluated
	}
	for _, rel := range l.directoryFiles(u, func(rel string) bool { return strings.EqualFold(path.Ext(rel), ".jsonnet") }) {
		abs := filepath.Join(u.Root, filepath.FromSlash(rel))
		if data := l.sniff(abs, nil); data != nil && (namesKeyhole(abs, data) || declaresSecret(data)) {
			l.diags = append(l.diags, diag.Diagnostic{Code: CodeJsonnetNotEvaluated, Severity: diag.Warning,
				Pos: diag.Pos{File: l.display(abs, abs), Line: 1, Column: 1}, Units: []string{u.Name},
				Message: fmt.Sprintf("Argo CD Application %s (%s) evaluates this Jsonnet file and applies what it declares, which names keyhole's kinds or a Secret; keyhole does not evaluate Jsonnet, so those objects are not checked",
					strings.TrimPrefix(u.Name, "argocd:"), u.Decl)})
		}
	}
}

// argoManifest is the kustomization the repo server builds the Argo CD
// unit u's path with, and the path it stands at: the path's own, with
// the Application's kustomize options written in, or the one a directory
// application makes of its files.
func (l *loader) argoManifest(u *Unit) (kfile string, kdata []byte) {
	if kfile := kustomizationFile(l.fsys, u.Root); kfile != "" {
		return kfile, argoKustomization(cloneTree(kustomizationNode(l.fsys, kfile)), u.Argo.Kustomize)
	}
	return filepath.Join(u.Root, "kustomization.yaml"), l.directoryKustomization(u)
}

// cloneTree copies the nodes of n, as they are: aliases still name their
// anchors (copyNode would expand them, without bound).
func cloneTree(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	c := *n
	if n.Content != nil {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, k := range n.Content {
			c.Content[i] = cloneTree(k)
		}
	}
	return &c
}

// argoKustomization is the kustomization k with an Application's
// kustomize options written into it, as the repo server's `kustomize
// edit` writes them: name prefix, suffix and namespace set; labels,
// annotations and images merged; patches and components added.
func argoKustomization(k, opts *yaml.Node) []byte {
	if k == nil {
		k = &yaml.Node{Kind: yaml.MappingNode}
	}
	if opts != nil && opts.Kind == yaml.MappingNode {
		for _, f := range []string{"namePrefix", "nameSuffix", "namespace"} {
			if v := Lookup(opts, f); v != nil && v.Kind == yaml.ScalarNode {
				setField(k, f, strNode(v.Value))
			}
		}
		for _, f := range []string{"commonLabels", "commonAnnotations"} {
			if v := Lookup(opts, f); v != nil && v.Kind == yaml.MappingNode {
				cur := Lookup(k, f)
				if cur == nil || cur.Kind != yaml.MappingNode {
					cur = &yaml.Node{Kind: yaml.MappingNode}
					setField(k, f, cur)
				}
				for i := 0; i+1 < len(v.Content); i += 2 {
					setField(cur, v.Content[i].Value, v.Content[i+1])
				}
			}
		}
		if v := Lookup(opts, "images"); v != nil && v.Kind == yaml.SequenceNode {
			cur := Lookup(k, "images")
			if cur == nil || cur.Kind != yaml.SequenceNode {
				cur = &yaml.Node{Kind: yaml.SequenceNode}
				setField(k, "images", cur)
			}
			for _, img := range v.Content {
				if img.Kind == yaml.ScalarNode {
					cur.Content = append(cur.Content, imageEntry(img.Value))
				}
			}
		}
		for _, f := range []string{"patches", "components", "replicas"} {
			if v := Lookup(opts, f); v != nil && v.Kind == yaml.SequenceNode {
				cur := Lookup(k, f)
				if cur == nil || cur.Kind != yaml.SequenceNode {
					cur = &yaml.Node{Kind: yaml.SequenceNode}
					setField(k, f, cur)
				}
				cur.Content = append(cur.Content, v.Content...)
			}
		}
	}
	out, err := yaml.Marshal(k)
	if err != nil {
		return nil
	}
	return out
}

// imageEntry is a kustomization images entry for an Application's
// "name=newName:tag" or "name:tag" override.
func imageEntry(s string) *yaml.Node {
	name, to, ok := strings.Cut(s, "=")
	if !ok {
		to = s
	}
	ref, digest, _ := strings.Cut(to, "@")
	newName, tag := ref, ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		newName, tag = ref[:i], ref[i+1:]
	}
	if !ok {
		name = newName
	}
	m := &yaml.Node{Kind: yaml.MappingNode}
	setField(m, "name", strNode(name))
	if newName != name {
		setField(m, "newName", strNode(newName))
	}
	if tag != "" {
		setField(m, "newTag", strNode(tag))
	}
	if digest != "" {
		setField(m, "digest", strNode(digest))
	}
	return m
}

// setField sets key of mapping m to v.
func setField(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, strNode(key), v)
}

// directoryKustomization is a kustomization listing what a directory
// application reads of its path: the YAML and JSON files at its top, or
// under it when recurse is set, kept by include and exclude.
func (l *loader) directoryKustomization(u *Unit) []byte {
	files := l.directoryFiles(u, func(rel string) bool {
		name := path.Base(rel)
		if u.rendered && rel == name && slices.Contains(configFileNames, name) {
			return false // keyhole's plugin reads its Config; it renders no object of it
		}
		return inputExt(name) && (name != "agent.yaml" && name != "agent.yml" || l.holdsObjects(filepath.Join(u.Root, filepath.FromSlash(rel))))
	})
	k := &yaml.Node{Kind: yaml.MappingNode}
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, f := range files {
		seq.Content = append(seq.Content, strNode(f))
	}
	setField(k, "resources", seq)
	out, _ := yaml.Marshal(k)
	return out
}

// directoryFiles are the regular files (relative, slash-separated,
// sorted) of the directory application u that keep takes, as Argo CD
// picks them: under its path, in subdirectories only with recurse, and
// matching include and not exclude.
func (l *loader) directoryFiles(u *Unit, keep func(rel string) bool) []string {
	recurse := boolField(u.Argo.Directory, "recurse")
	include, exclude := stringField(u.Argo.Directory, "include"), stringField(u.Argo.Directory, "exclude")
	var files []string
	if u.rendered {
		// keyhole's plugin reads its path as keyhole does: a walk, which
		// leaves out what .gitignore keeps out of the repository Argo
		// CD clones (a Secret's stand-in named only on the command line).
		for _, f := range walk(l.fsys, u.Root, nil).files {
			if rel, err := filepath.Rel(u.Root, f); err == nil && keep(filepath.ToSlash(rel)) {
				files = append(files, filepath.ToSlash(rel))
			}
		}
		slices.Sort(files)
		return files
	}
	l.visitTree(u.Root, func(rel string, fi fs.FileInfo) bool {
		switch {
		case fi.IsDir():
			return recurse
		case fi.Mode().IsRegular() && (include == "" || braceMatch(include, rel)) && (exclude == "" || !braceMatch(exclude, rel)) && keep(rel):
			files = append(files, rel)
		}
		return false
	})
	slices.Sort(files)
	return files
}

// holdsObjects reports whether the file abs (an agent.yaml) holds objects
// (documents with apiVersion and kind) rather than an agent: Argo CD
// applies the one, and could not apply the other.
func (l *loader) holdsObjects(abs string) bool {
	docs, _ := Parse(abs, l.sniff(abs, nil))
	return slices.ContainsFunc(docs, func(d *Document) bool { return !d.IsAgent() })
}

// braceMatch matches rel against a directory application's include or
// exclude pattern: a glob, or {a,b} of globs.
func braceMatch(pattern, rel string) bool {
	alts := []string{pattern}
	if strings.HasPrefix(pattern, "{") && strings.HasSuffix(pattern, "}") {
		alts = strings.Split(pattern[1:len(pattern)-1], ",")
	}
	return slices.ContainsFunc(alts, func(g string) bool {
		g = strings.TrimSpace(g)
		return globMatch(g, rel) || globMatch(g, path.Base(rel))
	})
}

// strNode is a string scalar, quoted where YAML would read it as another
// type (a tag "1.27" is a string, not a number).
func strNode(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}
