package flux

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// A Flux Kustomization is a deploy unit: its spec.path, relative to the
// root of the source it names, built as kustomize-controller builds it.
// A Flux HelmRelease whose chart is a directory of this repository (its
// chart's sourceRef is the repository's own GitRepository) is one too,
// rendered as helm-controller renders it: the chart's values, or the
// valuesFiles that replace them, then each valuesFrom the repository
// holds in the clear, then spec.values, for the release name and
// namespace Flux gives it. Which of them are units, what applies them
// and which cluster they deploy to is the loader's; the loader's
// knowledge of the sources (keyhole.yaml's flux.sources, the
// repository's own GitRepositories, the ArtifactGenerators' cuts) is
// asked through the source.Host. See docs/inputs.md.

// Kustomization is the unit the Flux Kustomization d makes, applied in
// namespace ns (its own, or the one its listing kustomization sets).
// Its spec.path is relative to the root of its source: where that is
// the repository it was found in, the first of srcRoots, and where it
// names no directory there, the next one (the directory named on the
// command line, for a repository kept inside another). Its fields are
// read from vals, the object as the Flux unit applying it builds it, or
// from d itself when vals is nil; positions are always d's.
func (Engine) Kustomization(h source.Host, d *source.Document, vals *yaml.Node, ns string, srcRoots []string) source.Found {
	if vals == nil {
		vals = d.Node
	}
	name := source.StringField(source.Lookup(vals, "metadata"), "name")
	ns = cmp.Or(ns, source.FluxOwnSource)
	at := fieldPos(d, false)
	spec := source.Lookup(vals, "spec")
	ref := source.Lookup(spec, "sourceRef")
	from := source.FluxSource{
		Kind:      cmp.Or(source.StringField(ref, "kind"), "GitRepository"),
		Namespace: cmp.Or(source.StringField(ref, "namespace"), ns),
		Name:      source.StringField(ref, "name"),
	}
	rel := source.StringField(spec, "path")
	declRoot := srcRoots[0]
	srcRoots, unread := sourceRoots(h, ns, name, from, rel, srcRoots)
	if unread != "" {
		return source.Found{Pos: at("spec", "sourceRef"), Unread: unread}
	}
	if dir := h.RenderedPath(rel, srcRoots); dir != "" {
		return source.Found{Pos: at("spec", "path"), Rendered: source.Lookup(spec, "kubeConfig") == nil, Skip: fmt.Sprintf(
			"Flux Kustomization %s/%s applies %s, the directory `keyhole render` writes (keyhole.yaml's flux.rendered, or render's %s in it): it is keyhole's output, written from the inputs keyhole checks, not an input to check", ns, name, rel, source.RenderMarker)}
	}
	root, srcRoot := h.EnginePath(rel, srcRoots)
	if root == "" && from.Kind == "GitRepository" && !h.FluxSourceDeclared(from) {
		// This repository by flux-system's name alone: a path it does
		// not hold says the Kustomization is written for another (a
		// snippet a project's documentation has its users copy).
		return source.Found{Pos: at("spec", "path"), Unread: fmt.Sprintf(
			"Flux Kustomization %s/%s builds %q from GitRepository %s/%s, which this repository does not declare; keyhole takes that source for this repository by its name, as Flux's bootstrap names it, but the path is not a directory here, so the Kustomization is written for another repository and keyhole does not read it: if it deploys this repository, declare its GitRepository here or map the source to the directory that is its root in keyhole.yaml's flux.sources (kind: %s, namespace: %s, name: %s, path: DIR)",
			ns, name, rel, from.Namespace, from.Name, from.Kind, from.Namespace, from.Name)}
	}
	if root == "" {
		return source.Found{Pos: at("spec", "path"), Err: fmt.Sprintf(
			"Flux Kustomization %s/%s: spec.path %q is not a directory of this repository; kustomize-controller fails to build it", ns, name, rel)}
	}
	var m map[string]any
	if err := vals.Decode(&m); err != nil {
		return source.Found{Pos: d.Pos, Err: fmt.Sprintf("Flux Kustomization %s/%s cannot be read: %v", ns, name, err)}
	}
	js, err := json.Marshal(m)
	var obj unstructured.Unstructured
	if err == nil {
		err = obj.UnmarshalJSON(js)
	}
	if err != nil {
		return source.Found{Pos: d.Pos, Err: fmt.Sprintf("Flux Kustomization %s/%s cannot be read: %v", ns, name, err)}
	}
	obj.SetNamespace(ns)
	u := &source.Unit{
		Name:    "flux:" + ns + "/" + name,
		Dir:     path.Join("flux", ns, source.OutputDir(name)),
		Source:  source.UnitFlux,
		Root:    root,
		Decl:    d.Pos,
		Flux:    &source.FluxOverlay{Object: obj, SourceRoot: srcRoot},
		Cluster: kubeConfig(spec, ns),
	}
	f := source.Found{Unit: u, Pos: d.Pos, SrcRoot: srcRoot}
	if srcRoot != declRoot {
		f.DeclRoot = declRoot
	}
	return f
}

