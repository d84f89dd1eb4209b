package source

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/resmap"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/kustbuild"
)

// CodeKustomizeBuildFailed is reported, at the kustomization file, when
// kustomize cannot build a directory.
const CodeKustomizeBuildFailed = "KustomizeBuildFailed"

// CodeKustomizeRemoteBase is reported at a kustomization's entry that
// kustomize would fetch over the network (a git repository or an HTTP
// URL) when remote bases are not allowed (Options.AllowRemoteBases; see
// kustbuild.RemoteEntry).
const CodeKustomizeRemoteBase = "KustomizeRemoteBase"

// kustomizeGroup is the API group of kustomize's Kustomization and
// Component (types.KustomizationVersion, types.ComponentVersion).
const kustomizeGroup = "kustomize.config.k8s.io/"

// kustomizationFile returns the kustomization file of dir (absolute), or
// "" when dir holds none. The names are kustomize's own. A file of such a
// name whose apiVersion is another API's is not a kustomization: a Flux
// Kustomization (kustomize.toolkit.fluxcd.io) saved as kustomization.yaml
// is not built, and its directory is walked (the file itself is not read:
// a walk reads no file named like a kustomization).
func kustomizationFile(fsys fileSystem, dir string) string {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		p := filepath.Join(dir, name)
		if fi, err := fsys.Stat(p); err == nil && fi.Mode().IsRegular() {
			if v := stringField(kustomizationNode(fsys, p), "apiVersion"); v != "" && !strings.HasPrefix(v, kustomizeGroup) {
				return ""
			}
			return p
		}
	}
	return ""
}

// isKustomizationName reports whether a file name is one kustomize reads
// as a kustomization.
func isKustomizationName(name string) bool { return kustbuild.IsKustomizationName(name) }

