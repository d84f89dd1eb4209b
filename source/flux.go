package source

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/resmap"

	"keyhole.dev/keyhole/diag"
)

// A repository deployed by Flux says what a cluster applies in Flux's own
// objects: each Kustomization (kustomize.toolkit.fluxcd.io) builds its
// spec.path, relative to the root of the source it names, with
// kustomize-controller's semantics. keyhole reads such a repository the
// same way, with the library kustomize-controller builds with
// (github.com/fluxcd/pkg/kustomize): it generates the kustomization Flux
// generates (targetNamespace, namePrefix, nameSuffix, patches, images,
// components; one listing the path's files where the path has none),
// builds it with load restrictions off, and applies postBuild
// substitution. See docs/inputs.md.

// fluxGroup is the API group of Flux's Kustomization.
const fluxGroup = "kustomize.toolkit.fluxcd.io/"

// fluxOwnSource is the name Flux's bootstrap gives the GitRepository of
// the repository it is bootstrapped into: a Kustomization whose sourceRef
// names it builds from this repository.
const fluxOwnSource = "flux-system"

// CodeInputNotDeployed is reported at a file that names keyhole's kinds
// and lies under the path of a GitOps engine's unit that does not deploy
// it: the cluster never sees it, and keyhole does not check it as if it
// did.
const CodeInputNotDeployed = "InputNotDeployed"

// FluxOverlay is what kustomize-controller applies to a Flux unit's path:
// the Kustomization object as the repository writes it.
type FluxOverlay struct {
	// Object is the Kustomization, as Flux's library reads it.
	Object unstructured.Unstructured
	// SourceRoot is the root of the source spec.path is relative to
	// (absolute, OS form).
	SourceRoot string
}

// fluxFound is a Flux Kustomization a scan found: the unit it makes, or
// why it makes none.
type fluxFound struct {
	unit *Unit
	// skip, when not empty, is why the object makes no unit here (its
	// source is another repository): said once, at pos.
	skip string
	pos  diag.Pos
	// err is a mistake in the object that Flux would refuse it for.
	err string
	// declDir is the directory of the file declaring it, relative to
	// its source's root.
	declDir string
	// srcRoot is the root of the source its path is relative to.
	srcRoot string
}

// fluxUnits finds the Flux Kustomizations in the files under the named
// directories (kustomize directories included: a cluster's kustomization
// lists them) and returns the units they make. Units of two objects of one
// namespace and name (the same Kustomization in two clusters' trees) are
// told apart by the file that declares them.
func (l *loader) engineUnits(paths []string) ([]*Unit, diag.List) {
	var found []fluxFound
	var ds diag.List
	scanned := map[string]bool{}
	for _, p := range paths {
		if p == "-" {
			continue
		}
		abs := l.osPath(p)
		fi, err := l.fsys.Stat(abs)
		if err != nil || !fi.IsDir() {
			continue
		}
		srcRoots := []string{l.sourceRoot(abs)}
		if srcRoots[0] != abs {
			srcRoots = append(srcRoots, abs)
		}
		for _, f := range walkAll(l.fsys, abs, &l.paths) {
			if scanned[f] {
				continue
			}
			scanned[f] = true
			data := l.sniff(f, nil)
			if data == nil || !bytes.Contains(data, []byte(fluxGroup)) && !bytes.Contains(data, []byte(argoGroup)) {
				continue
			}
			docs, _ := Parse(l.under(p, abs, f), data)
			for _, d := range docs {
				o := d.Object()
				var ffs []fluxFound
				switch {
				case strings.HasPrefix(o.APIVersion, fluxGroup) && o.Kind == "Kustomization":
					ffs = []fluxFound{l.fluxUnit(d, cmp.Or(o.Namespace, l.listedNamespace(f, srcRoots[0])), srcRoots)}
				case strings.HasPrefix(o.APIVersion, argoGroup) && (o.Kind == "Application" || o.Kind == "ApplicationSet"):
					ffs = l.argoUnits(d, srcRoots)
				}
				for _, ff := range ffs {
					if ff.unit != nil {
						ff.unit.declFile = f
						ff.declDir = filepath.ToSlash(relOrAbs(ff.srcRoot, filepath.Dir(f)))
					}
					found = append(found, ff)
				}
			}
		}
	}
	// Names, made unique.
	byName := map[string]int{}
	for _, f := range found {
		if f.unit != nil {
			byName[f.unit.Name]++
		}
	}
	var units []*Unit
	for _, f := range found {
		switch {
		case f.err != "":
			ds = append(ds, diag.Diagnostic{Code: CodeKustomizeBuildFailed, Severity: diag.Error, Pos: f.pos, Message: f.err})
			continue
		case f.skip != "":
			ds = append(ds, skipped(f.pos, f.skip))
			continue
		}
		u := f.unit
		if byName[u.Name] > 1 {
			// The same Kustomization in two clusters' trees: told apart
			// by the directory declaring it.
			u.Name += "@" + f.declDir
			u.Dir = path.Join(string(u.Source), outputDir(f.declDir), strings.TrimPrefix(u.Dir, string(u.Source)+"/"))
		}
		u.ID = u.Name
		units = append(units, u)
	}
	fluxClusters(units)
	return units, ds
}

