package argocd

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
	"keyhole.dev/keyhole/source"
)

// group is the API group of Argo CD's Application and ApplicationSet.
const group = "argoproj.io/"

// A Helm chart whose dependency renders Argo CD Applications and
// ApplicationSets from the chart's values (argo-helm's argocd-apps:
// values under the dependency's key holding applications or
// applicationsets) declares deploy units that only the dependency's
// templates write. keyhole renders a chart's dependencies only when
// charts/ holds them unpacked; one it would have to fetch is said once,
// at the chart, with the paths those units deploy, whose files keyhole
// then reads on their own, not in the namespaces Argo CD deploys them
// into. argo-helm's argocd-apps is the exception: what it renders is its
// values, written out as objects (each entry of applications or
// applicationsets becomes the object of that kind, named by its key, in
// the namespace it names), so those are read as the Applications and
// ApplicationSets it renders (AppsChart). See docs/inputs.md,
// "Deploy units".

// argoAppsChart is the name of argo-helm's chart that renders Argo CD
// Applications and ApplicationSets from its values.
const argoAppsChart = "argocd-apps"

// argoAppsKeys are the values an argocd-apps-like dependency renders
// Argo CD objects from.
var argoAppsKeys = []string{"applications", "applicationsets"}

// unvendoredArgoApps is the warning, when there is one, that the chart
// in dir (its Chart.yaml reported as chart) has a dependency that
// charts/ does not hold and that the chart's values give Applications
// or ApplicationSets to render.
func (Engine) UnvendoredApps(h source.Host, dir, chart string) (diag.Diagnostic, bool) {
	var meta struct {
		Dependencies []struct {
			Name  string `yaml:"name"`
			Alias string `yaml:"alias"`
		} `yaml:"dependencies"`
	}
	data := h.Sniff(filepath.Join(dir, "Chart.yaml"), []byte("dependencies"))
	if data == nil || yaml.Unmarshal(data, &meta) != nil {
		return diag.Diagnostic{}, false
	}
	values := chartValues(h, dir)
	for _, dep := range meta.Dependencies {
		if dep.Name == "" || dep.Name == argoAppsChart || vendored(h, dir, dep.Name) {
			continue
		}
		key := dep.Alias
		if key == "" {
			key = dep.Name
		}
		v := source.Lookup(values, key)
		var named, paths []string
		for _, k := range argoAppsKeys {
			entries := source.Lookup(v, k)
			if entries == nil || len(entries.Content) == 0 || entries.Kind != yaml.MappingNode && entries.Kind != yaml.SequenceNode {
				continue
			}
			named = append(named, key+"."+k)
			paths = append(paths, argoAppsPaths(entries)...)
		}
		if len(named) == 0 {
			continue
		}
		slices.Sort(paths)
		paths = slices.Compact(paths)
		where := "the paths they deploy"
		if len(paths) > 0 {
			where = "the paths they deploy (" + strings.Join(paths, ", ") + ")"
		}
		return diag.Diagnostic{Code: source.CodeArgoCDUnread, Severity: diag.Warning, Pos: diag.Pos{File: chart, Line: 1, Column: 1},
			Message: fmt.Sprintf("Chart.yaml lists %q, which charts/ does not hold, and the chart's values give it Argo CD objects to render (%s): keyhole fetches nothing, so the deploy units they declare are not read, and what lies under %s is read on its own (as kustomization roots, charts or loose files, in the namespace its files write or default), not in the namespace Argo CD deploys it into, which keyhole cannot know; vendor the dependency unpacked in charts/ (helm dependency build, then unpack its archive there) to have them read",
				dep.Name, strings.Join(named, ", "), where)}, true
	}
	return diag.Diagnostic{}, false
}

// vendored reports whether the charts/ directory of the chart in dir
// holds the dependency name, unpacked or as an archive.
func vendored(h source.Host, dir, name string) bool {
	entries, err := h.ReadDir(filepath.Join(dir, "charts"))
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e fs.DirEntry) bool {
		n := e.Name()
		return n == name || strings.HasPrefix(n, name+"-") && strings.HasSuffix(n, ".tgz")
	})
}

// chartValues is the chart's values.yaml in dir, as a mapping, or nil.
func chartValues(h source.Host, dir string) *yaml.Node {
	data := h.Sniff(filepath.Join(dir, "values.yaml"), nil)
	var doc yaml.Node
	if data == nil || yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	return doc.Content[0]
}

