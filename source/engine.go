package source

import (
	"bytes"
	"cmp"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/gitfs"
	"keyhole.dev/keyhole/internal/kustbuild"
	"keyhole.dev/keyhole/internal/parallel"
)

// A GitOps engine's objects, where the repository holds them, say what a
// cluster applies: each is a deploy unit (docs/inputs.md, "Deploy units").
// engineUnits finds them before anything is built; each engine's room
// (source/flux, source/argocd, through Options.Engines) says what its
// objects mean, and the loader builds them as the engine does.

// engineFound is an engine's object a scan found (a Flux Kustomization,
// one source of an Argo CD Application): the unit it makes, or why it
// makes none.
type engineFound struct {
	unit *Unit
	// skip, when not empty, is why the object makes no unit here (its
	// source is another repository, a Helm chart): said once, at pos.
	skip string
	// unread, when not empty, is why a unit its engine applies is not
	// read (a Flux source keyhole.yaml does not map): a warning, said
	// once, at pos.
	unread string
	pos    diag.Pos
	// err is a mistake in the object that its engine would refuse it for.
	err string
	// warn, when not empty, is what keyhole cannot know of the object
	// (code says which): said once, at pos.
	warn, code string
	// repo is the repository (repoKey) an Argo CD source builds from;
	// ownErr and ownWarn, when repo turns out to be this one (another
	// source of it builds from this repository), say what replaces skip.
	repo            string
	ownErr, ownWarn string
	// claim are the directories (absolute) an ApplicationSet generator
	// keyhole cannot read may deploy, or a unit no engine reads (Load
	// was given none) applies: said once, and not read as anything
	// else.
	claim []string
	// helm says err is about rendering a Helm chart.
	helm bool
	// declDir is the directory of the file declaring it, relative to
	// its source's root.
	declDir string
	// srcRoot is the root of the source its path is relative to.
	srcRoot string
	// declRoot, when set, is the root of the repository declaring it,
	// where that is not srcRoot (a source keyhole.yaml maps).
	declRoot string
	// rendered says the Flux Kustomization applies the directory keyhole
	// render writes (renderedPath): skip says so.
	rendered bool
	// flux is the Flux Kustomization's declaration, for fluxApplied to
	// read it again as the unit applying it builds it.
	flux *FluxDecl
	// argo is the Argo CD object's declaration, for argoApplied to read
	// it again as the unit applying it builds it.
	argo *argoDecl
	// fan, when the object is applied by several Flux units (an
	// overlay's base), is the one this unit is read for.
	fan *Unit
	// argoRender, when set, is the Argo CD source applying a directory
	// keyhole render writes (ArgoFound.Rendered): skip says so.
	argoRender *argoRenderUse
}

// engineChart is a Helm chart whose templates declare GitOps engine
// objects (an app of apps), found by engineUnits' walk: its directory,
// as reported, its Chart.yaml as reported, and how the walk that found
// it takes what it declares.
type engineChart struct {
	dir, named, chart string
	take              func(file string, docs []*Document)
}

// declared records that f's unit, if any, is declared in file.
func (f *engineFound) declared(file string) {
	if f.unit != nil {
		f.unit.declFile = file
		f.declDir = filepath.ToSlash(relOrAbs(cmp.Or(f.declRoot, f.srcRoot), filepath.Dir(file)))
	}
}

// MaxEngineUnitsPerInput bounds the deploy units one input (a file, or an
// app of apps' chart as rendered) declares: a 72 KB file of flow-style
// Flux Kustomizations made 10,000 units, 27 s and 1 GB of building. Past
// it the rest of the input is an InputInvalid error, not read.
const MaxEngineUnitsPerInput = 1000

// isEngineDecl reports whether o declares deploy units: a Flux
// Kustomization or HelmRelease, an Argo CD Application or ApplicationSet.
func isEngineDecl(o diag.Object) bool {
	switch {
	case strings.HasPrefix(o.APIVersion, fluxGroup) && o.Kind == "Kustomization",
		strings.HasPrefix(o.APIVersion, helmReleaseGroup) && o.Kind == "HelmRelease",
		strings.HasPrefix(o.APIVersion, argoGroup) && (o.Kind == "Application" || o.Kind == "ApplicationSet"):
		return true
	}
	return false
}