// HelmRelease is the unit the Flux HelmRelease d, in namespace ns, makes,
// or why it makes none. Its fields are read from vals, the release as
// the Flux unit applying it builds it, or from d itself when vals is
// nil; positions are always d's. by is the Flux unit applying it, or
// nil: a valuesFrom ConfigMap the repository does not declare may be
// one its build generates (source.Host's GeneratedValue).
func (Engine) HelmRelease(h source.Host, d *source.Document, vals *yaml.Node, ns string, srcRoots []string, by *source.Unit) source.Found {
	if vals == nil {
		vals = d.Node
	}
	name := source.StringField(source.Lookup(vals, "metadata"), "name")
	ns = cmp.Or(ns, "default")
	what := "Flux HelmRelease " + ns + "/" + name
	at := fieldPos(d, true)
	spec := source.Lookup(vals, "spec")
	if ref := source.Lookup(spec, "chartRef"); ref != nil {
		return source.Found{Pos: at("spec", "chartRef"), Skip: fmt.Sprintf("%s renders the chart of %s %s, which keyhole does not fetch; out of reach, skipped",
			what, cmp.Or(source.StringField(ref, "kind"), "OCIRepository"), source.StringField(ref, "name"))}
	}
	chartSpec := source.Lookup(source.Lookup(spec, "chart"), "spec")
	ref := source.Lookup(chartSpec, "sourceRef")
	from := source.FluxSource{
		Kind:      cmp.Or(source.StringField(ref, "kind"), "HelmRepository"),
		Namespace: cmp.Or(source.StringField(ref, "namespace"), ns),
		Name:      source.StringField(ref, "name"),
	}
	if from.Kind != "GitRepository" || !h.OwnFluxSource(from) {
		return source.Found{Pos: at("spec", "chart", "spec", "sourceRef"), Skip: fmt.Sprintf("%s renders the chart %s of %s %s/%s, not a chart directory of this repository (GitRepository %s); out of reach, skipped",
			what, source.StringField(chartSpec, "chart"), from.Kind, from.Namespace, from.Name, ownSourcesText(h))}
	}
	rel := source.StringField(chartSpec, "chart")
	root, srcRoot := h.EnginePath(rel, srcRoots)
	if root == "" && !h.FluxSourceDeclared(from) {
		// As for a Kustomization: written for another repository.
		return source.Found{Pos: at("spec", "chart", "spec", "chart"), Unread: fmt.Sprintf(
			"%s renders the chart %q of GitRepository %s/%s, which this repository does not declare; keyhole takes that source for this repository by its name, as Flux's bootstrap names it, but the chart is not a directory here, so the release is written for another repository and keyhole does not read it: if it deploys this repository, declare its GitRepository here or map the source to the directory that is its root in keyhole.yaml's flux.sources (kind: GitRepository, namespace: %s, name: %s, path: DIR)",
			what, rel, from.Namespace, from.Name, from.Namespace, from.Name)}
	}
	if root == "" || !h.HelmChart(root) {
		return source.Found{Pos: at("spec", "chart", "spec", "chart"), Chart: true, Err: fmt.Sprintf(
			"%s: spec.chart.spec.chart %q is not a chart directory of this repository (no Chart.yaml); source-controller fails to build it", what, rel)}
	}
	target := source.StringField(spec, "targetNamespace")
	release := source.StringField(spec, "releaseName")
	if release == "" {
		release = name
		if target != "" {
			release = target + "-" + name
		}
	}
	hr := &source.HelmOverlay{
		ReleaseName: shortReleaseName(release),
		Namespace:   cmp.Or(target, ns),
		SkipCRDs:    source.StringField(source.Lookup(spec, "install"), "crds") == "Skip",
	}
	ignoreMissing := source.BoolField(chartSpec, "ignoreMissingValuesFiles")
	for _, f := range source.StringList(source.Lookup(chartSpec, "valuesFiles")) {
		// Relative to the source's root, and replacing the chart's
		// values.yaml (which counts only when listed).
		abs := filepath.Join(srcRoot, filepath.FromSlash(path.Clean("/"+f)))
		if h.OutsideRepo(srcRoot, abs) {
			hr.Invalid = cmp.Or(hr.Invalid, fmt.Sprintf("values file %s is outside the repository (in a .git directory, or through a symbolic link leading out), which keyhole never reads", f))
			continue
		}
		if fi, err := h.Stat(abs); err != nil || !fi.Mode().IsRegular() {
			if ignoreMissing {
				continue
			}
			hr.Invalid = cmp.Or(hr.Invalid, fmt.Sprintf("values file %s is not a file of this repository; source-controller fails to build the chart", f))
			continue
		}
		hr.ChartValues = append(hr.ChartValues, abs)
	}
	if hr.ChartValues == nil && source.Lookup(chartSpec, "valuesFiles") != nil && ignoreMissing {
		hr.ChartValues = []string{}
	}
	var unread []string
	if vf := source.Lookup(spec, "valuesFrom"); vf != nil && vf.Kind == yaml.SequenceNode {
		for _, e := range vf.Content {
			kind, name := source.StringField(e, "kind"), source.StringField(e, "name")
			key := cmp.Or(source.StringField(e, "valuesKey"), "values.yaml")
			value, found := "", false
			if kind == "ConfigMap" {
				if cm := heldFor(h, srcRoot, nil)("ConfigMap", ns, name); cm != nil {
					if data := source.Lookup(source.Lookup(cm.Node, "data"), key); data != nil && data.Kind == yaml.ScalarNode {
						value, found = data.Value, true
					}
				} else {
					value, found = h.GeneratedValue(by, ns, name, key)
				}
			}
			if !found {
				if !source.BoolField(e, "optional") {
					unread = append(unread, kind+" "+name)
				}
				continue
			}
			hr.From = append(hr.From, source.HelmValuesFrom{Value: value, TargetPath: source.StringField(e, "targetPath")})
		}
	}
	if v := source.Lookup(spec, "values"); v != nil && v.Kind == yaml.MappingNode {
		hr.Values, _ = yaml.Marshal(v)
	}
	var notes []string
	if len(unread) > 0 {
		notes = append(notes, fmt.Sprintf("its valuesFrom %s, which the repository does not hold in the clear (a Secret's values keyhole never reads)", strings.Join(unread, ", ")))
	}
	if pr := source.Lookup(spec, "postRenderers"); pr != nil && pr.Kind == yaml.SequenceNode && len(pr.Content) > 0 {
		notes = append(notes, "its postRenderers")
	}
	if len(notes) > 0 {
		hr.Without = strings.Join(notes, " and ")
	}
	u := &source.Unit{
		Name:      "helmrelease:" + ns + "/" + name,
		Dir:       path.Join("helmrelease", ns, source.OutputDir(name)),
		Source:    source.UnitHelmRelease,
		Root:      root,
		Decl:      d.Pos,
		Namespace: hr.Namespace,
		Helm:      hr,
		Cluster:   kubeConfig(spec, ns),
	}
	return source.Found{Unit: u, Pos: d.Pos, SrcRoot: srcRoot}
}