// fluxUnit is the unit the Flux Kustomization d makes. Its spec.path is
// relative to the root of the repository it was found in, the first of
// srcRoots; where it names no directory there, to the next one (the
// directory named on the command line, for a repository kept inside
// another).
func (l *loader) fluxUnit(d *Document, ns string, srcRoots []string) fluxFound {
	o := d.Object()
	ns = cmp.Or(ns, fluxOwnSource)
	pos := d.Pos
	at := func(field ...string) diag.Pos {
		n := d.Node
		for _, f := range field {
			if c := Lookup(n, f); c != nil {
				n = c
			} else {
				break
			}
		}
		return diag.Pos{File: d.File, Line: n.Line, Column: n.Column}
	}
	spec := Lookup(d.Node, "spec")
	ref := Lookup(spec, "sourceRef")
	refName, refNs := stringField(ref, "name"), cmp.Or(stringField(ref, "namespace"), ns)
	if refName != fluxOwnSource || refNs != fluxOwnSource {
		return fluxFound{pos: at("spec", "sourceRef"), skip: fmt.Sprintf(
			"Flux Kustomization %s/%s builds from %s %s/%s, not from this repository (%s/%s, as Flux's bootstrap names it); out of reach, skipped",
			ns, o.Name, cmp.Or(stringField(ref, "kind"), "GitRepository"), refNs, refName, fluxOwnSource, fluxOwnSource)}
	}
	rel := stringField(spec, "path")
	clean := path.Clean("/" + filepath.ToSlash(rel))
	var root, srcRoot string
	for _, r := range srcRoots {
		p := filepath.Join(r, filepath.FromSlash(clean))
		if fi, err := l.fsys.Stat(p); err == nil && fi.IsDir() {
			root, srcRoot = p, r
			break
		}
	}
	if root == "" {
		return fluxFound{pos: at("spec", "path"), err: fmt.Sprintf(
			"Flux Kustomization %s/%s: spec.path %q is not a directory of this repository; kustomize-controller fails to build it", ns, o.Name, rel)}
	}
	var m map[string]any
	if err := d.Node.Decode(&m); err != nil {
		return fluxFound{pos: pos, err: fmt.Sprintf("Flux Kustomization %s/%s cannot be read: %v", ns, o.Name, err)}
	}
	js, err := json.Marshal(m)
	var obj unstructured.Unstructured
	if err == nil {
		err = obj.UnmarshalJSON(js)
	}
	if err != nil {
		return fluxFound{pos: pos, err: fmt.Sprintf("Flux Kustomization %s/%s cannot be read: %v", ns, o.Name, err)}
	}
	obj.SetNamespace(ns)
	name := "flux:" + ns + "/" + o.Name
	u := &Unit{
		Name:   name,
		Dir:    path.Join("flux", ns, outputDir(o.Name)),
		Source: UnitFlux,
		Root:   root,
		Decl:   pos,
		Flux:   &FluxOverlay{Object: obj, SourceRoot: srcRoot},
	}
	if kc := Lookup(spec, "kubeConfig"); kc != nil {
		u.Cluster = "kubeConfig " + ns + "/" + stringField(Lookup(kc, "secretRef"), "name")
	}
	return fluxFound{unit: u, pos: pos, srcRoot: srcRoot}
}