// engineUnits finds the Flux Kustomizations and Argo CD Applications and
// ApplicationSets in the files under the named directories (kustomize
// directories included: a cluster's kustomization lists them) and returns
// the units they make. Units of two objects of one namespace and name
// (the same Kustomization in two clusters' trees) are told apart by the
// directory that declares them.
func (l *loader) engineUnits(paths []string) ([]*Unit, diag.List) {
	var found []engineFound
	var ds diag.List
	var patches []kustomizePatch
	var flux fluxScan
	var engineCharts []engineChart
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
		take := func(f string, docs []*Document) {
			units := 0 // the units f declares so far
			for _, d := range docs {
				if _, at := actionField(d.Node); at != nil {
					continue // a template's, which the walk says it skips
				}
				o := d.Object()
				if isEngineDecl(o) {
					units++
				}
				if units > MaxEngineUnitsPerInput {
					ds = append(ds, diag.Diagnostic{Code: CodeInputInvalid, Severity: diag.Error, Pos: d.Pos,
						Message: fmt.Sprintf("more than %d deploy units (Flux Kustomizations and HelmReleases, Argo CD Applications and ApplicationSets) declared in one input; keyhole reads at most %d of one file or render, as it bounds its other evaluations, and none of the rest: split the file", MaxEngineUnitsPerInput, MaxEngineUnitsPerInput)})
					break
				}
				var founds []engineFound
				switch {
				case isFluxObject(o):
					founds = l.scanFlux(d, f, srcRoots, &flux)
				case strings.HasPrefix(o.APIVersion, argoGroup) && (o.Kind == "Application" || o.Kind == "ApplicationSet"):
					founds = l.argoUnits(d, nil, "", srcRoots)
					decl := &argoDecl{d: d, file: f, srcRoots: srcRoots}
					for i := range founds {
						founds[i].argo = decl
					}
				}
				if len(founds) > 1 {
					units += len(founds) - 1 // an ApplicationSet's Applications
				}
				for _, ef := range founds {
					ef.declared(f)
					found = append(found, ef)
				}
			}
		}
		files, charts, ps := walkAllCharts(l.fsys, abs, &l.paths)
		for _, pt := range ps {
			pt.shown = l.under(p, abs, pt.file)
			patches = append(patches, pt)
		}
		for _, f := range files {
			if scanned[f] {
				continue
			}
			scanned[f] = true
			data := l.sniff(f, nil)
			if data == nil || !bytes.Contains(data, []byte(fluxGroup)) && !bytes.Contains(data, []byte(argoGroup)) && !bytes.Contains(data, []byte(helmReleaseGroup)) && !bytes.Contains(data, []byte(sourceGroup)) && !bytes.Contains(data, []byte(artifactGenGroup)) && !bytes.Contains(data, []byte(fluxInstanceGroup)) {
				continue
			}
			docs, _ := Parse(l.under(p, abs, f), data)
			take(f, docs)
		}
		// An app of apps is often a Helm chart whose templates write the
		// Applications: read once every Application is known.
		for _, c := range charts {
			dir := filepath.Dir(c)
			if scanned[dir] {
				continue
			}
			if !l.chartHolds(dir, declaresEngineObjects) {
				// argocd-apps, unvendored, writes its values out as
				// Applications and ApplicationSets: read them so.
				values := filepath.Join(dir, "values.yaml")
				if docs, ok := l.argoAppsObjects(dir, l.under(p, abs, values)); ok {
					scanned[dir] = true
					take(values, docs)
					continue
				}
				// A dependency keyhole does not hold may write them.
				if d, ok := l.unvendoredArgoApps(dir, l.under(p, abs, c)); ok {
					scanned[dir] = true
					ds = append(ds, d)
				}
				continue
			}
			scanned[dir] = true
			if l.engineCharts == nil {
				l.engineCharts = map[string]bool{}
			}
			l.engineCharts[dir] = true
			engineCharts = append(engineCharts, engineChart{dir: dir, named: l.under(p, abs, dir), chart: l.under(p, abs, c), take: take})
		}
	}
	// What an app of apps' chart declares is read as if written out,
	// rendered as each Application rendering it renders it (its values),
	// or as helm template renders it, with its defaults, when none does.
	for _, ec := range engineCharts {
		var by []*Unit
		for _, f := range found {
			if u := f.unit; u != nil && u.Argo != nil && u.Helm != nil && u.Root == ec.dir {
				by = append(by, u)
			}
		}
		overlays := []*HelmOverlay{{ReleaseName: "release-name", Namespace: "default"}}
		if len(by) > 0 {
			overlays = overlays[:0]
			for _, u := range by {
				overlays = append(overlays, u.Helm)
			}
		}
		for i, o := range overlays {
			run := l.renderHelm(ec.dir, o)
			if run.err != nil {
				with := "with its default values"
				if len(by) > 0 {
					with = "as Argo CD Application " + strings.TrimPrefix(by[i].Name, "argocd:") + " renders it"
				}
				ds = append(ds, diag.Diagnostic{Code: CodeHelmRenderFailed, Severity: diag.Warning,
					Pos:     diag.Pos{File: ec.chart, Line: 1, Column: 1},
					Message: "this Helm chart's templates declare GitOps engine objects, but Helm cannot render it " + with + " (" + run.message() + "); the deploy units they would declare are not read"})
				continue
			}
			from := len(found)
			for _, rf := range run.files {
				if bytes.Contains(rf.data, []byte(fluxGroup)) || bytes.Contains(rf.data, []byte(argoGroup)) {
					docs, _ := Parse(l.under(ec.named, ec.dir, rf.abs), rf.data)
					for _, d := range docs {
						atTemplateLines(d, rf.lines)
					}
					ec.take(rf.abs, docs)
				}
			}
			if len(by) == 0 {
				// Rendered with its defaults, which no Application
				// deploys: a path its defaults name is no mistake
				// Argo CD meets.
				for j := from; j < len(found); j++ {
					found[j].ownErr, found[j].ownWarn = "", ""
				}
				continue
			}
			for j := from; j < len(found); j++ {
				if u := found[j].unit; u != nil {
					u.appliedBy = by[i]
				}
				if len(by) > 1 {
					found[j].fan = by[i]
				}
			}
		}
	}
	found, fds := l.fluxScanned(found, flux, patches)
	ds = append(ds, fds...)
	found, fds = l.argoSettled(found, patches)
	ds = append(ds, fds...)
	found = l.fluxFound(found, flux, patches, &ds)
	uniqueNames(found)
	var units []*Unit
	said := map[string]bool{}
	for _, f := range found {
		var d diag.Diagnostic
		switch {
		case f.err != "":
			code := CodeKustomizeBuildFailed
			if f.helm {
				code = CodeHelmRenderFailed
			}
			d = diag.Diagnostic{Code: code, Severity: diag.Error, Pos: f.pos, Message: f.err}
			l.argoClaimed = append(l.argoClaimed, f.claim...)
		case f.warn != "":
			d = diag.Diagnostic{Code: f.code, Severity: diag.Warning, Pos: f.pos, Message: f.warn}
			l.argoClaimed = append(l.argoClaimed, f.claim...)
		case f.skip != "":
			l.argoClaimed = append(l.argoClaimed, f.claim...)
			d = skipped(f.pos, f.skip)
			if f.argoRender != nil {
				l.argo.uses = append(l.argo.uses, *f.argoRender)
			}
		case f.unread != "":
			d = diag.Diagnostic{Code: CodeFluxSourceUnmapped, Severity: diag.Warning, Pos: f.pos, Message: f.unread}
		default:
			f.unit.ID = f.unit.Name
			units = append(units, f.unit)
			continue
		}
		// One object two units apply is one mistake.
		if k := d.String(); !said[k] {
			said[k] = true
			ds = append(ds, d)
		}
	}
	l.fluxClusters(units)
	l.argoInstances(units)
	l.fluxUnits(found, units)
	return units, ds
}

