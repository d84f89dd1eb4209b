package source

import (
	"cmp"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// A repository deployed by Argo CD says what a cluster applies in its
// Applications: each source's path (spec.source, or each of
// spec.sources), built as Argo CD's repo server builds it. A path with a
// kustomization is built with kustomize after the Application's
// kustomize options are written into it (as the repo server's `kustomize
// edit` does); a path without one is a directory application, its YAML
// and JSON files read as they are (recurse, include and exclude as
// spec.source.directory says). An ApplicationSet's generators make its
// Applications as its controller makes them (argoappset.go). A path
// holding a Helm chart is rendered as the repo server's helm template
// renders it, with the source's helm options (helm.go). Charts from chart repositories and plugin sources are out
// of reach: said once.
// See docs/inputs.md.

// argoGroup is the API group of Argo CD's Application and ApplicationSet.
const argoGroup = "argoproj.io/"

// UnitArgoCD is an Argo CD Application's source (or one an ApplicationSet
// generates).
const UnitArgoCD UnitSource = "argocd"

// ArgoOverlay is what Argo CD's repo server applies to an Application
// source's path.
type ArgoOverlay struct {
	// Kustomize is spec.source.kustomize, as written.
	Kustomize *yaml.Node
	// Directory is spec.source.directory, as written.
	Directory *yaml.Node
}

// argoUnits is the units the Application or ApplicationSet d makes, one
// per source (or per generated Application).
func (l *loader) argoUnits(d *Document, srcRoots []string) []engineFound {
	o := d.Object()
	ns := cmp.Or(o.Namespace, "argocd")
	if o.Kind == "ApplicationSet" {
		return l.appSetUnits(d.Node, d, ns, srcRoots)
	}
	return l.appUnits(d.Node, d, ns, o.Name, srcRoots)
}

// appUnits is the units of one Application's spec (app, which may be an
// ApplicationSet's generated one), declared by d.
func (l *loader) appUnits(app *yaml.Node, d *Document, ns, name string, srcRoots []string) []engineFound {
	spec := Lookup(app, "spec")
	// Argo CD reads spec.sources when it holds any, else spec.source.
	var sources []*yaml.Node
	if ss := Lookup(spec, "sources"); ss != nil && ss.Kind == yaml.SequenceNode {
		sources = append(sources, ss.Content...)
	}
	if s := Lookup(spec, "source"); s != nil && len(sources) == 0 {
		sources = append(sources, s)
	}
	dest := Lookup(spec, "destination")
	cluster := cmp.Or(stringField(dest, "name"), stringField(dest, "server"))
	if cluster == "https://kubernetes.default.svc" || cluster == "in-cluster" {
		cluster = ""
	} else if cluster != "" {
		cluster = "Argo CD destination " + cluster
	}
	if name == "" && len(sources) > 0 {
		// The API server refuses an object without a name, and a unit
		// needs one: said once, where the object begins.
		at := cmp.Or(Lookup(app, "metadata"), app)
		return []engineFound{{pos: diag.Pos{File: d.File, Line: at.Line, Column: at.Column},
			err: "an Argo CD Application in the namespace " + ns + " has no metadata.name: the API server refuses it"}}
	}
	kargo := kargoStage(app)
	var out []engineFound
	for i, src := range sources {
		pos := diag.Pos{File: d.File, Line: src.Line, Column: src.Column}
		what := fmt.Sprintf("Argo CD Application %s/%s", ns, name)
		if len(sources) > 1 {
			what += fmt.Sprintf(" (source %d)", i+1)
		}
		rel := stringField(src, "path")
		shown := rel // rel in a message
		if rel == "" || rel == "." {
			shown = "the repository's root"
		}
		switch {
		case stringField(src, "repoURL") == "":
			// Argo CD's CRD requires it: the API server refuses the
			// object, so nothing of it is deployed.
			out = append(out, engineFound{pos: pos, skip: what + " names no repoURL, which Argo CD's schema requires: the API server refuses it, so it deploys nothing; skipped"})
			continue
		case stringField(src, "chart") != "":
			out = append(out, engineFound{pos: pos, skip: fmt.Sprintf("%s renders the chart %s from %s, a chart repository keyhole does not fetch; out of reach, skipped",
				what, stringField(src, "chart"), cmp.Or(stringField(src, "repoURL"), "its repository"))})
			continue
		case Lookup(src, "plugin") != nil && !keyholePlugin(src):
			out = append(out, engineFound{pos: pos, skip: what + " renders through a config management plugin, which keyhole does not run; skipped"})
			continue
		case rel == "" && Lookup(src, "ref") != nil:
			continue // a values-only source of a multi-source Application
		case strings.Contains(rel, "{{"):
			continue // a template an ApplicationSet fills in
		}
		repoURL := stringField(src, "repoURL")
		repo := repoKey(repoURL, stringField(src, "targetRevision"))
		roots := srcRoots
		if pkg, ok := cnoePackage(repoURL); ok {
			// idpbuilder serves the directory beside the Application's
			// file as a repository of its own: the path is relative to
			// it, and it is not this repository.
			dir := filepath.Join(filepath.Dir(l.osPath(d.File)), filepath.FromSlash(pkg))
			if fi, err := l.fsys.Stat(dir); err != nil || !fi.IsDir() || !within(srcRoots[0], dir) {
				out = append(out, engineFound{pos: pos, skip: fmt.Sprintf("%s builds from %s, which idpbuilder makes of the directory %s beside the Application's file; this repository has no such directory, so idpbuilder refuses it; skipped",
					what, repoURL, pkg)})
				continue
			}
			roots, repo = []string{dir}, ""
			if root, _ := l.enginePath(rel, roots); root == "" {
				out = append(out, engineFound{pos: pos, err: fmt.Sprintf("%s builds %s from %s, the directory %s that idpbuilder serves as a repository, which has no such directory: Argo CD cannot generate its manifests, so it does not sync",
					what, shown, repoURL, l.display(dir, dir))})
				continue
			}
		} else if isOCI(repoURL) {
			out = append(out, engineFound{pos: pos, skip: fmt.Sprintf("%s builds %s from %s, an OCI artifact keyhole does not fetch, not this repository; out of reach, skipped",
				what, shown, repoURL)})
			continue
		}
		if ef, ok := l.argoRenderedSource(what, shown, rel, roots); ok {
			ef.pos, ef.repo = pos, repo
			if ef.argoRender != nil {
				ef.argoRender.pos = pos
			}
			out = append(out, ef)
			continue
		}
		// A source pinned to another revision is read at that commit:
		// its path, chart and values are those of the commit.
		var pin *revPin
		if repo != "" {
			pin = l.pinAt(stringField(src, "targetRevision"), roots[0], repoURL)
		}
		if pin != nil && pin.fsys == nil && pin.other {
			// Fetching would not help: the revision is another
			// repository's, whatever directory here has the path's name.
			out = append(out, engineFound{pos: pos, skip: fmt.Sprintf("%s builds %s at %s from %s, which is none of this repository's remotes and names a revision it does not hold: another repository, out of reach, skipped",
				what, shown, pin.rev, repoURL)})
			continue
		}
		if pin != nil && pin.fsys == nil {
			if kargo != "" {
				// A branch of this repository Kargo renders to, whose
				// path (the render's output) main need not hold: what
				// the next promotion renders is this repository's
				// overlays, left to the walk (kargo.go).
				out = append(out, engineFound{pos: pos, repo: repo, warn: kargoUnread(what, kargo, pin), code: CodeArgoCDRevision})
				continue
			}
			if root, _ := l.enginePath(rel, roots); root != "" {
				out = append(out, engineFound{pos: pos, repo: repo, warn: revisionUnread(what, pin), code: CodeArgoCDRevision, claim: []string{root}})
				continue
			}
			pin = nil // another repository's revision: out of reach below
		}
		ef := l.atPin(pin, func() engineFound {
			return l.appSource(app, d, src, sources, i, pos, what, rel, shown, repo, roots, srcRoots, name, ns, cluster, dest)
		})
		if ef.unit != nil {
			ef.unit.pin = pin
		}
		out = append(out, ef)
	}
	return out
}

// keyholePlugin reports whether the Argo CD source src renders through
// keyhole's own config management plugin, which Argo CD names
// NAME-VERSION (examples/argocd/plugin.yaml's keyhole-v0.1.0): the repo
// server then runs keyhole render on the source's path, so its unit is
// read as keyhole renders it. A plugin named by discovery alone is not
// known to be keyhole's.
func keyholePlugin(src *yaml.Node) bool {
	p := Lookup(src, "plugin")
	if p == nil {
		return false
	}
	name := stringField(p, "name")
	return name == "keyhole" || strings.HasPrefix(name, "keyhole-")
}

// argoOverlay is what the repo server applies to the source src's path.
// keyhole's plugin renders what keyhole reads there, every file below
// it, as a directory application that recurses; a plugin source has no
// kustomize or directory options of its own.
func argoOverlay(src *yaml.Node, plugin bool) *ArgoOverlay {
	if plugin {
		return &ArgoOverlay{Directory: &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "recurse"}, {Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}}}}
	}
	return &ArgoOverlay{Kustomize: Lookup(src, "kustomize"), Directory: Lookup(src, "directory")}
}