// listedNamespace is the namespace the kustomization that lists the file
// abs sets (kustomize's namespace field), or "": the namespace a Flux
// Kustomization written without one is applied in. The kustomization is
// the nearest one, up to root, whose resources name the file.
func (l *loader) listedNamespace(abs, root string) string {
	for dir := filepath.Dir(abs); within(root, dir); dir = filepath.Dir(dir) {
		if k := kustomizationFile(l.fsys, dir); k != "" {
			n := kustomizationNode(l.fsys, k)
			rel := filepath.ToSlash(relOrAbs(dir, abs))
			for _, r := range stringList(Lookup(n, "resources")) {
				if path.Clean(r) == rel {
					return stringField(n, "namespace")
				}
			}
		}
		if dir == root || filepath.Dir(dir) == dir {
			break
		}
	}
	return ""
}

// fluxClusters says which cluster each Flux unit deploys to: the one of
// the unit that deploys the file declaring it, up to a unit no other
// deploys (a cluster's flux-system), whose own path names the cluster.
// Objects declared outside every Flux unit's path deploy to the cluster
// keyhole's caller means ("").
func fluxClusters(units []*Unit) {
	var fl []*Unit
	for _, u := range units {
		if u.Flux != nil {
			fl = append(fl, u)
		}
	}
	units = fl
	parent := func(u *Unit) *Unit {
		var best *Unit
		for _, v := range units {
			if v != u && v.Flux != nil && declaredUnder(u, v) && (best == nil || len(v.Root) > len(best.Root)) {
				best = v
			}
		}
		return best
	}
	for _, u := range units {
		if u.Cluster != "" {
			continue
		}
		top, seen := u, map[*Unit]bool{}
		for p := parent(top); p != nil && !seen[p]; p = parent(top) {
			seen[top] = true
			if p.Cluster != "" {
				top = p
				break
			}
			top = p
		}
		switch {
		case top.Cluster != "":
			u.Cluster = top.Cluster
		case top != u || declaredUnder(u, u):
			u.Cluster = "flux " + filepath.ToSlash(relOrAbs(top.Flux.SourceRoot, top.Root))
		}
	}
}

// declaredUnder reports whether u's Kustomization is declared in a file
// under v's path.
func declaredUnder(u, v *Unit) bool {
	return within(v.Root, u.declFile)
}

