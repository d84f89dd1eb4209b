// Package diff compares two renders of a repository (typically two git
// refs: a pull request's base and head) resource by resource, and says
// what changed in what each sandbox may reach: hosts, injections, rules
// and placeholder variables. It owns the per-resource identity (a
// Kubernetes object by apiVersion, kind, namespace and name, so moving a
// file is no change; any other file by its path), the line diff, and the
// text, markdown and JSON reports. It reads renders and plans; it never
// loads, checks or renders anything itself.
package diff

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/access"
	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/render"
	"keyhole.dev/keyhole/source"
)

// Change says what became of a resource, a sandbox or a host.
type Change string

// The changes. A resource present on both sides with the same bytes is
// not reported at all.
const (
	Added   Change = "added"
	Removed Change = "removed"
	Changed Change = "changed"
)

// Ref names one side of a diff, for the reports.
type Ref struct {
	// Name is the revision as the user typed it ("main", "HEAD~1"), or
	// "working tree".
	Name string `json:"name"`
	// Commit is the full commit hash; empty for the working tree.
	Commit string `json:"commit,omitempty"`
}

// String is the name with the commit's first 12 hex digits.
func (r Ref) String() string {
	if r.Commit == "" {
		return r.Name
	}
	return fmt.Sprintf("%s (%s)", r.Name, r.Commit[:min(12, len(r.Commit))])
}

// Side is one render to compare.
type Side struct {
	Ref Ref
	// Files are the rendered files, as render returns them.
	Files []render.File
	// Sandboxes are the plan's sandboxes, whose proxy configs and
	// environments the policy summary compares.
	Sandboxes []compiler.Sandbox
	// DefaultNamespace names the namespace of a sandbox whose plan names
	// none, as the render did (render.Options.DefaultNamespace).
	DefaultNamespace string
	// Unit names the deploy unit rendered, when the repository has
	// several and each is compared on its own (see Merge); empty
	// otherwise.
	Unit string
	// Ceiling is the side's ceiling (keyhole.yaml): a widening on the
	// head is weighed against the head's.
	Ceiling access.Ceiling
}

// Result is the comparison of two sides.
type Result struct {
	Base Ref `json:"base"`
	Head Ref `json:"head"`
	// Resources are the added, removed and changed resources, sorted by
	// path (head's, else base's), then by identity.
	Resources []Resource `json:"resources"`
	// Sandboxes are the sandboxes whose policy changed, sorted by
	// namespace and name.
	Sandboxes []SandboxChange `json:"sandboxes"`
	// Kinds counts the resources per kind, sorted by kind.
	Kinds []KindCount `json:"kinds"`
	// Gate are the changes to the gate itself (CompareGate): the
	// governing Config and the objects' ignore annotations.
	Gate []GateChange `json:"gate"`
}

// Changed reports whether anything differs.
func (r Result) Changed() bool {
	return len(r.Resources) > 0 || len(r.Sandboxes) > 0 || len(r.Gate) > 0
}

// Count returns how many resources had change c.
func (r Result) Count(c Change) int {
	n := 0
	for _, res := range r.Resources {
		if res.Change == c {
			n++
		}
	}
	return n
}

// Resource is one added, removed or changed rendered resource.
type Resource struct {
	Change Change `json:"change"`
	// Kind is the object's kind; for a file that is no Kubernetes object,
	// the kind it declares (ProxyConfig) or its file name (env.json, .env).
	Kind string `json:"kind"`
	// APIVersion, Namespace and Name identify a Kubernetes object; all
	// empty for a file identified by its path.
	APIVersion string `json:"apiVersion,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
	// BasePath and HeadPath are the file's path in each render; empty on
	// the side that lacks it.
	BasePath string `json:"basePath,omitempty"`
	HeadPath string `json:"headPath,omitempty"`
	// Diff is the unified diff of the file's text, base to head.
	Diff string `json:"diff"`
	// LinesAdded and LinesRemoved count the diff's + and - lines.
	LinesAdded   int `json:"linesAdded"`
	LinesRemoved int `json:"linesRemoved"`
	// SameAs, for a file that is no Kubernetes object, names the
	// ConfigMap of the same diff that carries the file's content as a
	// data key ("ConfigMap agents/x-egress-proxy, data proxy.json"): the
	// text and markdown reports show that change once, at the ConfigMap.
	SameAs string `json:"sameAs,omitempty"`
}

// Path is the head's path, or the base's for a removed resource.
func (r Resource) Path() string { return cmp.Or(r.HeadPath, r.BasePath) }

// ID names the resource for a reader: "Kind namespace/name" for an
// object, its path for a file.
func (r Resource) ID() string {
	if r.Name == "" {
		return r.Path()
	}
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// KindCount is how many resources of one kind were added, removed and
// changed.
type KindCount struct {
	Kind    string `json:"kind"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
	Changed int    `json:"changed"`
}

