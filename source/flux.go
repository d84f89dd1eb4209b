package source

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/konfig"
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

// sourceGroup is the API group of Flux's sources (GitRepository).
const sourceGroup = "source.toolkit.fluxcd.io/"

// CodeInputNotDeployed is reported at a file that names keyhole's kinds
// and lies under the path of a GitOps engine's unit that does not deploy
// it: the cluster never sees it, and keyhole does not check it as if it
// did.
const CodeInputNotDeployed = "InputNotDeployed"

// ownSourcesText names the sources ownSource accepts, for a message.
func (l *loader) ownSourcesText() string {
	text := fluxOwnSource + "/" + fluxOwnSource + ", as Flux's bootstrap names it"
	if len(l.ownSources) > 0 {
		text += ", or " + strings.Join(slices.Sorted(maps.Keys(l.ownSources)), ", ") + ", which a Kustomization applying the file declaring it builds from"
	}
	return text
}

// gitRepoDecl is a Flux GitRepository engineUnits' scan found.
type gitRepoDecl struct {
	ns, name string
	file     string // absolute
}

// findOwnSources sets l.ownSources: the GitRepositories of repos, in
// Flux's namespace, that a Flux Kustomization of found builds from and
// whose path holds the file declaring the GitRepository. That is how a
// repository syncs itself
// (Flux's bootstrap writes the GitRepository and the Kustomization over
// its directory side by side), whatever name it gives its source, as a
// repository bootstrapped by hand, or before flux-system was the
// convention, may do (home-kubernetes). It reports whether it found
// any.
func (l *loader) findOwnSources(found []engineFound, repos []gitRepoDecl) bool {
	for _, g := range repos {
		if l.ownSource("GitRepository", g.ns, g.name) || g.ns != fluxOwnSource {
			// Flux's own namespace holds a cluster's sync; a tenant's
			// namespace holds a tenant's, of its own repository or
			// branch, even where it applies its own file.
			continue
		}
		for _, f := range found {
			if f.flux == nil {
				continue
			}
			spec := Lookup(f.flux.d.Node, "spec")
			ref := Lookup(spec, "sourceRef")
			ns := cmp.Or(f.flux.ns, fluxOwnSource)
			if stringField(ref, "name") != g.name || cmp.Or(stringField(ref, "namespace"), ns) != g.ns || cmp.Or(stringField(ref, "kind"), "GitRepository") != "GitRepository" {
				continue
			}
			if root, _ := l.enginePath(stringField(spec, "path"), f.flux.srcRoots); root != "" && within(root, g.file) {
				if l.ownSources == nil {
					l.ownSources = map[string]bool{}
				}
				l.ownSources[g.ns+"/"+g.name] = true
				break
			}
		}
	}
	return len(l.ownSources) > 0
}