// within reports whether abs is dir or under it (both absolute, OS form).
func within(dir, abs string) bool {
	rel, err := filepath.Rel(dir, abs)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func relOrAbs(base, abs string) string {
	if rel, err := filepath.Rel(base, abs); err == nil {
		return rel
	}
	return abs
}

// sourceRoot is the root of the repository holding the directory abs:
// the enclosing git working tree (a commit's tree stands at its working
// tree's place), else abs itself.
func (l *loader) sourceRoot(abs string) string {
	if t := l.opts.Tree; t != nil {
		return t.root
	}
	if r := l.gitRoot(abs); r != "" {
		return r
	}
	return abs
}

// sniff returns the bytes of the regular file abs when they hold marker
// and the file is within the size limit, else nil.
func (l *loader) sniff(abs string, marker []byte) []byte {
	fi, err := l.fsys.Stat(abs)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > l.opts.MaxFileSize {
		return nil
	}
	data, err := l.fsys.ReadFile(abs)
	if err != nil || !bytes.Contains(data, marker) {
		return nil
	}
	return data
}

// walkAll lists every input file under root, the files of kustomize
// directories included (Flux objects stand in a cluster's kustomization).
func walkAll(fsys fileSystem, root string, filter *pathFilter) []string {
	w := walk(fsys, root, filter)
	var out []string
	for _, f := range w.files {
		if fi, err := fsys.Stat(f); err == nil && fi.IsDir() {
			out = append(out, walkAll(fsys, f, filter)...)
			continue
		}
		out = append(out, f)
	}
	// A kustomize directory's own walk skips nothing a walk of it would
	// not; its kustomization file is configuration, not objects.
	return out
}

// coveredBy returns the Flux unit whose path holds abs, the deepest one,
// or nil.
func coveredBy(units []*Unit, abs string) *Unit {
	var best *Unit
	for _, u := range units {
		if within(u.Root, abs) && (best == nil || len(u.Root) > len(best.Root)) {
			best = u
		}
	}
	return best
}

// fluxManifest is the kustomization Flux builds u's path with, and the
// path it stands at: the path's own, with the Kustomization's fields
// applied, or one Flux generates.
func (l *loader) fluxManifest(u *Unit) (data []byte, kfile string, err error) {
	defer func() {
		if r := recover(); r != nil {
			data, kfile, err = nil, "", fmt.Errorf("Flux's generator failed on this input")
		}
	}()
	root, dir := u.Flux.SourceRoot, u.Root
	if _, onDisk := l.fsys.(osFS); !onDisk {
		// Flux's generator reads the disk: a commit's files are laid
		// out for it in a directory of their own.
		tmp, err := os.MkdirTemp("", "keyhole-flux-")
		if err != nil {
			return nil, "", err
		}
		defer os.RemoveAll(tmp)
		rel, _ := filepath.Rel(root, dir)
		if err := copyTree(l.fsys, dir, filepath.Join(tmp, rel), l.opts.MaxFileSize); err != nil {
			return nil, "", err
		}
		data, kfile, _, err := fluxkustomize.NewGenerator(tmp, u.Flux.Object).GenerateManifest(filepath.Join(tmp, rel))
		if err != nil {
			return nil, "", err
		}
		return data, filepath.Join(dir, filepath.Base(kfile)), nil
	}
	data, kfile, _, err = fluxkustomize.NewGenerator(root, u.Flux.Object).GenerateManifest(dir)
	return data, kfile, err
}

// copyTree copies the YAML files (and kustomization files) under src, read
// through fsys, to dst on disk.
func copyTree(fsys fileSystem, src, dst string, maxSize int64) error {
	entries, err := fsys.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	for _, e := range entries {
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		fi, err := fsys.Stat(s)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			if err := copyTree(fsys, s, d, maxSize); err != nil {
				return err
			}
			continue
		}
		if !fi.Mode().IsRegular() || fi.Size() > maxSize || !(inputExt(e.Name()) || isKustomizationName(e.Name())) {
			continue
		}
		data, err := fsys.ReadFile(s)
		if err != nil {
			return err
		}
		if err := os.WriteFile(d, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// substitute applies u's postBuild substitution to what kustomize built,
// as kustomize-controller does after the build; vars are read from the
// ConfigMaps and Secrets the repository declares.
func (l *loader) substitute(u *Unit, m resmap.ResMap) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("Flux's substitution failed on this input")
		}
	}()
	obj := u.Flux.Object
	if _, ok, _ := unstructured.NestedMap(obj.Object, "spec", "postBuild"); !ok {
		return nil
	}
	_, from, _ := unstructured.NestedSlice(obj.Object, "spec", "postBuild", "substituteFrom")
	c := &repoClient{l: l, root: u.Flux.SourceRoot, unknown: map[string]string{}}
	if from {
		// A variable that only an object the repository does not hold
		// (or holds encrypted) can give stays as written: keyhole does
		// not know its value, and an empty one would be a finding of
		// its own making.
		used := map[string]bool{}
		for _, r := range m.Resources() {
			if y, err := r.AsYAML(); err == nil {
				for _, v := range varRef.FindAllSubmatch(y, -1) {
					used[string(v[1])] = true
				}
			}
		}
		known := c.knownVars(obj)
		for v := range used {
			if !known[v] {
				c.unknown[v] = "${" + v + "}"
			}
		}
	}
	for _, r := range m.Resources() {
		if _, err := fluxkustomize.SubstituteVariables(context.Background(), c, obj, r, fluxkustomize.SubstituteWithDryRun(!from)); err != nil {
			return err
		}
	}
	return nil
}