// foundUnits are the units of found.
func foundUnits(found []engineFound) []*Unit {
	var units []*Unit
	for _, f := range found {
		if f.unit != nil {
			units = append(units, f.unit)
		}
	}
	return units
}

// uniqueNames tells apart the units of found that share a name: the same
// Kustomization in two clusters' trees by the directory declaring it,
// one object that several units apply (an overlay's base) by the path of
// each; what still shares a name, by its order.
func uniqueNames(found []engineFound) {
	suffix := func(f engineFound, round int, n int) string {
		switch {
		case round == 1:
			return strconv.Itoa(n)
		case f.fan != nil:
			return filepath.ToSlash(relOrAbs(f.srcRoot, f.fan.Root))
		}
		return f.declDir
	}
	for round := range 2 {
		byName := map[string]int{}
		for _, f := range found {
			if f.unit != nil {
				byName[f.unit.Name]++
			}
		}
		seen := map[string]int{}
		for _, f := range found {
			u := f.unit
			if u == nil || byName[u.Name] < 2 {
				continue
			}
			seen[u.Name]++
			at := suffix(f, round, seen[u.Name])
			u.Name += "@" + at
			u.Dir = path.Join(string(u.Source), outputDir(at), strings.TrimPrefix(u.Dir, string(u.Source)+"/"))
		}
	}
}