// fluxUnit is the unit the Flux Kustomization d makes. Its spec.path is
// relative to the root of the repository it was found in, the first of
// srcRoots; where it names no directory there, to the next one (the
// directory named on the command line, for a repository kept inside
// another). Its fields are read from vals, the object as the Flux unit
// applying it builds it (fluxApplied), or from d itself when vals is nil;
// positions are always d's.
func (l *loader) fluxUnit(d *Document, vals *yaml.Node, ns string, srcRoots []string) engineFound {
	if vals == nil {
		vals = d.Node
	}
	name := stringField(Lookup(vals, "metadata"), "name")
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
	spec := Lookup(vals, "spec")
	ref := Lookup(spec, "sourceRef")
	refName, refNs := stringField(ref, "name"), cmp.Or(stringField(ref, "namespace"), ns)
	refKind := cmp.Or(stringField(ref, "kind"), "GitRepository")
	declRoot := srcRoots[0]
	if dir := l.mappedSource(refKind, refNs, refName); dir != "" {
		srcRoots = []string{dir} // keyhole.yaml's flux.sources
	} else if roots, unread, ok := l.externalArtifact(ns, name, refNs, refName, stringField(spec, "path"), srcRoots); refKind == "ExternalArtifact" && ok {
		if unread != "" {
			return engineFound{pos: at("spec", "sourceRef"), unread: unread}
		}
		srcRoots = roots // an ArtifactGenerator's cut of a source keyhole reads
	} else if !l.ownSource(refKind, refNs, refName) {
		return engineFound{pos: at("spec", "sourceRef"), unread: l.unmapped(ns, name, refKind, refNs, refName)}
	}
	rel := stringField(spec, "path")
	if dir := l.renderedPath(rel, srcRoots); dir != "" {
		return engineFound{pos: at("spec", "path"), rendered: Lookup(spec, "kubeConfig") == nil, skip: fmt.Sprintf(
			"Flux Kustomization %s/%s applies %s, the directory `keyhole render` writes (keyhole.yaml's flux.rendered, or render's %s in it): it is keyhole's output, written from the inputs keyhole checks, not an input to check", ns, name, rel, renderMarker)}
	}
	root, srcRoot := l.enginePath(rel, srcRoots)
	if root == "" {
		return engineFound{pos: at("spec", "path"), err: fmt.Sprintf(
			"Flux Kustomization %s/%s: spec.path %q is not a directory of this repository; kustomize-controller fails to build it", ns, name, rel)}
	}
	var m map[string]any
	if err := vals.Decode(&m); err != nil {
		return engineFound{pos: pos, err: fmt.Sprintf("Flux Kustomization %s/%s cannot be read: %v", ns, name, err)}
	}
	js, err := json.Marshal(m)
	var obj unstructured.Unstructured
	if err == nil {
		err = obj.UnmarshalJSON(js)
	}
	if err != nil {
		return engineFound{pos: pos, err: fmt.Sprintf("Flux Kustomization %s/%s cannot be read: %v", ns, name, err)}
	}
	obj.SetNamespace(ns)
	u := &Unit{
		Name:   "flux:" + ns + "/" + name,
		Dir:    path.Join("flux", ns, outputDir(name)),
		Source: UnitFlux,
		Root:   root,
		Decl:   pos,
		Flux:   &FluxOverlay{Object: obj, SourceRoot: srcRoot},
	}
	if kc := Lookup(spec, "kubeConfig"); kc != nil {
		u.Cluster = "kubeConfig " + ns + "/" + stringField(Lookup(kc, "secretRef"), "name")
	}
	ef := engineFound{unit: u, pos: pos, srcRoot: srcRoot}
	if srcRoot != declRoot {
		ef.declRoot = declRoot
	}
	return ef
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
// deploys (a cluster's flux-system), whose own path names the cluster,
// or whose file is in one of keyhole.yaml's flux.entries, which then
// names it. Objects declared outside every Flux unit's path deploy to
// the cluster keyhole's caller means ("").
func (l *loader) fluxClusters(units []*Unit) {
	var fl []*Unit
	for _, u := range units {
		if u.Flux != nil {
			fl = append(fl, u)
		}
	}
	units = fl
	parent := func(u *Unit) *Unit {
		best := u.appliedBy
		if best != nil {
			return best
		}
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
		case l.entryOf(top.declFile) != "":
			e := l.entryOf(top.declFile)
			u.Cluster = "flux " + filepath.ToSlash(relOrAbs(l.sourceRoot(e), e))
		case top != u || declaredUnder(u, u):
			u.Cluster = "flux " + filepath.ToSlash(relOrAbs(top.Flux.SourceRoot, top.Root))
		}
	}
}