// varRef is a variable reference Flux substitutes: ${NAME}, ${NAME:=x}.
var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)

// knownVars are the variables the substituteFrom objects of obj that the
// repository holds in the clear give.
func (c *repoClient) knownVars(obj unstructured.Unstructured) map[string]bool {
	known := map[string]bool{}
	refs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "postBuild", "substituteFrom")
	for _, r := range refs {
		m, _ := r.(map[string]any)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		if d := c.lookup(kind, obj.GetNamespace(), name); d != nil {
			for k := range stringMap(Lookup(d.Node, "data")) {
				known[k] = true
			}
			for k := range stringMap(Lookup(d.Node, "stringData")) {
				known[k] = true
			}
		}
	}
	return known
}

// repoClient answers Flux's library the one question substitution asks a
// cluster, a ConfigMap's or Secret's data, from the repository's files.
// Every other method is the nil client's: substitution calls none.
type repoClient struct {
	client.Client
	l    *loader
	root string
	objs map[[3]string]*Document
	// byName holds the first object of each kind and name, for an object
	// whose namespace a kustomization sets where the file names none.
	byName map[[2]string]*Document
	// unknown are the variables an object the repository does not hold
	// in the clear stands for, each as written.
	unknown map[string]string
}

// lookup returns the ConfigMap or Secret of kind, namespace and name the
// repository holds in the clear: in that namespace, else of that name in
// any.
func (c *repoClient) lookup(kind, ns, name string) *Document {
	if c.objs == nil {
		c.index()
	}
	if d := c.objs[[3]string{kind, ns, name}]; d != nil {
		return d
	}
	return c.byName[[2]string{kind, name}]
}

// Get fills obj with the ConfigMap or Secret of key the repository
// declares, or says it is not found.
func (c *repoClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		o.Data = map[string]string{}
		d := c.lookup("ConfigMap", key.Namespace, key.Name)
		if d == nil {
			for k, v := range c.unknown {
				o.Data[k] = v
			}
			return nil
		}
		for k, v := range stringMap(Lookup(d.Node, "data")) {
			o.Data[k] = v
		}
	case *corev1.Secret:
		o.Data = map[string][]byte{}
		d := c.lookup("Secret", key.Namespace, key.Name)
		if d == nil {
			for k, v := range c.unknown {
				o.Data[k] = []byte(v)
			}
			return nil
		}
		// A Secret's values never enter what keyhole reads: each of its
		// variables stays as written, so no diagnostic, render or diff
		// can quote one.
		for _, field := range []string{"data", "stringData"} {
			for k := range stringMap(Lookup(d.Node, field)) {
				o.Data[k] = []byte("${" + k + "}")
			}
		}
	default:
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	return nil
}