// argoAppsPaths are the source paths of the Applications and
// ApplicationSet templates of entries (a mapping of them by name, or a
// list), each {{...}} read as "*", when some element of a path is
// written out, and the directories of the ApplicationSets' git
// generators.
func argoAppsPaths(entries *yaml.Node) []string {
	var items []*yaml.Node
	switch entries.Kind {
	case yaml.MappingNode:
		for i := 1; i < len(entries.Content); i += 2 {
			items = append(items, entries.Content[i])
		}
	case yaml.SequenceNode:
		items = entries.Content
	}
	var out []string
	for _, it := range items {
		// A git generator's directories are the paths an ApplicationSet
		// whose template names {{path}} deploys.
		if gs := source.Lookup(it, "generators"); gs != nil && gs.Kind == yaml.SequenceNode {
			for _, g := range gs.Content {
				if ds := source.Lookup(source.Lookup(g, "git"), "directories"); ds != nil && ds.Kind == yaml.SequenceNode {
					for _, d := range ds.Content {
						if p := source.StringField(d, "path"); p != "" && !source.BoolField(d, "exclude") {
							out = append(out, strings.Trim(path.Clean("/"+p), "/"))
						}
					}
				}
			}
		}
		for _, spec := range []*yaml.Node{it, source.Lookup(source.Lookup(it, "template"), "spec")} {
			srcs := []*yaml.Node{source.Lookup(spec, "source")}
			if ss := source.Lookup(spec, "sources"); ss != nil && ss.Kind == yaml.SequenceNode {
				srcs = append(srcs, ss.Content...)
			}
			for _, s := range srcs {
				p := strings.Trim(path.Clean("/"+source.StringField(s, "path")), "/")
				g := templateTag.ReplaceAllString(p, "*")
				if p != "" && p != "." && slices.ContainsFunc(strings.Split(g, "/"), func(e string) bool { return !strings.Contains(e, "*") }) {
					out = append(out, g)
				}
			}
		}
	}
	return out
}

// argoAppsObjects is, for the chart in dir whose Chart.yaml lists
// argo-helm's argocd-apps without charts/ holding it, the Applications
// and ApplicationSets argocd-apps renders from the chart's values.yaml
// (shown as file): each entry of applications and applicationsets (a
// mapping by name, or a list of entries with a name) written out as the
// chart's templates write it, its nodes those of values.yaml so what is
// said of them points there. ok is false when there is nothing to read.
func (Engine) AppsChart(h source.Host, dir, file string) (docs []*source.Document, ok bool) {
	var meta struct {
		Dependencies []struct {
			Name  string `yaml:"name"`
			Alias string `yaml:"alias"`
		} `yaml:"dependencies"`
	}
	data := h.Sniff(filepath.Join(dir, "Chart.yaml"), []byte(argoAppsChart))
	if data == nil || yaml.Unmarshal(data, &meta) != nil {
		return nil, false
	}
	vdata := h.Sniff(filepath.Join(dir, "values.yaml"), nil)
	if vdata == nil {
		return nil, false
	}
	var vdoc yaml.Node
	if yaml.Unmarshal(vdata, &vdoc) != nil || len(vdoc.Content) == 0 {
		return nil, false
	}
	values, err := source.Resolve(vdoc.Content[0])
	if err != nil {
		return nil, false
	}
	for _, dep := range meta.Dependencies {
		if dep.Name != argoAppsChart || vendored(h, dir, dep.Name) {
			continue
		}
		v := source.Lookup(values, cmp.Or(dep.Alias, dep.Name))
		for _, k := range []struct{ key, kind string }{{"applications", "Application"}, {"applicationsets", "ApplicationSet"}} {
			for _, e := range argoAppsEntries(source.Lookup(v, k.key)) {
				docs = append(docs, &source.Document{File: file, Index: len(docs), Node: argoAppsObject(k.kind, e.name, e.node),
					Pos: diag.Pos{File: file, Line: e.node.Line, Column: e.node.Column}})
			}
		}
	}
	return docs, len(docs) > 0
}

// argoAppsEntry is one entry of argocd-apps' applications or
// applicationsets: its name and its values.
type argoAppsEntry struct {
	name string
	node *yaml.Node
}

// argoAppsEntries are the entries of v: a mapping of them by name
// (argocd-apps 2), or a list of them, each with a name (argocd-apps 1).
func argoAppsEntries(v *yaml.Node) []argoAppsEntry {
	var out []argoAppsEntry
	switch {
	case v == nil:
	case v.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			if e := v.Content[i+1]; e.Kind == yaml.MappingNode {
				out = append(out, argoAppsEntry{name: v.Content[i].Value, node: e})
			}
		}
	case v.Kind == yaml.SequenceNode:
		for _, e := range v.Content {
			if e.Kind == yaml.MappingNode {
				out = append(out, argoAppsEntry{name: source.StringField(e, "name"), node: e})
			}
		}
	}
	return out
}

// argoAppsMeta are the keys of an argocd-apps entry its templates write
// into the object's metadata (the others go to its spec, as written).
var argoAppsMeta = map[string]string{
	"name": "", "namespace": "namespace", "finalizers": "finalizers",
	"additionalLabels": "labels", "additionalAnnotations": "annotations", "labels": "labels", "annotations": "annotations",
}

// argoAppsObject is the object of kind that argocd-apps renders from the
// entry e named name.
func argoAppsObject(kind, name string, e *yaml.Node) *yaml.Node {
	at := func(n *yaml.Node) *yaml.Node { n.Line, n.Column = e.Line, e.Column; return n }
	meta := at(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
	setField(meta, "name", at(strNode(name)))
	spec := at(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
	for i := 0; i+1 < len(e.Content); i += 2 {
		k, v := e.Content[i], e.Content[i+1]
		if m, ok := argoAppsMeta[k.Value]; ok {
			if m != "" {
				meta.Content = append(meta.Content, at(strNode(m)), v)
			}
			continue
		}
		spec.Content = append(spec.Content, k, v)
	}
	obj := at(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
	setField(obj, "apiVersion", at(strNode(group+"v1alpha1")))
	setField(obj, "kind", at(strNode(kind)))
	setField(obj, "metadata", meta)
	setField(obj, "spec", spec)
	return obj
}
