package source

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// A Flux HelmRelease whose chart is a directory of this repository (its
// chart's sourceRef is the repository's own GitRepository) is rendered
// as helm-controller renders it: the chart's values, or the valuesFiles
// that replace them, then each valuesFrom the repository holds in the
// clear, then spec.values, for the release name and namespace Flux
// gives it. See docs/inputs.md, "Helm charts".

// UnitHelmRelease is a Flux HelmRelease's chart.
const UnitHelmRelease UnitSource = "helmrelease"

// helmReleaseGroup is the API group of Flux's HelmRelease.
const helmReleaseGroup = "helm.toolkit.fluxcd.io/"

// helmReleaseUnit is the unit the HelmRelease d, in namespace ns, makes.
// Its fields are read from vals, the release as the Flux unit applying
// it builds it (releaseApplied), or from d itself when vals is nil;
// positions are always d's. by is the Flux unit applying it, or nil: a
// valuesFrom ConfigMap the repository does not declare may be one its
// build generates (generatedValues).
func (l *loader) helmReleaseUnit(d *Document, vals *yaml.Node, ns string, srcRoots []string, by *Unit) engineFound {
	if vals == nil {
		vals = d.Node
	}
	name := stringField(Lookup(vals, "metadata"), "name")
	ns = cmp.Or(ns, "default")
	what := "Flux HelmRelease " + ns + "/" + name
	at := func(field ...string) diag.Pos {
		n := d.Node
		for _, f := range field {
			c := Lookup(n, f)
			if c == nil {
				break
			}
			n = c
		}
		if n == d.Node {
			return d.Pos
		}
		return diag.Pos{File: d.File, Line: n.Line, Column: n.Column}
	}
	spec := Lookup(vals, "spec")
	if ref := Lookup(spec, "chartRef"); ref != nil {
		return engineFound{pos: at("spec", "chartRef"), skip: fmt.Sprintf("%s renders the chart of %s %s, which keyhole does not fetch; out of reach, skipped",
			what, cmp.Or(stringField(ref, "kind"), "OCIRepository"), stringField(ref, "name"))}
	}
	chartSpec := Lookup(Lookup(spec, "chart"), "spec")
	ref := Lookup(chartSpec, "sourceRef")
	kind, refName, refNs := cmp.Or(stringField(ref, "kind"), "HelmRepository"), stringField(ref, "name"), cmp.Or(stringField(ref, "namespace"), ns)
	if kind != "GitRepository" || !l.ownSource(kind, refNs, refName) {
		return engineFound{pos: at("spec", "chart", "spec", "sourceRef"), skip: fmt.Sprintf("%s renders the chart %s of %s %s/%s, not a chart directory of this repository (GitRepository %s); out of reach, skipped",
			what, stringField(chartSpec, "chart"), kind, refNs, refName, l.ownSourcesText())}
	}
	rel := stringField(chartSpec, "chart")
	root, srcRoot := l.enginePath(rel, srcRoots)
	if root == "" || helmChartFile(l.fsys, root) == "" {
		return engineFound{pos: at("spec", "chart", "spec", "chart"), helm: true, err: fmt.Sprintf(
			"%s: spec.chart.spec.chart %q is not a chart directory of this repository (no Chart.yaml); source-controller fails to build it", what, rel)}
	}
	target := stringField(spec, "targetNamespace")
	release := stringField(spec, "releaseName")
	if release == "" {
		release = name
		if target != "" {
			release = target + "-" + name
		}
	}
	hr := &HelmOverlay{
		ReleaseName: shortReleaseName(release),
		Namespace:   cmp.Or(target, ns),
		SkipCRDs:    stringField(Lookup(spec, "install"), "crds") == "Skip",
	}
	ignoreMissing := boolField(chartSpec, "ignoreMissingValuesFiles")
	for _, f := range stringList(Lookup(chartSpec, "valuesFiles")) {
		// Relative to the source's root, and replacing the chart's
		// values.yaml (which counts only when listed).
		abs := filepath.Join(srcRoot, filepath.FromSlash(path.Clean("/"+f)))
		if l.outsideRepo(srcRoot, abs) {
			hr.Invalid = cmp.Or(hr.Invalid, fmt.Sprintf("values file %s is outside the repository (in a .git directory, or through a symbolic link leading out), which keyhole never reads", f))
			continue
		}
		if fi, err := l.fsys.Stat(abs); err != nil || !fi.Mode().IsRegular() {
			if ignoreMissing {
				continue
			}
			hr.Invalid = cmp.Or(hr.Invalid, fmt.Sprintf("values file %s is not a file of this repository; source-controller fails to build the chart", f))
			continue
		}
		hr.ChartValues = append(hr.ChartValues, abs)
	}
	if hr.ChartValues == nil && Lookup(chartSpec, "valuesFiles") != nil && ignoreMissing {
		hr.ChartValues = []string{}
	}
	var unread []string
	if vf := Lookup(spec, "valuesFrom"); vf != nil && vf.Kind == yaml.SequenceNode {
		objs := l.repoObjects(srcRoot)
		for _, e := range vf.Content {
			kind, name := stringField(e, "kind"), stringField(e, "name")
			key := cmp.Or(stringField(e, "valuesKey"), "values.yaml")
			value, found := "", false
			if kind == "ConfigMap" {
				if cm := (heldFor{objs: objs}).lookup("ConfigMap", ns, name); cm != nil {
					if data := Lookup(Lookup(cm.Node, "data"), key); data != nil && data.Kind == yaml.ScalarNode {
						value, found = data.Value, true
					}
				} else {
					value, found = l.generatedValues(by, ns, name, key)
				}
			}
			if !found {
				if !boolField(e, "optional") {
					unread = append(unread, kind+" "+name)
				}
				continue
			}
			hr.From = append(hr.From, HelmValuesFrom{Value: value, TargetPath: stringField(e, "targetPath")})
		}
	}
	if v := Lookup(spec, "values"); v != nil && v.Kind == yaml.MappingNode {
		hr.Values, _ = yaml.Marshal(v)
	}
	var notes []string
	if len(unread) > 0 {
		notes = append(notes, fmt.Sprintf("its valuesFrom %s, which the repository does not hold in the clear (a Secret's values keyhole never reads)", strings.Join(unread, ", ")))
	}
	if pr := Lookup(spec, "postRenderers"); pr != nil && pr.Kind == yaml.SequenceNode && len(pr.Content) > 0 {
		notes = append(notes, "its postRenderers")
	}
	u := &Unit{
		Name:      "helmrelease:" + ns + "/" + name,
		Dir:       path.Join("helmrelease", ns, outputDir(name)),
		Source:    UnitHelmRelease,
		Root:      root,
		Decl:      d.Pos,
		Namespace: hr.Namespace,
		Helm:      hr,
	}
	if len(notes) > 0 {
		hr.Without = strings.Join(notes, " and ")
	}
	if kc := Lookup(spec, "kubeConfig"); kc != nil {
		u.Cluster = "kubeConfig " + ns + "/" + stringField(Lookup(kc, "secretRef"), "name")
	}
	return engineFound{unit: u, pos: d.Pos, srcRoot: srcRoot}
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

// generatedValues is the value of key in the ConfigMap ns/name that the
// build of the Flux unit by writes, as helm-controller reads it from the
// cluster: one a configMapGenerator makes (merged with an overlay's,
// patched), named as written or as the build renames it (the hash
// suffix that a nameReference carries into the HelmRelease). found is
// false when by is nil, its build fails (which it says itself) or holds
// no such ConfigMap or key.
func (l *loader) generatedValues(by *Unit, ns, name, key string) (value string, found bool) {
	if by == nil || by.Flux == nil {
		return "", false
	}
	if l.applying == nil {
		l.applying = map[*Unit]*applyingBuild{}
	}
	b := l.applying[by]
	if b == nil {
		b = l.buildApplying(by)
		l.applying[by] = b
	}
	if b.err != nil || b.run.m == nil {
		return "", false
	}
	for _, r := range b.run.m.Resources() {
		if r.GetKind() != "ConfigMap" || r.GetApiVersion() != "v1" || cmp.Or(r.GetNamespace(), "default") != ns ||
			r.GetName() != name && r.OrgId().Name != name && !hashOf(r.GetName(), name) {
			continue
		}
		v, ok := r.GetDataMap()[key]
		return v, ok
	}
	return "", false
}

// hashOf reports whether built is name with the hash suffix kustomize's
// generators add: a hyphen and ten lowercase letters and digits.
func hashOf(built, name string) bool {
	h, ok := strings.CutPrefix(built, name+"-")
	return ok && len(h) == 10 && strings.Trim(h, "abcdefghijklmnopqrstuvwxyz0123456789") == ""
}