// enginePath resolves an engine object's path (spec.path, a source's
// path) against srcRoots in order, as the engine resolves it against its
// source's root: the directory and the root it was found under, or ""
// when it names no directory of any. A path cannot leave its root.
func (l *loader) enginePath(rel string, srcRoots []string) (dir, root string) {
	clean := path.Clean("/" + filepath.ToSlash(rel))
	for _, r := range srcRoots {
		p := filepath.Join(r, filepath.FromSlash(clean))
		if fi, err := l.fsys.Stat(p); err == nil && fi.IsDir() {
			return p, r
		}
	}
	return "", ""
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
		return t.Root()
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
	files, _, _ := walkAllCharts(fsys, root, filter)
	return files
}

// walkAllCharts is walkAll that also lists the Chart.yaml files of the
// Helm charts found, which the walk does not descend into, and the patch
// files the kustomizations found name. A patch file is not among the
// files: what it holds is a fragment of another object, never an object
// of its own.
func walkAllCharts(fsys fileSystem, root string, filter *pathFilter) (files, charts []string, patches []kustomizePatch) {
	isPatch := map[string]bool{}
	var visit func(dir string)
	visit = func(dir string) {
		if k := kustomizationFile(fsys, dir); k != "" {
			for _, p := range kustomizePatchFiles(fsys, k) {
				patches = append(patches, p)
				isPatch[p.file] = true
			}
		}
		w := walk(fsys, dir, filter)
		charts = append(charts, w.charts...)
		for _, f := range w.files {
			if fi, err := fsys.Stat(f); err == nil && fi.IsDir() {
				// A kustomize directory's own walk skips nothing a
				// walk of it would not.
				visit(f)
				continue
			}
			files = append(files, f)
		}
	}
	visit(root)
	if len(isPatch) > 0 {
		files = slices.DeleteFunc(files, func(f string) bool { return isPatch[f] })
	}
	return files, charts, patches
}

// coveredBy returns the engine unit whose path holds abs, the deepest
// one, or nil. An Argo CD directory application that does not recurse
// holds only the files at the top of its path (fsys tells a file from a
// directory), not what lies below it.
func coveredBy(fsys fileSystem, units []*Unit, abs string) *Unit {
	var best *Unit
	for _, u := range units {
		if !within(u.Root, abs) || best != nil && len(u.Root) <= len(best.Root) {
			continue
		}
		if u.shallow && abs != u.Root {
			if filepath.Dir(abs) != u.Root {
				continue
			}
			if fi, err := fsys.Stat(abs); err != nil || fi.IsDir() {
				continue
			}
		}
		best = u
	}
	return best
}

// engineOwns reports whether abs is an engine unit's to build, or lies
// where an ApplicationSet keyhole cannot read deploys (argoClaimed): in
// neither case is it a kustomization root, a chart or a loose file of
// its own.
func (l *loader) engineOwns(abs string) bool {
	if coveredBy(l.fsys, l.engine, abs) != nil {
		return true
	}
	return slices.ContainsFunc(l.argoClaimed, func(dir string) bool { return within(dir, abs) })
}

