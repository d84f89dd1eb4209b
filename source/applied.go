package source

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/kustbuild"
)

// Which engine unit applies what: a Flux Kustomization, or an Argo CD
// Application, applies the engine objects its build holds (a cluster's
// apps Kustomization lists each app's Kustomization, an app of apps its
// Applications), as that build writes them. Both engines ask it: the
// units applying a file (appliers), what a unit's build may read
// (buildReads), and an applied object as the applying unit's build writes
// it (appliedAs).

// applyingBuild is the build of a Flux unit whose path holds other Flux
// Kustomizations or HelmReleases, with those it wrote.
type applyingBuild struct {
	run  kustomizeRun
	objs []builtObject
	// err says why the build gave nothing to read; said once per
	// declaration (loader.failedSaid).
	err error
}

// builtObject is a Flux Kustomization or HelmRelease as a build wrote
// it.
type builtObject struct {
	file           string // absolute: the file it was written in
	kind, name, ns string
	node           *yaml.Node
}

// appliers are the units of found that apply the object declared in
// file, in found's order: of those applying takes, other than those self
// takes (the object's own units), the deepest whose path holds the file
// (each of those sharing that path), then each whose kustomization
// reaches the file from outside its path, as two clusters' overlays list
// one base.
func (l *loader) appliers(file string, found []engineFound, self func(engineFound) bool, applying func(*Unit) bool) []*Unit {
	var deep, reach []*Unit
	for _, f := range found {
		u := f.unit
		if u == nil || !applying(u) || self != nil && self(f) {
			continue
		}
		switch {
		case within(u.Root, file):
			if !l.holds(u, file) {
				continue // its kustomization does not list the file
			}
			if len(deep) == 0 || len(u.Root) > len(deep[0].Root) {
				deep = []*Unit{u}
			} else if u.Root == deep[0].Root {
				deep = append(deep, u)
			}
		case l.reached(u)[file]:
			reach = append(reach, u)
		}
	}
	return append(deep, reach...)
}

// reached is the set of files outside the engine unit u's path that its
// build may read: those its kustomization (or the one Flux generates,
// which takes every file under the path), its components, and the
// kustomizations they use list through "..", as an overlay lists a base.
func (l *loader) reached(u *Unit) map[string]bool {
	return l.buildReads(u).outside
}

// holds reports whether the build of the engine unit u may read file,
// which lies under its path: a path with a kustomization applies only
// what that kustomization (and those it uses) lists, a path without one
// every YAML file under it, as Flux generates its kustomization. A file
// of the path that no kustomization lists is not applied.
func (l *loader) holds(u *Unit, file string) bool {
	r := l.buildReads(u)
	return r.all || r.inside[filepath.Clean(file)]
}

// buildFiles are the files the build of an engine unit may read.
type buildFiles struct {
	// outside are those outside its path, inside those under it.
	outside, inside map[string]bool
	// all says the walk went past maxScopeFiles: every file counts as
	// read.
	all bool
}

// buildReads is what the engine unit u's build may read, memoized by
// its path and components.
func (l *loader) buildReads(u *Unit) buildFiles {
	comps := engineComponents(u)
	key := u.Root + "\x00" + strings.Join(comps, "\x00")
	if r, ok := l.reach[key]; ok {
		return r
	}
	out := buildFiles{outside: map[string]bool{}, inside: map[string]bool{}}
	seen := map[string]bool{}
	guard := l.guardListing(u.Root)
	var visit func(p string, listed bool)
	visit = func(p string, listed bool) {
		p = filepath.Clean(p)
		if seen[p] {
			return
		}
		if len(seen) > maxScopeFiles {
			out.all = true
			return
		}
		seen[p] = true
		fi, err := l.fsys.Stat(p)
		if err != nil {
			return
		}
		if !fi.IsDir() {
			if !within(u.Root, p) {
				out.outside[p] = true
			} else if listed || inputExt(p) || isKustomizationName(filepath.Base(p)) {
				out.inside[p] = true
			}
			if isKustomizationName(filepath.Base(p)) {
				for _, ref := range l.scopeMemo.localPaths(l.fsys, p) {
					visit(filepath.Join(filepath.Dir(p), filepath.FromSlash(ref)), true)
				}
			}
			return
		}
		if k := kustomizationFile(l.fsys, p); k != "" {
			visit(k, true)
			return
		}
		if !within(u.Root, p) {
			return // kustomize refuses a directory without a kustomization
		}
		key, ok := guard.enter(p)
		if !ok {
			return
		}
		defer guard.leave(key)
		entries, _ := l.fsys.ReadDir(p)
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") {
				visit(filepath.Join(p, e.Name()), false)
			}
		}
	}
	visit(u.Root, false)
	for _, c := range comps {
		visit(filepath.Join(u.Root, filepath.FromSlash(c)), true)
	}
	if l.reach == nil {
		l.reach = map[string]buildFiles{}
	}
	l.reach[key] = out
	return out
}