// fluxManifest is the kustomization Flux builds u's path with, and the
// path it stands at: the path's own, with the Kustomization's fields
// applied, or one Flux generates.
func (l *loader) fluxManifest(u *Unit) (data []byte, kfile string, err error) {
	defer func() {
		if r := recover(); r != nil {
			data, kfile, err = nil, "", errors.New("the Flux generator failed on this input")
		}
	}()
	root, dir := u.Flux.SourceRoot, u.Root
	if _, onDisk := l.fsys.(*osFS); !onDisk {
		// Flux's generator reads the disk: a commit's files are laid
		// out for it in a directory of their own.
		tmp, err := os.MkdirTemp("", "keyhole-flux-")
		if err != nil {
			return nil, "", err
		}
		defer os.RemoveAll(tmp)
		rel, _ := filepath.Rel(root, dir)
		if err := copyForFlux(l.fsys, u, root, dir, tmp, filepath.Join(tmp, rel), l.opts.MaxFileSize); err != nil {
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

// copyForFlux lays out at dst what Flux's generator reads of u's path
// dir, tmp standing for the source's root. The generator reads the path's
// kustomization file when it has one and nothing else; without one, it
// lists every YAML file under the path as a resource, except under a
// directory with a kustomization file, which it lists whole without
// looking inside. So only those files are copied, unless the
// Kustomization asks whether its components exist
// (ignoreMissingComponents): then the path is copied whole, and each
// component in the source outside the path is made to exist in the
// layout as it does in the source (the generator only asks whether it
// exists; kustomize reads it from the source itself).
func copyForFlux(fsys fileSystem, u *Unit, root, dir, tmp, dst string, maxSize int64) error {
	components, _, _ := unstructured.NestedStringSlice(u.Flux.Object.Object, "spec", "components")
	ignoreMissing, _, _ := unstructured.NestedBool(u.Flux.Object.Object, "spec", "ignoreMissingComponents")
	if len(components) > 0 && ignoreMissing {
		if err := copyTree(fsys, dir, dst, maxSize, false, new(int)); err != nil {
			return err
		}
		for _, c := range components {
			src := filepath.Join(dir, filepath.FromSlash(c))
			rel, err := filepath.Rel(root, src)
			if err != nil || !filepath.IsLocal(rel) {
				continue // outside the source: not in Flux's artifact either
			}
			fi, err := fsys.Stat(src)
			if err != nil {
				continue // missing: the generator leaves it out
			}
			at := filepath.Join(tmp, rel)
			if fi.IsDir() {
				err = os.MkdirAll(at, 0o700)
			} else if err = os.MkdirAll(filepath.Dir(at), 0o700); err == nil {
				if _, statErr := os.Stat(at); statErr != nil {
					err = os.WriteFile(at, nil, 0o600)
				}
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if done, err := copyKustomization(fsys, dir, dst, maxSize); done || err != nil {
		return err
	}
	return copyTree(fsys, dir, dst, maxSize, true, new(int))
}

// copyKustomization copies the kustomization file of src, the first of
// the names kustomize recognizes that copyTree would copy, to dst; false
// when src has none.
func copyKustomization(fsys fileSystem, src, dst string, maxSize int64) (bool, error) {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		p := filepath.Join(src, name)
		fi, err := fsys.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxSize {
			continue // copyTree would not copy it either
		}
		data, err := fsys.ReadFile(p)
		if err != nil {
			return true, err
		}
		if err := os.MkdirAll(dst, 0o700); err != nil {
			return true, err
		}
		return true, os.WriteFile(filepath.Join(dst, name), data, 0o600)
	}
	return false, nil
}

// maxFluxCopy bounds the files copyTree lays out on disk for one build:
// a commit's files are objects, and a few kilobytes of them can name
// millions of files (gitfs.MaxListedEntries), each written and removed.
const maxFluxCopy = 1 << 13

// errFluxCopy is copyTree's error past maxFluxCopy files.
var errFluxCopy = fmt.Errorf("the path holds more than %d files, more than keyhole lays out to build a commit's Flux path", maxFluxCopy)

// copyTree copies the YAML files (and kustomization files) under src, read
// through fsys, to dst on disk; with scanned, of a directory below src
// that has a kustomization file it copies only that file. copied counts
// the files copied, up to maxFluxCopy.
func copyTree(fsys fileSystem, src, dst string, maxSize int64, scanned bool, copied *int) error {
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
			if scanned {
				done, err := copyKustomization(fsys, s, d, maxSize)
				if err != nil {
					return err
				}
				if done {
					continue
				}
			}
			if err := copyTree(fsys, s, d, maxSize, scanned, copied); err != nil {
				return err
			}
			continue
		}
		if !fi.Mode().IsRegular() || fi.Size() > maxSize || !(inputExt(e.Name()) || isKustomizationName(e.Name())) {
			continue
		}
		if *copied++; *copied > maxFluxCopy {
			return errFluxCopy
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
			err = errors.New("the Flux substitution failed on this input")
		}
	}()
	obj := u.Flux.Object
	if _, ok, _ := unstructured.NestedMap(obj.Object, "spec", "postBuild"); !ok {
		return nil
	}
	_, from, _ := unstructured.NestedSlice(obj.Object, "spec", "postBuild", "substituteFrom")
	c := &repoClient{objs: l.repoObjects(u.Flux.SourceRoot), unknown: map[string]string{}, unit: u, scope: l.scope}
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
	objs *repoObjects
	// unit is the Flux unit substituting, and scope says which objects
	// its cluster's units deploy.
	unit  *Unit
	scope *fluxScope
	// unknown are the variables an object the repository does not hold
	// in the clear stands for, each as written.
	unknown map[string]string
}

// repoObjects are the ConfigMaps and Secrets a repository holds in the
// clear, read once per Load however many Flux units substitute from
// them.
type repoObjects struct {
	byKey map[[3]string][]heldObject
	// byName holds the objects of each kind and name, for an object
	// whose namespace a kustomization sets where the file names none.
	byName map[[2]string][]heldObject
}

// heldObject is a ConfigMap or Secret and the file (absolute) declaring
// it.
type heldObject struct {
	d    *Document
	file string
}

// lookup returns the ConfigMap or Secret of kind, namespace and name the
// repository holds in the clear: in that namespace, else of that name in
// any. Of several, it is the first that a unit of the substituting
// unit's cluster deploys, else one that no Flux unit deploys (nearFree);
// one only another cluster's units deploy is never read: prod's
// cluster-settings are not dev's.
func (c *repoClient) lookup(kind, ns, name string) *Document {
	pick := func(held []heldObject) *Document {
		var free []heldObject
		for _, o := range held {
			if c.scope == nil {
				return o.d
			}
			same, deployed := c.scope.deploys(c.unit, o.file)
			if same {
				return o.d
			}
			if !deployed {
				free = append(free, o)
			}
		}
		return c.nearFree(free)
	}
	if d := pick(c.objs.byKey[[3]string{kind, ns, name}]); d != nil {
		return d
	}
	return pick(c.objs.byName[[2]string{kind, name}])
}

// nearFree is, of the objects free that no Flux unit deploys, the one
// the substituting unit's cluster applies: the only one, or the one
// declared nearest the file declaring the top of the unit's chain of
// applying units. Nothing deploys that file either: what applies it (a
// FluxInstance's sync, a cluster's bootstrap) applies its directory,
// so clusters/b/apps.yaml substitutes from clusters/b/cluster-info.yaml,
// not from clusters/a's. Where two are equally near, the unit's cluster
// cannot be told and neither is read: the variables stay as written.
func (c *repoClient) nearFree(free []heldObject) *Document {
	switch len(free) {
	case 0:
		return nil
	case 1:
		return free[0].d
	}
	from := filepath.Dir(c.scope.top(c.unit).declFile)
	best, bestAt, tied := -1, -1, false
	for i, o := range free {
		n := commonDirs(from, filepath.Dir(o.file))
		switch {
		case n > best:
			best, bestAt, tied = n, i, false
		case n == best:
			tied = true
		}
	}
	if tied {
		return nil
	}
	return free[bestAt].d
}

// commonDirs is how many leading path elements the directories a and b
// share.
func commonDirs(a, b string) int {
	as := strings.Split(filepath.ToSlash(a), "/")
	bs := strings.Split(filepath.ToSlash(b), "/")
	n := 0
	for n < len(as) && n < len(bs) && as[n] == bs[n] {
		n++
	}
	return n
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

// repoObjects returns the ConfigMaps and Secrets of the repository at
// root, reading them on the first call for that root. Calls may come from
// several goroutines (readRepoObjects, the unit builds' substitutions);
// one reads, the others wait for it.
func (l *loader) repoObjects(root string) *repoObjects {
	l.repoObjsMu.Lock()
	read := l.repoObjs[root]
	if read == nil {
		read = sync.OnceValue(func() *repoObjects { return l.readRepoObjects(root) })
		if l.repoObjs == nil {
			l.repoObjs = map[string]func() *repoObjects{}
		}
		l.repoObjs[root] = read
	}
	l.repoObjsMu.Unlock()
	return read()
}

// readRepoObjectsAhead starts reading the ConfigMaps and Secrets that
// the found Flux units' substitutions will read: the Kustomizations
// that apply other Kustomizations are built next, one at a time, and a
// core is free meanwhile. Load waits for the reads before it returns.
func (l *loader) readRepoObjectsAhead(found []engineFound) {
	started := map[string]bool{}
	for _, f := range found {
		u := f.unit
		if u == nil || u.Flux == nil || started[u.Flux.SourceRoot] {
			continue
		}
		if _, ok, _ := unstructured.NestedMap(u.Flux.Object.Object, "spec", "postBuild"); ok {
			root := u.Flux.SourceRoot
			started[root] = true
			l.background.Go(func() { l.repoObjects(root) })
		}
	}
}

func (l *loader) readRepoObjects(root string) *repoObjects {
	r := &repoObjects{byKey: map[[3]string][]heldObject{}, byName: map[[2]string][]heldObject{}}
	for _, f := range walkAll(l.fsys, root, &l.paths) {
		data := l.sniff(f, []byte("kind"))
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
			r.byKey[k] = append(r.byKey[k], heldObject{d: d, file: f})
			n := [2]string{o.Kind, o.Name}
			r.byName[n] = append(r.byName[n], heldObject{d: d, file: f})
		}
	}
	return r
}

// prepareFlux readies the build of the Flux unit u as kustomize-controller
// does it: the kustomization Flux generates, or why there is nothing to
// build.
func (l *loader) prepareFlux(u *Unit) engineJob {
	j := engineJob{u: u, named: l.unitName(u)}
	if !l.engineUnitMatters(u) {
		j.note = skipped(u.Decl, "Flux Kustomization "+strings.TrimPrefix(u.Name, "flux:")+" not built: nothing under its path or in its components names keyhole's kinds or declares a Secret")
		return j
	}
	if b := l.applying[u]; b != nil && (b.run.m != nil || b.run.err != nil) {
		j.build, j.built, j.run = true, true, b.run
		return j
	}
	kdata, kfile, err := l.fluxManifest(u)
	if err != nil {
		j.note = diag.Diagnostic{Code: CodeKustomizeBuildFailed, Severity: diag.Error, Pos: u.Decl, Units: []string{u.Name},
			Message: fmt.Sprintf("Flux cannot generate the kustomization of %s: %v", strings.TrimPrefix(u.Name, "flux:"), err)}
		return j
	}
	j.bo = l.buildOptions(u.Root)
	j.bo.KFile, j.bo.KData = filepath.Clean(kfile), kdata
	if _, ok, _ := unstructured.NestedMap(u.Flux.Object.Object, "spec", "postBuild"); ok {
		l.repoObjects(u.Flux.SourceRoot) // read now: the builds that substitute share it
	}
	j.build = true
	return j
}

// declaredUnder reports whether u's Kustomization is declared in a file
// under v's path.
func declaredUnder(u, v *Unit) bool {
	return within(v.Root, u.declFile)
}

// renderedCluster makes the cluster that applies keyhole's render the
// cluster keyhole's caller means (""): the loose files are the inputs
// `keyhole render` writes into a directory a Flux Kustomization applies
// (flux.rendered), so they deploy to that Kustomization's cluster, and
// read the Secrets the other units of that cluster deploy. That cluster
// is the one of the Flux unit whose path holds the Kustomization's
// file; where the render is applied by units of several clusters, or of
// none of the units', the clusters stay as they are.
func renderedCluster(found []engineFound, units []*Unit) {
	clusters := map[string]bool{}
	for _, f := range found {
		if !f.rendered || f.flux == nil {
			continue
		}
		var by *Unit
		for _, v := range units {
			if v.Flux != nil && within(v.Root, f.flux.file) && (by == nil || len(v.Root) > len(by.Root)) {
				by = v
			}
		}
		if by == nil {
			return
		}
		clusters[by.Cluster] = true
	}
	if len(clusters) != 1 {
		return
	}
	for c := range clusters {
		if c == "" {
			return
		}
		for _, u := range units {
			if u.Cluster == c {
				u.Cluster = ""
			}
		}
	}
}