// kustomizeRefs returns the local directories (absolute) that the
// kustomization file kfile uses as resources or components: the bases
// that a walk must not build again on their own.
func kustomizeRefs(fsys fileSystem, kfile string) []string {
	root := kustomizationNode(fsys, kfile)
	var out []string
	for _, field := range []string{"resources", "components", "bases"} {
		seq := Lookup(root, field)
		if seq == nil || seq.Kind != yaml.SequenceNode {
			continue
		}
		for _, e := range seq.Content {
			if e.Kind != yaml.ScalarNode || e.Value == "" || strings.Contains(e.Value, "://") {
				continue
			}
			p := filepath.Join(filepath.Dir(kfile), filepath.FromSlash(e.Value))
			if fi, err := fsys.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
	}
	return out
}

// kustomizePatch is a patch file a kustomization names, with the kind
// and name its target selects ("" when it does not say).
type kustomizePatch struct {
	file       string // absolute
	shown      string // as reported
	kind, name string
}

// kustomizePatchFiles returns the files that the kustomization file
// kfile names as patches: patches[].path, patchesStrategicMerge[] and
// patchesJson6902[].path.
func kustomizePatchFiles(fsys fileSystem, kfile string) []kustomizePatch {
	k := kustomizationNode(fsys, kfile)
	var out []kustomizePatch
	add := func(file string, target *yaml.Node) {
		if file != "" && !strings.Contains(file, "\n") {
			out = append(out, kustomizePatch{file: filepath.Join(filepath.Dir(kfile), filepath.FromSlash(file)),
				kind: stringField(target, "kind"), name: stringField(target, "name")})
		}
	}
	for _, field := range []string{"patches", "patchesJson6902"} {
		if seq := Lookup(k, field); seq != nil && seq.Kind == yaml.SequenceNode {
			for _, e := range seq.Content {
				add(stringField(e, "path"), Lookup(e, "target"))
			}
		}
	}
	if seq := Lookup(k, "patchesStrategicMerge"); seq != nil && seq.Kind == yaml.SequenceNode {
		for _, e := range seq.Content {
			if e.Kind == yaml.ScalarNode {
				add(e.Value, nil)
			}
		}
	}
	return out
}

// kustomizationNode parses a kustomization file into its root mapping, or
// nil. It is read with yaml.v3 directly, not Parse: a kustomization needs
// no apiVersion or kind, and kustomize itself reports what is wrong in it.
//
// Each file is parsed once per Load: finding a directory's kustomization,
// its namespace, its bases and its patches ask for it again and again (on
// a Flux repository of 100 units, 5% of a check's CPU went to parsing the
// same few hundred files). The node is shared: callers must not change it
// (argoManifest changes a copy).
func kustomizationNode(fsys fileSystem, kfile string) *yaml.Node {
	kept := fsys.kustomizations()
	if n, ok := kept.Load(kfile); ok {
		return n.(*yaml.Node)
	}
	n, _ := kept.LoadOrStore(kfile, parseKustomization(fsys, kfile))
	return n.(*yaml.Node)
}

func parseKustomization(fsys fileSystem, kfile string) *yaml.Node {
	data, err := fsys.ReadFile(kfile)
	if err != nil || len(data) > DefaultMaxFileSize {
		return nil
	}
	data = sniffText(data)
	var doc yaml.Node
	if err := decode(yaml.NewDecoder(bytes.NewReader(data)), &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	if doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	return doc.Content[0]
}

// runKustomize builds the kustomization in dir (absolute) as `kubectl
// kustomize` would by default: plugins off, loads restricted to the
// kustomization's root unless bo says otherwise, no managed-by label. A panic inside kustomize is
// an error: no input may crash keyhole.
//
// It also returns the files kustomize read, by path.
//
// Unless allowRemote, a kustomization naming a remote base (here or in a
// base) stops the build before kustomize fetches anything, and the error
// is a *kustbuild.RemoteRefused.
func (l *loader) runKustomize(dir string, bo kustbuild.Options) kustomizeRun {
	m, read, err := l.opts.Memo.build(l.fsys, dir, bo)
	return kustomizeRun{m: m, read: read, err: err}
}

// buildOptions are how the loader builds the kustomization root dir: as
// kubectl kustomize does, except that in a repository Flux deploys (one
// declaring Flux Kustomizations, whether keyhole reads them or their
// source is out of reach) loads are not restricted to the root, as
// kustomize-controller builds; whatever the restrictions, the build reads
// nothing outside the repository (buildRoot).
func (l *loader) buildOptions(dir string) kustbuild.Options {
	return kustbuild.Options{MaxSize: l.opts.MaxFileSize, AllowRemote: l.opts.AllowRemoteBases,
		Unrestricted: l.fluxHeld || slices.ContainsFunc(l.engine, func(u *Unit) bool { return u.Flux != nil }),
		Root:         l.buildRoot(dir)}
}

// kustomizeRun is what runKustomize returns.
type kustomizeRun struct {
	m    resmap.ResMap
	read map[string][]byte
	err  error
}

// kustomize is runKustomize's work: kustbuild.Build, with the loader's
// rules for the files it reads (buildRules). Builds go through the Memo
// (Memo.build), which runs this or reuses what it gave.
func kustomize(fsys fileSystem, dir string, bo kustbuild.Options) (resmap.ResMap, map[string][]byte, error) {
	fs, err := fsys.kustomize(bo.Root, bo.AllowRemote)
	if err != nil {
		return nil, nil, err
	}
	rules := buildRules{fsys: fsys, confine: bo.Root}
	_, rules.confineGit = confinement(fsys, dir)
	return kustbuild.Build(fs, rules, dir, bo)
}

// buildKustomization builds the kustomize directory dir (absolute) and
// adds each built object as a Document whose positions point into the
// files the object was written in.
//
// named is the directory as the user named it (or as a walk found it), for
// the paths reported.
//
// walked says a walk found the kustomization: then, when it cannot be
// built and none of its local files names keyhole's kinds, it is some
// other tool's business, and one InputSkipped note says so instead of an
// error (docs/inputs.md).
//
// Its documents, and its diagnostics, belong to the deploy unit the
// kustomization root makes.
func (l *loader) buildKustomization(named, dir string, walked bool) {
	l.buildKustomizationFrom(l.rootUnit(named, dir), named, dir, walked, nil)
}

// rootUnit is the unit of the kustomization root dir (absolute), named as
// named.
func (l *loader) rootUnit(named, dir string) *Unit {
	return kustomizationUnit(l.display(named, dir), dir, l.under(named, dir, kustomizationFile(l.fsys, dir)))
}

// buildKustomizationFrom is buildKustomization of unit u with kustomize's
// build of dir already run, when pre is not nil (see prefetch). The
// Kustomize engine reads what the build made (Kustomize.Read); what it
// means for the unit (whether a failed build is said or skipped, the
// agent files beside it, the unit's failure) is the loader's.
func (l *loader) buildKustomizationFrom(u *Unit, named, dir string, walked bool, pre *kustomizeRun) {
	if l.seen[dir] && u.Source == UnitKustomization {
		return
	}
	l.seen[dir] = true
	d0 := len(l.diags)
	defer func() {
		for i := d0; i < len(l.diags); i++ {
			l.diags[i].Units = []string{u.Name}
		}
	}()
	kfile := kustomizationFile(l.fsys, dir)
	kname := l.under(named, dir, kfile)
	if kfile == "" {
		// An engine's unit on a path with no kustomization: what is
		// wrong in the build is the engine object's.
		kname = u.Decl.File
	}
	if pre == nil {
		run := l.runKustomize(dir, l.buildOptions(dir))
		pre = &run
	}
	m, read, err := pre.m, pre.read, pre.err
	defer l.agentsBeside(u, named, dir, walked, read, u.rendered && !u.shallow)
	engine := u.Source == UnitFlux || u.Source == UnitArgoCD
	if engine {
		// A unit that holds nothing keyhole checks is not keyhole's to
		// fail (failedUnit): what is said of its failure waits for every
		// unit to be read.
		defer func() {
			if d := l.diags[d0:]; len(d) > 0 && slices.ContainsFunc(d, func(d diag.Diagnostic) bool { return d.Severity == diag.Error }) {
				l.failedUnit(u, d0, d[0].Pos, "the engine cannot build it ("+firstClause(d[0].Message)+")")
			}
		}()
	}
	k := l.opts.Engines.Kustomize
	if k == nil {
		l.diags = append(l.diags, diag.Diagnostic{Code: CodeKustomizeBuildFailed, Severity: diag.Error,
			Pos:     diag.Pos{File: kname, Line: 1, Column: 1},
			Message: "kustomize cannot build " + l.under(named, dir, dir) + ": " + errNoKustomize.Error()})
		return
	}
	if err != nil && walked && !engine && !l.kustomizationNamesKeyhole(dir) {
		l.diags = append(l.diags[:d0], skipped(diag.Pos{File: kname, Line: 1, Column: 1},
			"kustomization not built: none of its files names keyhole's kinds, and kustomize cannot build it here ("+firstClause(l.scrub(named, dir, kustbuild.Redact(err.Error(), read)))+"); skipped (name it explicitly to check it)"))
		return
	}
	r := k.Read(Host{l}, &KustomizeBuild{Unit: u, Named: named, Dir: dir, KFile: kfile, KName: kname, Built: m, Read: read, Err: err})
	if err != nil {
		l.diags = append(l.diags, r.Diags...)
		return
	}
	if u.Source == UnitKustomization && !l.renderOutput(dir) {
		defer l.notDeployed(u, named, read)
	}
	from := &sharedFrom{unit: u, walked: walked, where: r.Where, copies: r.Copies}
	docs0 := len(l.docs)
	for i := range r.Docs {
		r.Docs[i].from = from
		l.docs = append(l.docs, &r.Docs[i])
	}
	l.diags = append(l.diags, r.Diags...)
	// Where the loader found the sources invalid YAML (a duplicate
	// mapping key, which kustomize reads): its first such finding.
	var pos diag.Pos
	if i := slices.IndexFunc(l.diags[d0:], func(d diag.Diagnostic) bool { return d.Code == CodeYAMLInvalid }); i >= 0 {
		pos = l.diags[d0+i].Pos
	}
	msg, ok := r.Unwritable, r.Unwritable != ""
	if !ok && pos.File != "" {
		// kustomize builds it and writes it out (its reader merges a
		// repeated metadata.annotations, as kubectl kustomize does): the
		// objects are read as it built them. A duplicate key stays an
		// error only in a file that names keyhole's kinds.
		l.diags = append(l.diags[:d0], slices.DeleteFunc(l.diags[d0:], func(d diag.Diagnostic) bool {
			return d.Code == CodeYAMLInvalid && strings.HasPrefix(d.Message, dupKeyMessage) && !l.sourceNamesKeyhole(r.Sources, d.Pos.File)
		})...)
	}
	if ok {
		// kustomize built it, but the engines fail writing out what it
		// built (a duplicate mapping key): they apply nothing of it.
		// Where the unit holds something keyhole checks, the loader's
		// finding stays, at its position, and what was built is checked.
		if walked && !engine && !l.kustomizationNamesKeyhole(dir) {
			l.docs = l.docs[:docs0]
			l.diags = append(l.diags[:d0], skipped(pos, "kustomization not built: none of its files names keyhole's kinds, and kustomize cannot write out what it builds ("+msg+"); skipped (name it explicitly to check it)"))
			return
		}
		if engine && l.failedUnit(u, d0, pos, "kustomize builds it but cannot write out what it built ("+msg+"), so kustomize build, Argo CD and Flux fail on it") {
			l.docs = l.docs[:docs0]
		}
	}
}

// sourceNamesKeyhole reports whether the file a build's objects were read
// from that is reported as shown (sources maps each, by absolute path, to
// how it is reported) names keyhole's kinds.
func (l *loader) sourceNamesKeyhole(sources map[string]string, shown string) bool {
	for abs, name := range sources {
		if name == shown {
			data, err := l.fsys.ReadFile(abs)
			return err != nil || namesKeyhole(abs, data)
		}
	}
	return true
}

// scrub makes a kustomize error about the build of root (absolute),
// named as named, readable and the same on every machine: absolute paths
// become the paths the user would type.
func (l *loader) scrub(named, root, msg string) string {
	type sub struct{ abs, shown string }
	var subs []sub
	for _, d := range []string{root, filepath.Dir(root), l.dir} {
		shown := l.under(named, root, d)
		subs = append(subs, sub{d, shown})
		if real, err := filepath.EvalSymlinks(d); err == nil && real != d {
			subs = append(subs, sub{real, shown})
		}
	}
	// Longest first, so that the directory built wins over the working
	// directory that holds it.
	slices.SortStableFunc(subs, func(x, y sub) int { return len(y.abs) - len(x.abs) })
	for _, s := range subs {
		msg = strings.ReplaceAll(msg, s.abs+string(filepath.Separator), s.shown+"/")
		msg = strings.ReplaceAll(msg, s.abs, s.shown)
	}
	msg = strings.ReplaceAll(msg, "\n", " ")
	return strings.TrimSpace(msg)
}

// The bounds on what one kustomize build reads (see kustbuild.Budget).
const (
	MaxKustomizeObjects     = kustbuild.MaxKustomizeObjects
	MaxKustomizeMappingKeys = kustbuild.MaxKustomizeMappingKeys
	MaxKustomizeTextLines   = kustbuild.MaxKustomizeTextLines
	MaxKustomizeReadBytes   = kustbuild.MaxKustomizeReadBytes
)

// kustomizeRoots drops, from what a walk found, the kustomize directories
// that another kustomization found by the same walk uses as a base or
// component: building them on their own as well would count their objects
// twice, once as the base writes them and once as the overlay changes
// them.
func kustomizeRoots(fsys fileSystem, found []string) []string {
	used := map[string]bool{}
	for _, f := range found {
		if k := kustomizationFile(fsys, f); k != "" {
			for _, r := range kustomizeRefs(fsys, k) {
				used[filepath.Clean(r)] = true
			}
		}
	}
	return slices.DeleteFunc(slices.Clone(found), func(f string) bool { return used[filepath.Clean(f)] })
}

// kustomizeCycles finds, among what a walk found, the kustomize
// directories that no root reaches because they use each other in a
// cycle (a lists ../b, b lists ../a): each cycle once, as its directories
// in order from the first by path, the first repeated at the end.
// kustomize refuses to build them, and without a root nothing would say
// so.
func kustomizeCycles(fsys fileSystem, found []string) [][]string {
	refs := map[string][]string{}
	var dirs []string
	for _, f := range found {
		if k := kustomizationFile(fsys, f); k != "" {
			f = filepath.Clean(f)
			dirs = append(dirs, f)
			for _, r := range kustomizeRefs(fsys, k) {
				refs[f] = append(refs[f], filepath.Clean(r))
			}
		}
	}
	used := map[string]bool{}
	for _, rs := range refs {
		for _, r := range rs {
			used[r] = true
		}
	}
	reached := map[string]bool{}
	var reach func(d string)
	reach = func(d string) {
		if reached[d] {
			return
		}
		reached[d] = true
		for _, r := range refs[d] {
			reach(r)
		}
	}
	for _, d := range dirs {
		if !used[d] {
			reach(d)
		}
	}
	var cycles [][]string
	inCycle := map[string]bool{}
	for _, d := range dirs {
		if reached[d] || inCycle[d] {
			continue
		}
		// Follow references from d until one repeats: the repeated part
		// is a cycle.
		var trail []string
		at := map[string]int{}
		for cur := d; ; {
			if i, ok := at[cur]; ok {
				c := slices.Clone(trail[i:])
				for _, m := range c {
					inCycle[m] = true
				}
				first := slices.IndexFunc(c, func(m string) bool { return m == slices.Min(c) })
				c = append(c[first:], c[:first]...)
				cycles = append(cycles, append(c, c[0]))
				break
			}
			at[cur] = len(trail)
			trail = append(trail, cur)
			next := ""
			for _, r := range refs[cur] {
				if !reached[r] && slices.Contains(dirs, r) {
					next = r
					break
				}
			}
			if next == "" || inCycle[next] {
				break
			}
			cur = next
		}
	}
	return cycles
}