// appliedAs is the Flux object of kind named name declared in file as
// the build of the Flux unit p writes it: nil when p does not change it
// or its build fails (said in ds, once), and it is read as written.
// applies is false when p's build does not hold it: p does not apply it.
func (l *loader) appliedAs(p *Unit, file, kind, name string, patches []kustomizePatch, ds *diag.List) (o *builtObject, applies bool) {
	if !l.mayChangeApplied(p, file, kind, patches) {
		return nil, true
	}
	if l.applying == nil {
		l.applying = map[*Unit]*applyingBuild{}
	}
	b := l.applying[p]
	if b == nil {
		b = l.buildApplying(p)
		l.applying[p] = b
	}
	if b.err != nil {
		*ds = append(*ds, l.applyingFailed(p, b)...)
		return nil, true
	}
	o = b.find(file, kind, name)
	return o, o != nil
}

// applyingFailed is what is said of the failed build b of the engine
// unit p, once for the object declaring it, whatever units it makes:
// nothing when p's own build, made again, reports why.
func (l *loader) applyingFailed(p *Unit, b *applyingBuild) diag.List {
	key := p.Decl.String() + " " + p.Name
	if l.failedSaid[key] || l.engineUnitMatters(p) {
		return nil
	}
	if l.failedSaid == nil {
		l.failedSaid = map[string]bool{}
	}
	l.failedSaid[key] = true
	// The message as a build's own error shows it: no Secret value, no
	// temporary directory.
	msg := l.scrub(l.unitName(p), p.Root, kustbuild.Redact(b.err.Error(), b.run.read))
	what, objs := "Flux Kustomization "+strings.TrimPrefix(p.Name, "flux:"), "the Flux objects it applies are read as written, without its patches and substitution"
	if p.Argo != nil {
		what, objs = "Argo CD Application "+strings.TrimPrefix(p.Name, "argocd:"), "the Applications it applies are read as written, without its kustomize options and patches"
	}
	return diag.List{{Code: CodeKustomizeBuildFailed, Severity: diag.Warning, Pos: p.Decl,
		Message: fmt.Sprintf("%s cannot be built (%s); %s", what, msg, objs)}}
}

// mayChangeApplied reports whether the build of the Flux unit p may
// write the Flux object of kind (Kustomization, HelmRelease) declared in
// file otherwise than as written: p patches, renames, moves or
// substitutes what it builds, or a kustomization on the way from p's
// path to the file patches or renames what it lists.
func (l *loader) mayChangeApplied(p *Unit, file, kind string, patches []kustomizePatch) bool {
	if !within(p.Root, file) {
		return true // listed from outside the path: an overlay's base
	}
	if p.Argo != nil {
		// The Application's kustomize options that rename, move or
		// patch what it builds.
		for _, k := range []string{"namePrefix", "nameSuffix", "namespace", "patches", "components"} {
			if v := Lookup(p.Argo.Kustomize, k); v != nil && (v.Value != "" || len(v.Content) > 0) {
				return true
			}
		}
		return l.listingChanges(p, file, kind, patches)
	}
	spec, _ := p.Flux.Object.Object["spec"].(map[string]any)
	for _, k := range []string{"patches", "components", "targetNamespace", "namePrefix", "nameSuffix"} {
		switch v := spec[k].(type) {
		case nil:
		case string:
			if v != "" {
				return true
			}
		case []any:
			if len(v) > 0 {
				return true
			}
		default:
			return true
		}
	}
	if _, ok := spec["postBuild"]; ok && bytes.Contains(l.sniff(file, nil), []byte("${")) {
		return true
	}
	return l.listingChanges(p, file, kind, patches)
}