// index reads the ConfigMaps and Secrets of the repository once.
func (c *repoClient) index() {
	c.objs = map[[3]string]*Document{}
	c.byName = map[[2]string]*Document{}
	for _, f := range walkAll(c.l.fsys, c.root, &c.l.paths) {
		data := c.l.sniff(f, []byte("kind"))
		if data == nil || !(bytes.Contains(data, []byte("ConfigMap")) || bytes.Contains(data, []byte("Secret"))) {
			continue
		}
		docs, _ := Parse(f, data)
		for _, d := range docs {
			o := d.Object()
			if o.APIVersion != "v1" || (o.Kind != "ConfigMap" && o.Kind != "Secret") || Lookup(d.Node, "sops") != nil {
				continue
			}
			k := [3]string{o.Kind, cmp.Or(o.Namespace, "default"), o.Name}
			if c.objs[k] == nil {
				c.objs[k] = d
			}
			if n := [2]string{o.Kind, o.Name}; c.byName[n] == nil {
				c.byName[n] = d
			}
		}
	}
}

// stringMap returns a mapping node's string values by key.
func stringMap(n *yaml.Node) map[string]string {
	out := map[string]string{}
	if n == nil || n.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if v := n.Content[i+1]; v.Kind == yaml.ScalarNode {
			out[n.Content[i].Value] = v.Value
		}
	}
	return out
}

// buildFlux builds the Flux unit u as kustomize-controller does, and says
// which files under its path that name keyhole's kinds it does not
// deploy.
func (l *loader) buildFlux(u *Unit) {
	named := u.Root
	if rel, err := filepath.Rel(l.dir, u.Root); err == nil && within(l.dir, u.Root) {
		named = rel
	}
	if !l.kustomizationMatters(u.Root) {
		l.diags = append(l.diags, skipped(u.Decl, "Flux Kustomization "+strings.TrimPrefix(u.Name, "flux:")+" not built: nothing under its path names keyhole's kinds or declares a Secret"))
		return
	}
	kdata, kfile, err := l.fluxManifest(u)
	if err != nil {
		l.diags = append(l.diags, diag.Diagnostic{Code: CodeKustomizeBuildFailed, Severity: diag.Error, Pos: u.Decl, Units: []string{u.Name},
			Message: fmt.Sprintf("Flux cannot generate the kustomization of %s: %v", strings.TrimPrefix(u.Name, "flux:"), err)})
		return
	}
	bo := l.buildOptions()
	bo.kfile, bo.kdata = filepath.Clean(kfile), kdata
	m, read, err := kustomize(l.fsys, u.Root, bo)
	if err == nil {
		err = l.substitute(u, m)
	}
	l.buildKustomizationFrom(u, named, u.Root, true, &kustomizeRun{m: m, read: read, err: err})
	if err == nil {
		l.notDeployed(u, named, read)
	}
}

// notDeployed says, for each file under the engine unit u's path that
// names keyhole's kinds, that the unit's build (which read the files of
// read) does not deploy it.
func (l *loader) notDeployed(u *Unit, named string, read map[string][]byte) {
	what := "Flux Kustomization " + strings.TrimPrefix(u.Name, "flux:")
	if u.Argo != nil {
		what = "Argo CD Application " + strings.TrimPrefix(u.Name, "argocd:")
	}
	deployed := map[string]bool{}
	for f := range read {
		deployed[filepath.Clean(f)] = true
	}
	for _, f := range walkAll(l.fsys, u.Root, &l.paths) {
		if deployed[f] || coveredBy(l.engine, f) != u {
			continue
		}
		data := l.sniff(f, nil)
		if data == nil || !namesKeyhole(f, data) {
			continue
		}
		l.diags = append(l.diags, diag.Diagnostic{
			Code:     CodeInputNotDeployed,
			Severity: diag.Warning,
			Pos:      diag.Pos{File: l.display(f, f), Line: 1, Column: 1},
			Units:    []string{u.Name},
			Message: fmt.Sprintf("this file names keyhole's kinds, but %s (%s) does not deploy it: what it builds of %s does not include it, so keyhole does not check it; list it in that path's kustomization, or move it out of that path",
				what, u.Decl, l.display(named, u.Root)),
		})
	}
}
