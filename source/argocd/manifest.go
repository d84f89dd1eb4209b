package argocd

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// Argo CD's repo server builds an Application source's path with
// kustomize: the path's own kustomization with the Application's
// kustomize options written in (as its `kustomize edit` writes them), or,
// for a directory application, a kustomization listing the YAML and JSON
// files it reads there (recurse, include and exclude as
// spec.source.directory says). The loader runs the build.

// Manifest is the kustomization the repo server builds the Argo CD unit
// u's path with, and the path it stands at (absolute), reading through
// h: the path's own, with the Application's kustomize options written
// in, or the one a directory application makes of its files.
func (Engine) Manifest(h source.Host, u *source.Unit) (kfile string, kdata []byte) {
	if kfile := h.KustomizationFile(u.Root); kfile != "" {
		return kfile, argoKustomization(cloneTree(h.Kustomization(kfile)), u.Argo.Kustomize)
	}
	return filepath.Join(u.Root, "kustomization.yaml"), directoryKustomization(h, u)
}

// Jsonnet are the warnings that the directory application u evaluates a
// Jsonnet file (as Argo CD picks its files) that names keyhole's kinds
// or declares a Secret: Argo CD applies what it declares, keyhole does
// not evaluate it. None when its path has a kustomization, whose build
// evaluates no Jsonnet.
func (Engine) Jsonnet(h source.Host, u *source.Unit) []diag.Diagnostic {
	if h.KustomizationFile(u.Root) != "" {
		return nil
	}
	var out []diag.Diagnostic
	for _, rel := range directoryFiles(h, u, func(rel string) bool { return strings.EqualFold(path.Ext(rel), ".jsonnet") }) {
		abs := filepath.Join(u.Root, filepath.FromSlash(rel))
		if !h.FileMatters(abs) {
			continue
		}
		out = append(out, diag.Diagnostic{Code: source.CodeJsonnetNotEvaluated, Severity: diag.Warning,
			Pos: diag.Pos{File: h.Shown(abs), Line: 1, Column: 1}, Units: []string{u.Name},
			Message: fmt.Sprintf("Argo CD Application %s (%s) evaluates this Jsonnet file and applies what it declares, which names keyhole's kinds or a Secret; keyhole does not evaluate Jsonnet, so those objects are not checked",
				strings.TrimPrefix(u.Name, "argocd:"), u.Decl)})
	}
	return out
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
			if v := source.Lookup(opts, f); v != nil && v.Kind == yaml.ScalarNode {
				setField(k, f, strNode(v.Value))
			}
		}
		for _, f := range []string{"commonLabels", "commonAnnotations"} {
			if v := source.Lookup(opts, f); v != nil && v.Kind == yaml.MappingNode {
				cur := source.Lookup(k, f)
				if cur == nil || cur.Kind != yaml.MappingNode {
					cur = &yaml.Node{Kind: yaml.MappingNode}
					setField(k, f, cur)
				}
				for i := 0; i+1 < len(v.Content); i += 2 {
					setField(cur, v.Content[i].Value, v.Content[i+1])
				}
			}
		}
		if v := source.Lookup(opts, "images"); v != nil && v.Kind == yaml.SequenceNode {
			cur := source.Lookup(k, "images")
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
			if v := source.Lookup(opts, f); v != nil && v.Kind == yaml.SequenceNode {
				cur := source.Lookup(k, f)
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

// directoryKustomization is a kustomization listing what a directory
// application reads of its path: the YAML and JSON files at its top, or
// under it when recurse is set, kept by include and exclude.
func directoryKustomization(h source.Host, u *source.Unit) []byte {
	files := directoryFiles(h, u, func(rel string) bool {
		name := path.Base(rel)
		if u.KeyholePlugin() && rel == name && source.ConfigName(name) {
			return false // keyhole's plugin reads its Config; it renders no object of it
		}
		return source.InputName(name) && (name != "agent.yaml" && name != "agent.yml" || holdsObjects(h, filepath.Join(u.Root, filepath.FromSlash(rel))))
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
func directoryFiles(h source.Host, u *source.Unit, keep func(rel string) bool) []string {
	recurse := source.BoolField(u.Argo.Directory, "recurse")
	include, exclude := source.StringField(u.Argo.Directory, "include"), source.StringField(u.Argo.Directory, "exclude")
	var files []string
	if u.KeyholePlugin() {
		// keyhole's plugin reads its path as keyhole does: a walk, which
		// leaves out what .gitignore keeps out of the repository Argo
		// CD clones (a Secret's stand-in named only on the command line).
		for _, f := range h.Walk(u.Root) {
			if rel, err := filepath.Rel(u.Root, f); err == nil && keep(filepath.ToSlash(rel)) {
				files = append(files, filepath.ToSlash(rel))
			}
		}
		slices.Sort(files)
		return files
	}
	h.VisitTree(u.Root, func(rel string, fi fs.FileInfo) bool {
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
func holdsObjects(h source.Host, abs string) bool {
	docs, _ := source.Parse(abs, h.Sniff(abs, nil))
	return slices.ContainsFunc(docs, func(d *source.Document) bool { return !d.IsAgent() })
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

// setField sets key of mapping m to v, adding the key when m has none.
func setField(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, strNode(key), v)
}