// atPin is f's answer with the loader reading the files of pin's commit,
// when pin is set (appUnits' scan reads one object at a time).
func (l *loader) atPin(pin *revPin, f func() engineFound) engineFound {
	if pin == nil || pin.fsys == nil {
		return f()
	}
	saved := l.fsys
	l.fsys = pin.fsys
	defer func() { l.fsys = saved }()
	return f()
}

// appSource is the unit of the source src (the i-th of sources) of the
// Application app that d declares, or what is said of it instead.
func (l *loader) appSource(app *yaml.Node, d *Document, src *yaml.Node, sources []*yaml.Node, i int, pos diag.Pos, what, rel, shown, repo string, roots, srcRoots []string, name, ns, cluster string, dest *yaml.Node) engineFound {
	root, srcRoot := l.enginePath(rel, roots)
	if root == "" {
		return engineFound{pos: pos, repo: repo, skip: fmt.Sprintf("%s builds %s from %s, which is not a directory of this repository; out of reach, skipped",
			what, shown, cmp.Or(stringField(src, "repoURL"), "its repository")),
			ownErr: fmt.Sprintf("%s builds %s from %s, this repository (its other Applications build from it at the same revision), which has no such directory: Argo CD cannot generate its manifests, so it does not sync",
				what, shown, stringField(src, "repoURL"))}
	}
	var helm *HelmOverlay
	switch {
	case helmChartFile(l.fsys, root) != "":
		helm = l.argoHelm(src, sources, name, stringField(dest, "namespace"), root, srcRoot)
	case Lookup(src, "helm") != nil:
		return engineFound{pos: pos, helm: true, err: what + " renders " + shown + " with Helm, but it holds no Chart.yaml: Argo CD cannot render it"}
	case chartAbove(l.fsys, root, srcRoot):
		return engineFound{pos: pos, skip: what + " builds " + shown + ", a directory inside a Helm chart, whose templates are not YAML until Helm renders them; skipped"}
	}
	plugin := keyholePlugin(src)
	shallow := helm == nil && !plugin && !boolField(Lookup(src, "directory"), "recurse") && kustomizationFile(l.fsys, root) == ""
	unitName := "argocd:" + ns + "/" + name
	dir := path.Join("argocd", ns, outputDir(name))
	if len(sources) > 1 {
		unitName += "#" + strconv.Itoa(i+1)
		dir = path.Join(dir, strconv.Itoa(i+1))
	}
	var declRoot string
	if srcRoot != srcRoots[0] && len(roots) == 1 && roots[0] == srcRoot {
		declRoot = srcRoots[0] // an idpbuilder package's
	}
	return engineFound{srcRoot: srcRoot, declRoot: declRoot, pos: pos, repo: repo, unit: &Unit{
		Name:      unitName,
		Dir:       dir,
		Source:    UnitArgoCD,
		Root:      root,
		Decl:      diag.Pos{File: d.File, Line: app.Line, Column: app.Column},
		Cluster:   cluster,
		Namespace: stringField(dest, "namespace"),
		Argo:      argoOverlay(src, plugin),
		Helm:      helm,
		shallow:   shallow,
		rendered:  plugin,
	}}
}