// Compare diffs base and head.
func Compare(base, head Side) Result {
	res := Result{Base: base.Ref, Head: head.Ref}
	// A path holding the same bytes on both sides is the same resource,
	// unchanged: only the rest need their identity read, which costs a
	// parse. In a typical pull request that is a few files of many.
	same := map[string]bool{}
	baseData := make(map[string][]byte, len(base.Files))
	for _, f := range base.Files {
		baseData[f.Path] = f.Data
	}
	for _, f := range head.Files {
		if d, ok := baseData[f.Path]; ok && bytes.Equal(d, f.Data) {
			same[f.Path] = true
		}
	}
	b, h := index(base.Files, same), index(head.Files, same)
	keys := make([]string, 0, len(b)+len(h))
	for k := range b {
		keys = append(keys, k)
	}
	for k := range h {
		if _, ok := b[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		bf, inBase := b[k]
		hf, inHead := h[k]
		r := Resource{}
		var from, to string
		switch {
		case inBase && inHead:
			if bf.data == hf.data {
				continue
			}
			r = hf.resource()
			r.Change = Changed
			r.BasePath, r.HeadPath = bf.path, hf.path
			from, to = bf.data, hf.data
		case inHead:
			r = hf.resource()
			r.Change = Added
			r.HeadPath = hf.path
			to = hf.data
		default:
			r = bf.resource()
			r.Change = Removed
			r.BasePath = bf.path
			from = bf.data
		}
		r.Diff = Unified(r.BasePath, r.HeadPath, from, to)
		for _, l := range strings.Split(r.Diff, "\n") {
			switch {
			case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
			case strings.HasPrefix(l, "+"):
				r.LinesAdded++
			case strings.HasPrefix(l, "-"):
				r.LinesRemoved++
			}
		}
		res.Resources = append(res.Resources, r)
	}
	slices.SortFunc(res.Resources, func(x, y Resource) int {
		return cmp.Or(strings.Compare(x.Path(), y.Path()), strings.Compare(x.ID(), y.ID()), strings.Compare(x.APIVersion, y.APIVersion))
	})
	markCarried(res.Resources, b, h)
	res.Kinds = kindCounts(res.Resources)
	res.Sandboxes = comparePolicies(base, head)
	for i := range res.Sandboxes {
		res.Sandboxes[i].Unit = cmp.Or(head.Unit, base.Unit)
	}
	return res
}

// markCarried sets SameAs on each file resource whose content a ConfigMap
// resource of the same comparison carries as a data value, on the side
// that has it (render writes proxy.json both as a file, for runs outside
// Kubernetes, and in the proxy's ConfigMap): one change, shown once.
func markCarried(rs []Resource, base, head map[string]file) {
	byPath := func(side map[string]file) map[string]string {
		out := map[string]string{}
		for _, f := range side {
			out[f.path] = f.data
		}
		return out
	}
	var baseData, headData map[string]string
	type carrier struct {
		id   string
		data map[string]string
	}
	var carriers [2][]carrier // base's, head's
	for _, r := range rs {
		if r.Kind != "ConfigMap" || r.Name == "" {
			continue
		}
		if baseData == nil {
			baseData, headData = byPath(base), byPath(head)
		}
		for i, p := range []string{r.BasePath, r.HeadPath} {
			if p == "" {
				continue
			}
			text := baseData[p]
			if i == 1 {
				text = headData[p]
			}
			var cm struct {
				Data map[string]string `yaml:"data"`
			}
			if yaml.Unmarshal([]byte(text), &cm) == nil && len(cm.Data) > 0 {
				carriers[i] = append(carriers[i], carrier{id: r.ID(), data: cm.Data})
			}
		}
	}
	if len(carriers[0])+len(carriers[1]) == 0 {
		return
	}
	for i := range rs {
		r := &rs[i]
		if r.Name != "" {
			continue
		}
		// The side whose content the ConfigMap must carry: the head's,
		// or the base's for a removed file.
		side, text := 1, headData[r.HeadPath]
		if r.HeadPath == "" {
			side, text = 0, baseData[r.BasePath]
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		for _, c := range carriers[side] {
			for _, key := range slices.Sorted(maps.Keys(c.data)) {
				if strings.TrimRight(c.data[key], "\n") == strings.TrimRight(text, "\n") {
					r.SameAs = c.id + ", data " + key
					break
				}
			}
			if r.SameAs != "" {
				break
			}
		}
	}
}

// Merge joins the comparisons of several deploy units, each made by
// Compare on its own (the same object in two units is not one resource),
// into one report: the refs of the first, every resource and sandbox
// change, and the counts per kind of them all. Resource paths are the
// callers' to make distinct (render writes each unit to a directory of
// its own).
func Merge(rs ...Result) Result {
	var out Result
	if len(rs) > 0 {
		out.Base, out.Head = rs[0].Base, rs[0].Head
	}
	for _, r := range rs {
		out.Resources = append(out.Resources, r.Resources...)
		out.Sandboxes = append(out.Sandboxes, r.Sandboxes...)
	}
	slices.SortFunc(out.Resources, func(x, y Resource) int {
		return cmp.Or(strings.Compare(x.Path(), y.Path()), strings.Compare(x.ID(), y.ID()), strings.Compare(x.APIVersion, y.APIVersion))
	})
	out.Kinds = kindCounts(out.Resources)
	return out
}

func kindCounts(rs []Resource) []KindCount {
	byKind := map[string]*KindCount{}
	for _, r := range rs {
		c := byKind[r.Kind]
		if c == nil {
			c = &KindCount{Kind: r.Kind}
			byKind[r.Kind] = c
		}
		switch r.Change {
		case Added:
			c.Added++
		case Removed:
			c.Removed++
		case Changed:
			c.Changed++
		}
	}
	out := make([]KindCount, 0, len(byKind))
	for _, c := range byKind {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b KindCount) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}

// file is one rendered file with its identity.
type file struct {
	path, data                        string
	kind, apiVersion, namespace, name string
}

func (f file) resource() Resource {
	return Resource{Kind: f.kind, APIVersion: f.apiVersion, Namespace: f.namespace, Name: f.name}
}

// index keys each file by its identity: "object\x00apiVersion\x00kind\x00
// namespace\x00name" for a Kubernetes object, "file\x00path" otherwise.
// Two files claiming one object (which a render never writes) are both
// kept, told apart by path.
func index(files []render.File, skip map[string]bool) map[string]file {
	out := make(map[string]file, len(files))
	for _, rf := range files {
		if skip[rf.Path] {
			continue
		}
		f := identify(rf)
		key := "file\x00" + f.path
		if f.name != "" {
			key = strings.Join([]string{"object", f.apiVersion, f.kind, f.namespace, f.name}, "\x00")
			if _, dup := out[key]; dup {
				key += "\x00" + f.path
			}
		}
		out[key] = f
	}
	return out
}

// identify reads a rendered file's identity from its content: a YAML (or
// JSON) document with apiVersion, kind and metadata.name is an object.
func identify(rf render.File) file {
	f := file{path: rf.Path, data: string(rf.Data), kind: path.Base(rf.Path)}
	var head struct {
		APIVersion, Kind string
		Metadata         struct{ Name, Namespace string }
	}
	var err error
	switch path.Ext(rf.Path) {
	case ".json":
		// JSON is YAML, but encoding/json reads it several times faster.
		var j struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		err = json.Unmarshal(rf.Data, &j)
		head.APIVersion, head.Kind, head.Metadata.Name, head.Metadata.Namespace = j.APIVersion, j.Kind, j.Metadata.Name, j.Metadata.Namespace
	case ".yaml", ".yml":
		// Into a node, not a struct: aliases stay unexpanded, so no
		// input costs more than its size. The first document decides.
		var doc yaml.Node
		if err = yaml.Unmarshal(rf.Data, &doc); err == nil && len(doc.Content) == 1 {
			m := doc.Content[0]
			md := source.Lookup(m, "metadata")
			head.APIVersion, head.Kind = str(source.Lookup(m, "apiVersion")), str(source.Lookup(m, "kind"))
			head.Metadata.Name, head.Metadata.Namespace = str(source.Lookup(md, "name")), str(source.Lookup(md, "namespace"))
		}
	default:
		return f
	}
	if err != nil {
		return f // not YAML or JSON: a file, by its path
	}
	if head.Kind != "" {
		f.kind = head.Kind
	}
	if head.APIVersion != "" && head.Kind != "" && head.Metadata.Name != "" {
		f.apiVersion, f.namespace, f.name = head.APIVersion, head.Metadata.Namespace, head.Metadata.Name
	}
	return f
}

// str is n's value when it is a string scalar, else "".
func str(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return ""
	}
	return n.Value
}