// fieldPos gives the position in d of the field at a path of keys, or of
// the deepest of them d has; for no key at all, the node's own position,
// or d's when whole says so.
func fieldPos(d *source.Document, whole bool) func(field ...string) diag.Pos {
	return func(field ...string) diag.Pos {
		n := d.Node
		for _, f := range field {
			c := source.Lookup(n, f)
			if c == nil {
				break
			}
			n = c
		}
		if whole && n == d.Node {
			return d.Pos
		}
		return diag.Pos{File: d.File, Line: n.Line, Column: n.Column}
	}
}

// kubeConfig names the cluster an object of namespace ns with spec
// deploys to when its spec.kubeConfig names another; "" for the
// cluster Flux runs in.
func kubeConfig(spec *yaml.Node, ns string) string {
	kc := source.Lookup(spec, "kubeConfig")
	if kc == nil {
		return ""
	}
	return "kubeConfig " + ns + "/" + source.StringField(source.Lookup(kc, "secretRef"), "name")
}

// shortReleaseName is a release name as helm-controller makes it fit
// Helm's limit of 53 characters: a longer one keeps its first 40, a
// hyphen and the first 12 hexadecimal digits of its SHA-256.
func shortReleaseName(name string) string {
	if len(name) <= 53 {
		return name
	}
	return name[:40] + "-" + fmt.Sprintf("%x", sha256.Sum256([]byte(name)))[:12]
}