// argoOwnRepo says, of each Argo CD source of found whose path is not a
// directory of this repository, and of each git generator path that
// matches nothing here, what Argo CD does when its repository is this
// one: when another source of found builds from the same repository
// and revision (repoKey) out of this repository, it is this one, and
// the path is a mistake Argo CD stops at.
func argoOwnRepo(found []engineFound) {
	own := map[string]bool{}
	for _, f := range found {
		if f.unit != nil && f.unit.Argo != nil && f.repo != "" {
			own[f.repo] = true
		}
	}
	for i, f := range found {
		if f.repo == "" || !own[f.repo] || f.unit != nil {
			continue
		}
		switch {
		case f.ownErr != "":
			found[i].skip, found[i].err = "", f.ownErr
		case f.ownWarn != "":
			found[i].skip, found[i].warn, found[i].code = "", f.ownWarn, CodeGeneratorMatchesNothing
		}
	}
}

// cnoeScheme is the repoURL scheme of idpbuilder's packages.
const cnoeScheme = "cnoe://"

// cnoePackage is the directory (relative to the Application's file) that
// an idpbuilder package's repoURL, cnoe://DIR, names. idpbuilder serves
// the files of that directory as a Git repository of their own and
// writes that repository's URL into the Application: the values after
// cnoe:// are a path relative to the Application's file.
func cnoePackage(repoURL string) (dir string, ok bool) {
	dir, ok = strings.CutPrefix(strings.TrimSpace(repoURL), cnoeScheme)
	return cmp.Or(path.Clean(dir), "."), ok
}