// listingChanges reports whether a kustomization on the way from the
// unit p's path to file, which declares an object of kind, patches or
// renames what it lists, or one of patches (the patch files found) within
// p's path may select that kind.
func (l *loader) listingChanges(p *Unit, file, kind string, patches []kustomizePatch) bool {
	group := fluxGroup
	switch kind {
	case "HelmRelease":
		group = helmReleaseGroup
	case "Application", "ApplicationSet":
		group = argoGroup
	}
	for _, pt := range patches {
		if within(p.Root, pt.file) && (pt.kind == kind || pt.kind == "" && l.sniff(pt.file, []byte(group)) != nil) {
			return true
		}
	}
	for dir := filepath.Dir(file); within(p.Root, dir); dir = filepath.Dir(dir) {
		if k := kustomizationFile(l.fsys, dir); k != "" {
			n := kustomizationNode(l.fsys, k)
			for _, key := range []string{"patches", "patchesStrategicMerge", "patchesJson6902", "replacements", "namePrefix", "nameSuffix", "components", "transformers"} {
				if v := Lookup(n, key); v != nil && v.Value != "" || v != nil && len(v.Content) > 0 {
					return true
				}
			}
		}
		if dir == p.Root || filepath.Dir(dir) == dir {
			break
		}
	}
	return false
}

// buildApplying builds the Flux unit p as kustomize-controller does
// (prepareFlux), substitution included, and keeps the Flux
// Kustomizations it writes.
func (l *loader) buildApplying(p *Unit) *applyingBuild {
	b := &applyingBuild{}
	var kdata []byte
	var kfile string
	var err error
	if p.Argo != nil {
		kfile, kdata = l.argoManifest(p)
	} else {
		kdata, kfile, err = l.fluxManifest(p)
	}
	if err != nil {
		b.err = err
		return b
	}
	// Every build in a repository with Flux Kustomizations has load
	// restrictions off (buildOptions, which reads l.engine, not yet set).
	bo := kustbuild.Options{MaxSize: l.opts.MaxFileSize, AllowRemote: l.opts.AllowRemoteBases, Unrestricted: p.Flux != nil || l.anyFlux || l.fluxHeld,
		KFile: filepath.Clean(kfile), KData: kdata, Root: l.buildRoot(p.Root)}
	m, read, err := l.opts.Memo.build(l.fsys, p.Root, bo)
	if err == nil && p.Flux != nil {
		if _, ok, _ := unstructured.NestedMap(p.Flux.Object.Object, "spec", "postBuild"); ok {
			l.repoObjects(p.Flux.SourceRoot)
		}
		err = l.substitute(p, m)
	}
	b.run = kustomizeRun{m: m, read: read, err: err}
	if err != nil {
		b.err = err
		return b
	}
	for _, r := range m.Resources() {
		switch kind, av := r.GetKind(), r.GetApiVersion(); {
		case kind == "Kustomization" && strings.HasPrefix(av, fluxGroup):
		case kind == "HelmRelease" && strings.HasPrefix(av, helmReleaseGroup):
		case (kind == "Application" || kind == "ApplicationSet") && strings.HasPrefix(av, argoGroup):
		default:
			continue
		}
		origin, err := r.GetOrigin()
		if err != nil || origin == nil || origin.Repo != "" || origin.Path == "" {
			continue
		}
		node := kustbuild.BuiltNode(r)
		if node == nil {
			continue
		}
		kustbuild.StripBuildMetadata(node)
		b.objs = append(b.objs, builtObject{
			file: filepath.Join(p.Root, filepath.FromSlash(origin.Path)),
			kind: r.GetKind(), name: r.GetName(), ns: r.GetNamespace(), node: node,
		})
	}
	return b
}

// find is the object of kind named name in file as the build wrote it:
// of those of its kind written in the file, the one of its name, else
// the one whose name holds it (a prefix or suffix added), or nil.
func (b *applyingBuild) find(file, kind, name string) *builtObject {
	var near *builtObject
	for i := range b.objs {
		k := &b.objs[i]
		if k.file != file || k.kind != kind {
			continue
		}
		if k.name == name {
			return k
		}
		if near == nil && strings.Contains(k.name, name) {
			near = k
		}
	}
	return near
}