// notDeployed says, for each file under the engine unit u's path that
// names keyhole's kinds, that the unit's build (which read the files of
// read) does not deploy it.
func (l *loader) notDeployed(u *Unit, named string, read map[string][]byte) {
	what := "Flux Kustomization " + strings.TrimPrefix(u.Name, "flux:")
	switch {
	case u.Argo != nil:
		what = "Argo CD Application " + strings.TrimPrefix(u.Name, "argocd:")
	case u.Source == UnitKustomization:
		// A walked kustomization root is built, not walked: what lies
		// below it that its build leaves out is read by nothing else.
		what = "the kustomization root " + u.Name
	}
	deployed := map[string]bool{}
	// The directories whose agent files the build reads into the unit
	// (agentsBeside): its own and those of the kustomizations it read.
	beside := map[string]bool{filepath.Clean(u.Root): true}
	for f := range read {
		deployed[filepath.Clean(f)] = true
		if isKustomizationName(filepath.Base(f)) {
			beside[filepath.Clean(filepath.Dir(f))] = true
		}
	}
	for _, f := range walkAll(l.fsys, u.Root, &l.paths) {
		agent := isAgentName(f)
		if deployed[f] || deployed[linkTarget(l.fsys, f)] || agent && (beside[filepath.Dir(f)] || u.rendered && !u.shallow) {
			continue
		}
		if owner := coveredBy(l.fsys, l.engine, f); owner != u && (u.Source != UnitKustomization || owner != nil) {
			continue // another unit's to say
		}
		if u.Source == UnitKustomization && slices.Contains(configFileNames, filepath.Base(f)) {
			continue // keyhole's Config is read as such, not deployed
		}
		if u.rendered && filepath.Dir(f) == filepath.Clean(u.Root) && slices.Contains(configFileNames, filepath.Base(f)) {
			continue // keyhole's plugin reads the Config at its path's top; it renders no object of it
		}
		data := l.sniff(f, nil)
		if data == nil || !namesKeyhole(f, data) {
			continue
		}
		// The kustomization to change is the nearest above the file that
		// the build read, not the path's (which the engine may generate).
		near := ""
		for d := filepath.Dir(f); within(u.Root, d); d = filepath.Dir(d) {
			if k := kustomizationFile(l.fsys, d); k != "" && deployed[k] {
				near = l.display(k, k)
				break
			}
			if d == filepath.Clean(u.Root) || d == filepath.Dir(d) {
				break
			}
		}
		advice := "list it in that path's kustomization, or move it out of that path"
		if near != "" {
			advice = "list it, or a directory holding it, in " + near + ", the nearest kustomization above it that the build reads; or move it out of that path"
		}
		if agent {
			// A kustomization cannot list an agent file, which is no
			// Kubernetes object: kustomize fails on it.
			advice = "an agent file is no Kubernetes object, and a kustomization that lists it fails to build (missing Resource metadata): move it beside the kustomization.yaml of " + l.display(named, u.Root) + " or of a base it reads, where the build reads it into the unit"
			if near != "" {
				advice = "an agent file is no Kubernetes object, and a kustomization that lists it fails to build (missing Resource metadata): move it beside " + near + ", the nearest kustomization above it that the build reads, or give its directory a kustomization.yaml and list that directory there; the build then reads it into the unit"
			}
		}
		l.diags = append(l.diags, diag.Diagnostic{
			Code:     CodeInputNotDeployed,
			Severity: diag.Warning,
			Pos:      diag.Pos{File: l.display(f, f), Line: 1, Column: 1},
			Units:    []string{u.Name},
			Message: fmt.Sprintf("this file names keyhole's kinds, but %s (%s) does not deploy it: what it builds of %s does not include it, so keyhole does not check it; %s",
				what, u.Decl, l.display(named, u.Root), advice),
		})
	}
}

// linkTarget is where the symbolic link at abs leads, following links up
// to a few hops (a build reads a linked file by its target's path), or ""
// when abs is no link or leads nowhere readable.
func linkTarget(fsys fileSystem, abs string) string {
	cur := ""
	for range 8 {
		fi, err := fsys.Lstat(abs)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return cur
		}
		t, err := fsys.readlink(abs)
		if err != nil {
			return ""
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(abs), t)
		}
		abs, cur = filepath.Clean(t), filepath.Clean(t)
	}
	return ""
}

// isAgentName reports whether the file at path is named as an agent file.
func isAgentName(path string) bool {
	b := filepath.Base(path)
	return b == "agent.yaml" || b == "agent.yml"
}

// engineJob is the build of one unit a GitOps engine declares: prepared in
// order, built (on disk, in parallel with the others), and taken in order.
type engineJob struct {
	u     *Unit
	named string
	// note is what is said instead of building: the unit holds nothing
	// of keyhole's, or its kustomization cannot be generated.
	note  diag.Diagnostic
	build bool
	// built says run already holds the build (fluxApplied made it).
	built bool
	bo    kustbuild.Options
	run   kustomizeRun
	// helm is what rendering a chart gave, and with says whose values
	// rendered it.
	helm helmRun
	with string
}

// unitName is how a unit's path is reported: relative to the working
// directory when it is under it.
func (l *loader) unitName(u *Unit) string {
	if rel, err := filepath.Rel(l.dir, u.Root); err == nil && within(l.dir, u.Root) {
		return rel
	}
	return u.Root
}