// isOCI reports whether repoURL names an OCI artifact, which Argo CD
// pulls from a registry: never this repository.
func isOCI(repoURL string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(repoURL)), "oci://")
}

// prepareArgo readies the build of the Argo CD unit u as the repo server
// does it, or says why there is nothing to build.
func (l *loader) prepareArgo(u *Unit) engineJob {
	j := engineJob{u: u, named: l.unitName(u)}
	if !l.engineUnitMatters(u) {
		j.note = skipped(u.Decl, "Argo CD Application "+strings.TrimPrefix(u.Name, "argocd:")+" not built: nothing under its path or in its components names keyhole's kinds or declares a Secret")
		return j
	}
	l.jsonnetNotEvaluated(u)
	if b := l.applying[u]; b != nil && (b.run.m != nil || b.run.err != nil) {
		j.build, j.built, j.run = true, true, b.run
		return j
	}
	j.bo = l.buildOptions(u.Root)
	j.bo.KFile, j.bo.KData = l.argoManifest(u)
	j.build = true
	return j
}

// CodeJsonnetNotEvaluated is reported at a Jsonnet file of an Argo CD
// directory application that names keyhole's kinds or declares a
// Secret: Argo CD evaluates it, keyhole does not.
const CodeJsonnetNotEvaluated = "JsonnetNotEvaluated"

// jsonnetNotEvaluated says, of each Jsonnet file the directory
// application u evaluates (its files, as directoryKustomization picks
// them) that names keyhole's kinds or declares a Secret, that what it
// declares is not checked.
func (l *loader) jsonnetNotEvaluated(u *Unit) {
	if kustomizationFile(l.fsys, u.Root) != "" {
		return // a kustomize application: Jsonnet is not evaluated
	}
	for _, rel := range l.directoryFiles(u, func(rel string) bool { return strings.EqualFold(path.Ext(rel), ".jsonnet") }) {
		abs := filepath.Join(u.Root, filepath.FromSlash(rel))
		if data := l.sniff(abs, nil); data != nil && (namesKeyhole(abs, data) || declaresSecret(data)) {
			l.diags = append(l.diags, diag.Diagnostic{Code: CodeJsonnetNotEvaluated, Severity: diag.Warning,
				Pos: diag.Pos{File: l.display(abs, abs), Line: 1, Column: 1}, Units: []string{u.Name},
				Message: fmt.Sprintf("Argo CD Application %s (%s) evaluates this Jsonnet file and applies what it declares, which names keyhole's kinds or a Secret; keyhole does not evaluate Jsonnet, so those objects are not checked",
					strings.TrimPrefix(u.Name, "argocd:"), u.Decl)})
		}
	}
}

// argoManifest is the kustomization the repo server builds the Argo CD
// unit u's path with, and the path it stands at: the path's own, with
// the Application's kustomize options written in, or the one a directory
// application makes of its files.
func (l *loader) argoManifest(u *Unit) (kfile string, kdata []byte) {
	if kfile := kustomizationFile(l.fsys, u.Root); kfile != "" {
		return kfile, argoKustomization(cloneTree(kustomizationNode(l.fsys, kfile)), u.Argo.Kustomize)
	}
	return filepath.Join(u.Root, "kustomization.yaml"), l.directoryKustomization(u)
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
			if v := Lookup(opts, f); v != nil && v.Kind == yaml.ScalarNode {
				setField(k, f, strNode(v.Value))
			}
		}
		for _, f := range []string{"commonLabels", "commonAnnotations"} {
			if v := Lookup(opts, f); v != nil && v.Kind == yaml.MappingNode {
				cur := Lookup(k, f)
				if cur == nil || cur.Kind != yaml.MappingNode {
					cur = &yaml.Node{Kind: yaml.MappingNode}
					setField(k, f, cur)
				}
				for i := 0; i+1 < len(v.Content); i += 2 {
					setField(cur, v.Content[i].Value, v.Content[i+1])
				}
			}
		}
		if v := Lookup(opts, "images"); v != nil && v.Kind == yaml.SequenceNode {
			cur := Lookup(k, "images")
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
			if v := Lookup(opts, f); v != nil && v.Kind == yaml.SequenceNode {
				cur := Lookup(k, f)
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

// setField sets key of mapping m to v.
func setField(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, strNode(key), v)
}

// directoryKustomization is a kustomization listing what a directory
// application reads of its path: the YAML and JSON files at its top, or
// under it when recurse is set, kept by include and exclude.
func (l *loader) directoryKustomization(u *Unit) []byte {
	files := l.directoryFiles(u, func(rel string) bool {
		name := path.Base(rel)
		if u.rendered && rel == name && slices.Contains(configFileNames, name) {
			return false // keyhole's plugin reads its Config; it renders no object of it
		}
		return inputExt(name) && (name != "agent.yaml" && name != "agent.yml" || l.holdsObjects(filepath.Join(u.Root, filepath.FromSlash(rel))))
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
func (l *loader) directoryFiles(u *Unit, keep func(rel string) bool) []string {
	recurse := boolField(u.Argo.Directory, "recurse")
	include, exclude := stringField(u.Argo.Directory, "include"), stringField(u.Argo.Directory, "exclude")
	var files []string
	if u.rendered {
		// keyhole's plugin reads its path as keyhole does: a walk, which
		// leaves out what .gitignore keeps out of the repository Argo
		// CD clones (a Secret's stand-in named only on the command line).
		for _, f := range walk(l.fsys, u.Root, nil).files {
			if rel, err := filepath.Rel(u.Root, f); err == nil && keep(filepath.ToSlash(rel)) {
				files = append(files, filepath.ToSlash(rel))
			}
		}
		slices.Sort(files)
		return files
	}
	l.visitTree(u.Root, func(rel string, fi fs.FileInfo) bool {
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
func (l *loader) holdsObjects(abs string) bool {
	docs, _ := Parse(abs, l.sniff(abs, nil))
	return slices.ContainsFunc(docs, func(d *Document) bool { return !d.IsAgent() })
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

// chartAbove reports whether dir, or a directory above it up to root, is
// a Helm chart.
func chartAbove(fsys fileSystem, dir, root string) bool {
	for d := dir; within(root, d); d = filepath.Dir(d) {
		if helmChartFile(fsys, d) != "" {
			return true
		}
		if d == root || filepath.Dir(d) == d {
			break
		}
	}
	return false
}

// strNode is a string scalar, quoted where YAML would read it as another
// type (a tag "1.27" is a string, not a number).
func strNode(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}

// argoHelm is how Argo CD's repo server renders the chart at root for an
// Application's source src (one of sources), named app, deploying to
// namespace: helm template with the release name, namespace, value files
// (relative to the chart, or $ref/ to another source's repository),
// values, parameters and versions its helm options give. What the repo
// server would refuse (a value file that is not there) is said when the
// chart is rendered, which it is only when it holds something of
// keyhole's.
func (l *loader) argoHelm(src *yaml.Node, sources []*yaml.Node, app, namespace, root, srcRoot string) *HelmOverlay {
	h := Lookup(src, "helm")
	o := &HelmOverlay{
		ReleaseName: cmp.Or(stringField(h, "releaseName"), app),
		Namespace:   cmp.Or(stringField(h, "namespace"), namespace),
		KubeVersion: stringField(h, "kubeVersion"),
		SkipCRDs:    boolField(h, "skipCrds"),
		SkipTests:   boolField(h, "skipTests"),
	}
	if vs := Lookup(h, "apiVersions"); vs != nil && vs.Kind == yaml.SequenceNode {
		for _, v := range vs.Content {
			o.APIVersions = append(o.APIVersions, v.Value)
		}
	}
	ignoreMissing := boolField(h, "ignoreMissingValueFiles")
	var unread []string
	for _, v := range stringList(Lookup(h, "valueFiles")) {
		f := v
		if strings.Contains(f, "://") {
			// Fetched, or decrypted by a plugin (helm-secrets'
			// secrets://): keyhole reads neither.
			unread = append(unread, f)
			continue
		}
		base := root
		if ref, rest, ok := strings.Cut(f, "/"); ok && strings.HasPrefix(ref, "$") {
			if !slices.ContainsFunc(sources, func(s *yaml.Node) bool { return stringField(s, "ref") == ref[1:] }) {
				o.Invalid = cmp.Or(o.Invalid, fmt.Sprintf("value file %s names the source %s, which the Application does not have", v, ref))
				continue
			}
			base, f = srcRoot, rest
		}
		abs := filepath.Join(base, filepath.FromSlash(f))
		if !within(srcRoot, abs) {
			o.Invalid = cmp.Or(o.Invalid, fmt.Sprintf("value file %s leaves the repository, which Argo CD refuses", v))
			continue
		}
		if l.outsideRepo(srcRoot, abs) {
			o.Invalid = cmp.Or(o.Invalid, fmt.Sprintf("value file %s is outside the repository (in a .git directory, or through a symbolic link leading out), which keyhole never reads", v))
			continue
		}
		if fi, err := l.fsys.Stat(abs); err != nil || !fi.Mode().IsRegular() {
			if !ignoreMissing {
				o.Invalid = cmp.Or(o.Invalid, fmt.Sprintf("value file %s is not a file of this repository", v))
			}
			continue
		}
		o.ValueFiles = append(o.ValueFiles, abs)
	}
	if len(unread) > 0 {
		o.Without = "its value files " + strings.Join(unread, ", ") + ", which Helm fetches or a plugin decrypts (keyhole does neither)"
	}
	if vo := Lookup(h, "valuesObject"); vo != nil && vo.Kind == yaml.MappingNode {
		o.Values, _ = yaml.Marshal(vo)
	} else if v := Lookup(h, "values"); v != nil && v.Kind == yaml.ScalarNode {
		o.Values = []byte(v.Value)
	} else if v != nil && v.Kind == yaml.MappingNode {
		o.Values, _ = yaml.Marshal(v)
	}
	if ps := Lookup(h, "parameters"); ps != nil && ps.Kind == yaml.SequenceNode {
		for _, p := range ps.Content {
			kv := stringField(p, "name") + "=" + stringField(p, "value")
			if boolField(p, "forceString") {
				o.SetString = append(o.SetString, kv)
			} else {
				o.Set = append(o.Set, kv)
			}
		}
	}
	if fps := Lookup(h, "fileParameters"); fps != nil && fps.Kind == yaml.SequenceNode {
		for _, p := range fps.Content {
			abs := filepath.Join(root, filepath.FromSlash(stringField(p, "path")))
			if !within(srcRoot, abs) || l.outsideRepo(srcRoot, abs) {
				o.Invalid = cmp.Or(o.Invalid, fmt.Sprintf("file parameter %s reads %s, outside the repository", stringField(p, "name"), stringField(p, "path")))
				continue
			}
			o.SetFile = append(o.SetFile, stringField(p, "name")+"="+abs)
		}
	}
	return o
}