// buildEngineUnits builds the units GitOps engines declare, as their
// controllers do, and takes what they deploy in the order they were
// declared. The builds depend on their inputs alone, so they run on
// every core, as the walks' kustomizations do (prefetch), from the disk or
// from a commit's tree alike.
func (l *loader) buildEngineUnits() {
	jobs := make([]engineJob, len(l.engine))
	var builds []int
	for i, u := range l.engine {
		switch {
		case u.pin != nil:
			continue // read at its commit, once the others are built
		case u.Flux != nil:
			jobs[i] = l.prepareFlux(u)
		case u.Helm != nil:
			jobs[i] = l.prepareHelm(u)
		default:
			jobs[i] = l.prepareArgo(u)
		}
		if jobs[i].build && !jobs[i].built {
			builds = append(builds, i)
		}
	}
	run := func(k int) {
		j := &jobs[builds[k]]
		if j.u.Helm != nil {
			j.helm = l.renderHelm(j.u.Root, j.u.Helm)
			return
		}
		m, read, err := l.opts.Memo.build(l.fsys, j.u.Root, j.bo)
		if err == nil && j.u.Flux != nil {
			err = l.substitute(j.u, m)
		}
		j.run = kustomizeRun{m: m, read: read, err: err}
	}
	// Each unit's build is taken in order, as soon as it is done, while
	// the later ones are still building.
	done := make([]chan struct{}, len(jobs))
	for _, i := range builds {
		done[i] = make(chan struct{})
	}
	go parallel.For(len(builds), l.opts.Parallelism, func(k int) {
		defer close(done[builds[k]])
		run(k)
	})
	for i := range jobs {
		j := &jobs[i]
		if done[i] != nil {
			<-done[i]
		}
		if j.u == nil {
			continue // pinned: read below
		}
		if !j.build {
			l.diags = append(l.diags, j.note)
			continue
		}
		before := len(l.docs)
		if j.u.Helm != nil {
			l.takeHelm(j.u, j.named, &j.helm, j.with)
			j.helm = helmRun{}
			l.argoApplies(j.u, l.docs[before:])
			continue
		}
		l.buildKustomizationFrom(j.u, j.named, j.u.Root, true, &j.run)
		if j.run.err == nil {
			l.notDeployed(j.u, j.named, j.run.read)
			l.argoApplies(j.u, l.docs[before:])
		}
		j.run = kustomizeRun{} // what it built is in l.docs now
	}
	// A unit pinned to another revision is read at its commit: the
	// loader reads that commit's files while it prepares, builds and
	// takes it, one at a time, every other build being done.
	for _, u := range l.engine {
		if u.pin != nil {
			l.buildPinned(u)
		}
	}
	l.applying = nil
}

// buildPinned prepares, builds and takes the engine unit u, pinned to
// another revision, reading the files of its commit.
func (l *loader) buildPinned(u *Unit) {
	saved := l.fsys
	l.fsys = u.pin.fsys
	defer func() {
		if tooLarge(l.fsys) {
			l.diags = append(l.diags, diag.Diagnostic{Code: CodeInputInvalid, Severity: diag.Error, Pos: u.Decl, Units: []string{u.Name},
				Message: "the commit " + short(u.pin.ref.Commit) + " that " + u.pin.rev + " names cannot be read whole: " + gitfs.ErrTreeTooLarge.Error() + "; what it deploys is not checked"})
		}
		l.fsys = saved
	}()
	var j engineJob
	switch {
	case u.Flux != nil:
		delete(l.applying, u) // what the working tree's build made of it
		j = l.prepareFlux(u)
	case u.Helm != nil:
		j = l.prepareHelm(u)
	default:
		j = l.prepareArgo(u)
	}
	if !j.build {
		l.diags = append(l.diags, j.note)
		return
	}
	l.diags = append(l.diags, revisionRead(u))
	before := len(l.docs)
	if u.Helm != nil {
		j.helm = l.renderHelm(u.Root, u.Helm)
		l.takeHelm(u, j.named, &j.helm, j.with)
		l.argoApplies(u, l.docs[before:])
		return
	}
	if !j.built {
		m, read, err := l.opts.Memo.build(l.fsys, u.Root, j.bo)
		if err == nil && u.Flux != nil {
			err = l.substitute(u, m)
		}
		j.run = kustomizeRun{m: m, read: read, err: err}
	}
	l.buildKustomizationFrom(u, j.named, u.Root, true, &j.run)
	if j.run.err == nil {
		l.notDeployed(u, j.named, j.run.read)
		l.argoApplies(u, l.docs[before:])
	}
}
