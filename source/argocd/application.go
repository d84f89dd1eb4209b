package argocd

import (
	"cmp"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// A repository deployed by Argo CD says what a cluster applies in its
// Applications: each source's path (spec.source, or each of
// spec.sources), built as Argo CD's repo server builds it. A path with a
// kustomization is built with kustomize after the Application's
// kustomize options are written into it (as the repo server's `kustomize
// edit` does); a path without one is a directory application, its YAML
// and JSON files read as they are (recurse, include and exclude as
// spec.source.directory says). An ApplicationSet's generators make its
// Applications (applicationSet), each read as an Application is. A path
// holding a Helm chart is rendered as the repo server's helm template
// renders it, with the source's helm options. Charts from chart
// repositories and plugin sources are out of reach: said once. Which
// objects are read, what applies them, what the units build and what a
// generator keyhole cannot read may deploy is the loader's (package
// source); its knowledge of the repository's revisions, of keyhole.yaml
// and of the directories that matter is asked through the source.Host.
// See docs/inputs.md.

// Units is what the Argo CD Application or ApplicationSet d makes, one
// record per source of each Application (an ApplicationSet's generated
// ones included), or why a source or generator makes none. Its fields
// are read from vals, the object as the Argo CD unit applying it builds
// it, in namespace ns (the build's, else its own, else argocd), or from
// d itself when vals is nil; positions are always d's.
func (Engine) Units(h source.Host, d *source.Document, vals *yaml.Node, ns string, srcRoots []string) []source.ArgoFound {
	var name string
	if vals == nil {
		o := d.Object()
		vals, ns, name = d.Node, cmp.Or(o.Namespace, "argocd"), o.Name
	} else {
		transplantPositions(vals, d.Node)
		meta := source.Lookup(vals, "metadata")
		ns, name = cmp.Or(ns, source.StringField(meta, "namespace"), "argocd"), source.StringField(meta, "name")
	}
	if d.Object().Kind == "ApplicationSet" {
		return appSetUnits(h, vals, d, ns, srcRoots)
	}
	return appUnits(h, vals, d, ns, name, srcRoots)
}

// appUnits is the units of one Application's spec (app, which may be an
// ApplicationSet's generated one), declared by d.
func appUnits(h source.Host, app *yaml.Node, d *source.Document, ns, name string, srcRoots []string) []source.ArgoFound {
	spec := source.Lookup(app, "spec")
	// Argo CD reads spec.sources when it holds any, else spec.source.
	var sources []*yaml.Node
	if ss := source.Lookup(spec, "sources"); ss != nil && ss.Kind == yaml.SequenceNode {
		sources = append(sources, ss.Content...)
	}
	if s := source.Lookup(spec, "source"); s != nil && len(sources) == 0 {
		sources = append(sources, s)
	}
	dest := source.Lookup(spec, "destination")
	cluster := cmp.Or(source.StringField(dest, "name"), source.StringField(dest, "server"))
	if cluster == "https://kubernetes.default.svc" || cluster == "in-cluster" {
		cluster = ""
	} else if cluster != "" {
		cluster = "Argo CD destination " + cluster
	}
	if name == "" && len(sources) > 0 {
		// The API server refuses an object without a name, and a unit
		// needs one: said once, where the object begins.
		at := cmp.Or(source.Lookup(app, "metadata"), app)
		return []source.ArgoFound{{Pos: diag.Pos{File: d.File, Line: at.Line, Column: at.Column},
			Err: "an Argo CD Application in the namespace " + ns + " has no metadata.name: the API server refuses it"}}
	}
	kargo := kargoStage(app)
	var out []source.ArgoFound
	for i, src := range sources {
		pos := diag.Pos{File: d.File, Line: src.Line, Column: src.Column}
		what := fmt.Sprintf("Argo CD Application %s/%s", ns, name)
		if len(sources) > 1 {
			what += fmt.Sprintf(" (source %d)", i+1)
		}
		rel := source.StringField(src, "path")
		shown := rel // rel in a message
		if rel == "" || rel == "." {
			shown = "the repository's root"
		}
		switch {
		case source.StringField(src, "repoURL") == "":
			// Argo CD's CRD requires it: the API server refuses the
			// object, so nothing of it is deployed.
			out = append(out, source.ArgoFound{Pos: pos, Skip: what + " names no repoURL, which Argo CD's schema requires: the API server refuses it, so it deploys nothing; skipped"})
			continue
		case source.StringField(src, "chart") != "":
			out = append(out, source.ArgoFound{Pos: pos, Skip: fmt.Sprintf("%s renders the chart %s from %s, a chart repository keyhole does not fetch; out of reach, skipped",
				what, source.StringField(src, "chart"), cmp.Or(source.StringField(src, "repoURL"), "its repository"))})
			continue
		case source.Lookup(src, "plugin") != nil && !keyholePlugin(src):
			out = append(out, source.ArgoFound{Pos: pos, Skip: what + " renders through a config management plugin, which keyhole does not run; skipped"})
			continue
		case rel == "" && source.Lookup(src, "ref") != nil:
			continue // a values-only source of a multi-source Application
		case strings.Contains(rel, "{{"):
			continue // a template an ApplicationSet fills in
		}
		repoURL := source.StringField(src, "repoURL")
		repo := source.RepoKey(repoURL, source.StringField(src, "targetRevision"))
		roots := srcRoots
		if pkg, ok := cnoePackage(repoURL); ok {
			// idpbuilder serves the directory beside the Application's
			// file as a repository of its own: the path is relative to
			// it, and it is not this repository.
			dir := filepath.Join(filepath.Dir(h.Abs(d.File)), filepath.FromSlash(pkg))
			if fi, err := h.Stat(dir); err != nil || !fi.IsDir() || !source.Within(srcRoots[0], dir) {
				out = append(out, source.ArgoFound{Pos: pos, Skip: fmt.Sprintf("%s builds from %s, which idpbuilder makes of the directory %s beside the Application's file; this repository has no such directory, so idpbuilder refuses it; skipped",
					what, repoURL, pkg)})
				continue
			}
			roots, repo = []string{dir}, ""
			if root, _ := h.EnginePath(rel, roots); root == "" {
				out = append(out, source.ArgoFound{Pos: pos, Err: fmt.Sprintf("%s builds %s from %s, the directory %s that idpbuilder serves as a repository, which has no such directory: Argo CD cannot generate its manifests, so it does not sync",
					what, shown, repoURL, h.Shown(dir))})
				continue
			}
		} else if isOCI(repoURL) {
			out = append(out, source.ArgoFound{Pos: pos, Skip: fmt.Sprintf("%s builds %s from %s, an OCI artifact keyhole does not fetch, not this repository; out of reach, skipped",
				what, shown, repoURL)})
			continue
		}
		if ef, ok := renderedSource(h, what, shown, rel, roots); ok {
			ef.Pos, ef.Repo = pos, repo
			out = append(out, ef)
			continue
		}
		// A source pinned to another revision is read at that commit:
		// its path, chart and values are those of the commit.
		var pin *source.Revision
		if repo != "" {
			pin = h.Revision(source.StringField(src, "targetRevision"), roots[0], repoURL)
		}
		if pin != nil && !pin.Held() && pin.Other() {
			// Fetching would not help: the revision is another
			// repository's, whatever directory here has the path's name.
			out = append(out, source.ArgoFound{Pos: pos, Skip: fmt.Sprintf("%s builds %s at %s from %s, which is none of this repository's remotes and names a revision it does not hold: another repository, out of reach, skipped",
				what, shown, pin.Rev(), repoURL)})
			continue
		}
		if pin != nil && !pin.Held() {
			if kargo != "" {
				// A branch of this repository Kargo renders to, whose
				// path (the render's output) main need not hold: what
				// the next promotion renders is this repository's
				// overlays, left to the walk (source/kargo.go).
				out = append(out, source.ArgoFound{Pos: pos, Repo: repo, Warn: kargoUnread(what, kargo, pin), Code: source.CodeArgoCDRevision})
				continue
			}
			if root, _ := h.EnginePath(rel, roots); root != "" {
				out = append(out, source.ArgoFound{Pos: pos, Repo: repo, Warn: revisionUnread(what, pin), Code: source.CodeArgoCDRevision, Claim: []string{root}})
				continue
			}
			pin = nil // another repository's revision: out of reach below
		}
		var ef source.ArgoFound
		h.AtRevision(pin, func() {
			ef = appSource(h, app, d, src, sources, i, pos, what, rel, shown, repo, roots, srcRoots, name, ns, cluster, dest)
		})
		if ef.Unit != nil {
			ef.Revision = pin
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
	p := source.Lookup(src, "plugin")
	if p == nil {
		return false
	}
	name := source.StringField(p, "name")
	return name == "keyhole" || strings.HasPrefix(name, "keyhole-")
}

// argoOverlay is what the repo server applies to the source src's path.
// keyhole's plugin renders what keyhole reads there, every file below
// it, as a directory application that recurses; a plugin source has no
// kustomize or directory options of its own.
func argoOverlay(src *yaml.Node, plugin bool) *source.ArgoOverlay {
	if plugin {
		return &source.ArgoOverlay{Directory: &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "recurse"}, {Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}}}}
	}
	return &source.ArgoOverlay{Kustomize: source.Lookup(src, "kustomize"), Directory: source.Lookup(src, "directory")}
}

// appSource is the unit of the source src (the i-th of sources) of the
// Application app that d declares, or what is said of it instead.
func appSource(h source.Host, app *yaml.Node, d *source.Document, src *yaml.Node, sources []*yaml.Node, i int, pos diag.Pos, what, rel, shown, repo string, roots, srcRoots []string, name, ns, cluster string, dest *yaml.Node) source.ArgoFound {
	root, srcRoot := h.EnginePath(rel, roots)
	if root == "" {
		return source.ArgoFound{Pos: pos, Repo: repo, Skip: fmt.Sprintf("%s builds %s from %s, which is not a directory of this repository; out of reach, skipped",
			what, shown, cmp.Or(source.StringField(src, "repoURL"), "its repository")),
			OwnErr: fmt.Sprintf("%s builds %s from %s, this repository (its other Applications build from it at the same revision), which has no such directory: Argo CD cannot generate its manifests, so it does not sync",
				what, shown, source.StringField(src, "repoURL"))}
	}
	var helm *source.HelmOverlay
	switch {
	case h.HelmChart(root):
		helm = argoHelm(h, src, sources, name, source.StringField(dest, "namespace"), root, srcRoot)
	case source.Lookup(src, "helm") != nil:
		return source.ArgoFound{Pos: pos, Chart: true, Err: what + " renders " + shown + " with Helm, but it holds no Chart.yaml: Argo CD cannot render it"}
	case chartAbove(h, root, srcRoot):
		return source.ArgoFound{Pos: pos, Skip: what + " builds " + shown + ", a directory inside a Helm chart, whose templates are not YAML until Helm renders them; skipped"}
	}
	plugin := keyholePlugin(src)
	shallow := helm == nil && !plugin && !source.BoolField(source.Lookup(src, "directory"), "recurse") && h.KustomizationFile(root) == ""
	unitName := "argocd:" + ns + "/" + name
	dir := path.Join("argocd", ns, source.OutputDir(name))
	if len(sources) > 1 {
		unitName += "#" + strconv.Itoa(i+1)
		dir = path.Join(dir, strconv.Itoa(i+1))
	}
	var declRoot string
	if srcRoot != srcRoots[0] && len(roots) == 1 && roots[0] == srcRoot {
		declRoot = srcRoots[0] // an idpbuilder package's
	}
	return source.ArgoFound{SrcRoot: srcRoot, DeclRoot: declRoot, Pos: pos, Repo: repo, Unit: &source.Unit{
		Name:      unitName,
		Dir:       dir,
		Source:    source.UnitArgoCD,
		Root:      root,
		Decl:      diag.Pos{File: d.File, Line: app.Line, Column: app.Column},
		Cluster:   cluster,
		Namespace: source.StringField(dest, "namespace"),
		Argo:      argoOverlay(src, plugin),
		Helm:      helm,
	}, Shallow: shallow, Plugin: plugin}
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

// chartAbove reports whether dir, or a directory above it up to root, is
// a Helm chart.
func chartAbove(h source.Host, dir, root string) bool {
	for d := dir; source.Within(root, d); d = filepath.Dir(d) {
		if h.HelmChart(d) {
			return true
		}
		if d == root || filepath.Dir(d) == d {
			break
		}
	}
	return false
}

// argoHelm is how Argo CD's repo server renders the chart at root for an
// Application's source src (one of sources), named app, deploying to
// namespace: helm template with the release name, namespace, value files
// (relative to the chart, or $ref/ to another source's repository),
// values, parameters and versions its helm options give. What the repo
// server would refuse (a value file that is not there) is said when the
// chart is rendered, which it is only when it holds something of
// keyhole's.
func argoHelm(host source.Host, src *yaml.Node, sources []*yaml.Node, app, namespace, root, srcRoot string) *source.HelmOverlay {
	h := source.Lookup(src, "helm")
	o := &source.HelmOverlay{
		ReleaseName: cmp.Or(source.StringField(h, "releaseName"), app),
		Namespace:   cmp.Or(source.StringField(h, "namespace"), namespace),
		KubeVersion: source.StringField(h, "kubeVersion"),
		SkipCRDs:    source.BoolField(h, "skipCrds"),
		SkipTests:   source.BoolField(h, "skipTests"),
	}
	if vs := source.Lookup(h, "apiVersions"); vs != nil && vs.Kind == yaml.SequenceNode {
		for _, v := range vs.Content {
			o.APIVersions = append(o.APIVersions, v.Value)
		}
	}
	ignoreMissing := source.BoolField(h, "ignoreMissingValueFiles")
	var unread []string
	for _, v := range source.StringList(source.Lookup(h, "valueFiles")) {
		f := v
		if strings.Contains(f, "://") {
			// Fetched, or decrypted by a plugin (helm-secrets'
			// secrets://): keyhole reads neither.
			unread = append(unread, f)
			continue
		}
		base := root
		if ref, rest, ok := strings.Cut(f, "/"); ok && strings.HasPrefix(ref, "$") {
			if !slices.ContainsFunc(sources, func(s *yaml.Node) bool { return source.StringField(s, "ref") == ref[1:] }) {
				o.Invalid = cmp.Or(o.Invalid, fmt.Sprintf("value file %s names the source %s, which the Application does not have", v, ref))
				continue
			}
			base, f = srcRoot, rest
		}
		abs := filepath.Join(base, filepath.FromSlash(f))
		if !source.Within(srcRoot, abs) {
			o.Invalid = cmp.Or(o.Invalid, fmt.Sprintf("value file %s leaves the repository, which Argo CD refuses", v))
			continue
		}
		if host.OutsideRepo(srcRoot, abs) {
			o.Invalid = cmp.Or(o.Invalid, fmt.Sprintf("value file %s is outside the repository (in a .git directory, or through a symbolic link leading out), which keyhole never reads", v))
			continue
		}
		if fi, err := host.Stat(abs); err != nil || !fi.Mode().IsRegular() {
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
	if vo := source.Lookup(h, "valuesObject"); vo != nil && vo.Kind == yaml.MappingNode {
		o.Values, _ = yaml.Marshal(vo)
	} else if v := source.Lookup(h, "values"); v != nil && v.Kind == yaml.ScalarNode {
		o.Values = []byte(v.Value)
	} else if v != nil && v.Kind == yaml.MappingNode {
		o.Values, _ = yaml.Marshal(v)
	}
	if ps := source.Lookup(h, "parameters"); ps != nil && ps.Kind == yaml.SequenceNode {
		for _, p := range ps.Content {
			kv := source.StringField(p, "name") + "=" + source.StringField(p, "value")
			if source.BoolField(p, "forceString") {
				o.SetString = append(o.SetString, kv)
			} else {
				o.Set = append(o.Set, kv)
			}
		}
	}
	if fps := source.Lookup(h, "fileParameters"); fps != nil && fps.Kind == yaml.SequenceNode {
		for _, p := range fps.Content {
			abs := filepath.Join(root, filepath.FromSlash(source.StringField(p, "path")))
			if !source.Within(srcRoot, abs) || host.OutsideRepo(srcRoot, abs) {
				o.Invalid = cmp.Or(o.Invalid, fmt.Sprintf("file parameter %s reads %s, outside the repository", source.StringField(p, "name"), source.StringField(p, "path")))
				continue
			}
			o.SetFile = append(o.SetFile, source.StringField(p, "name")+"="+abs)
		}
	}
	return o
}

// appSetUnits is the units of the Applications an ApplicationSet (set,
// declared by d) has its generators make from this repository, as the
// Argo CD engine makes them: git directories and files, a list, the
// clusters the repository declares, and a matrix of two of those.
func appSetUnits(h source.Host, set *yaml.Node, d *source.Document, ns string, srcRoots []string) []source.ArgoFound {
	spec := source.Lookup(set, "spec")
	tmpl := source.Lookup(spec, "template")
	gens := source.Lookup(spec, "generators")
	what := "Argo CD ApplicationSet " + ns + "/" + source.StringField(source.Lookup(set, "metadata"), "name")
	if tmpl == nil || gens == nil || gens.Kind != yaml.SequenceNode {
		return nil
	}
	tp := source.Lookup(spec, "templatePatch")
	in := appSetInput{Roots: srcRoots, Clusters: func() []source.ArgoCluster { return h.ArgoClusters(srcRoots[0]) }}
	var out []source.ArgoFound
	for _, g := range applicationSet(h, spec, in) {
		pos := diag.Pos{File: d.File, Line: g.Line, Column: g.Column}
		for _, u := range g.Unmatched {
			msg := fmt.Sprintf("%s: its git generator's path %s matches nothing in this repository", what, u.Path)
			out = append(out, source.ArgoFound{Pos: pos,
				Skip:    msg + ", so it makes no Application here; if " + cmp.Or(u.RepoURL, "its repoURL") + " is another repository, that one's are out of reach",
				OwnWarn: msg + ", the one its repoURL " + u.RepoURL + " names, so Argo CD makes no Application of it: a typo, or a directory not yet committed",
				Repo:    source.RepoKey(u.RepoURL, u.Revision)})
		}
		if stop := g.Stop; stop != nil {
			var claim []string
			named := false // the template's paths name directories, whatever its parameters
			if stop.Severity != diag.Error {
				claim, named = templateDirs(h, tmpl, srcRoots[0])
			}
			if stop.Severity == diag.Warning {
				// What keyhole cannot know matters only where the
				// Applications would build something of keyhole's.
				switch {
				case tp == nil && !templateBuildsRepo(tmpl):
					stop = appSetSkip(stop.Message + "; its Applications build from a chart repository or a plugin, out of reach in any case")
				case !h.MayHoldConnections():
					stop = appSetSkip(stop.Message + "; nothing keyhole reads names keyhole's kinds")
				case len(claim) > 0 && !slices.ContainsFunc(claim, h.Matters):
					stop = appSetSkip(stop.Message + "; nothing in the directories its template builds names keyhole's kinds or declares a Secret")
				case stop.Apart && named && len(claim) == 0:
					// Nothing of this repository to check apart: its
					// Applications build paths the repository lacks.
					stop = appSetSkip(stop.Message + "; its template's paths name no directory of this repository")
				case stop.Apart && !slices.ContainsFunc(claim, h.NamesKeyhole):
					// A Secret there is no object keyhole checks; a
					// Connection that reads it says so itself.
					stop = appSetSkip(stop.Message + "; the directories its template builds declare Secrets but name none of keyhole's kinds")
				case stop.Apart:
					stop = checkApart(h, stop, claim, srcRoots[0])
				}
			}
			f := stopFound(pos, what, stop)
			f.Claim = claim
			out = append(out, f)
			continue
		}
		for _, app := range g.Apps {
			name := source.StringField(source.Lookup(app, "metadata"), "name")
			// The controller makes each Application in the
			// ApplicationSet's namespace, whatever the template says.
			for _, f := range appUnits(h, app, d, ns, name, srcRoots) {
				if f.Unit != nil {
					f.Unit.Decl = pos
				}
				if g.Assumed && f.OwnErr != "" {
					// Whether Argo CD makes it at all is not known: a
					// path it lacks is no mistake keyhole can show.
					f.OwnErr = ""
					f.Skip += " (made for the local cluster, which keyhole takes its clusters generator to give as the repository declares no cluster Secret)"
				}
				out = append(out, f)
			}
		}
		if g.Failed != nil {
			out = append(out, stopFound(pos, what, g.Failed))
		}
	}
	return out
}

// appSetSkip is a stop saying a generator's Applications are out of
// reach.
// checkApart is stop with its advice naming the directories of claim
// (under root) that name keyhole's kinds, to check on their own.
func checkApart(h source.Host, stop *appSetStop, claim []string, root string) *appSetStop {
	var dirs []string
	for _, d := range claim {
		if !h.NamesKeyhole(d) {
			continue
		}
		if rel, err := filepath.Rel(root, d); err == nil {
			d = rel
		}
		dirs = append(dirs, filepath.ToSlash(d))
	}
	if more := len(dirs) - 3; more > 0 {
		dirs = append(dirs[:3], fmt.Sprintf("and %d more", more))
	}
	s := *stop
	s.Advice = "check the directories its template deploys that hold keyhole's kinds on their own, keyhole check " + strings.Join(dirs, " ") + ", to have them checked"
	return &s
}

func appSetSkip(msg string) *appSetStop {
	return &appSetStop{Severity: diag.Info, Message: msg}
}

// templateDirs are the directories under root the ApplicationSet
// template tmpl's sources may build, whatever its parameters: each
// source's path with every {{...}} read as "*", when some element of it
// is written out (envs/{{.name}}, not {{.path}}). named says some path
// is: with no dirs, then, the Applications build none of this
// repository's directories.
func templateDirs(h source.Host, tmpl *yaml.Node, root string) (dirs []string, named bool) {
	spec := source.Lookup(tmpl, "spec")
	srcs := []*yaml.Node{source.Lookup(spec, "source")}
	if ss := source.Lookup(spec, "sources"); ss != nil && ss.Kind == yaml.SequenceNode {
		srcs = append(srcs, ss.Content...)
	}
	var globs []string
	for _, s := range srcs {
		p := strings.Trim(path.Clean("/"+source.StringField(s, "path")), "/")
		g := templateTag.ReplaceAllString(p, "*")
		if p != "" && p != "." && slices.ContainsFunc(strings.Split(g, "/"), func(e string) bool { return !strings.Contains(e, "*") }) {
			globs = append(globs, g)
		}
	}
	if len(globs) == 0 {
		return nil, false
	}
	for _, d := range h.Dirs(root) {
		if slices.ContainsFunc(globs, func(g string) bool { return globMatch(g, d) }) {
			dirs = append(dirs, filepath.Join(root, filepath.FromSlash(d)))
		}
	}
	return dirs, true
}

// templateBuildsRepo reports whether the ApplicationSet template tmpl
// has a source that may build a directory of a repository: not a chart
// from a chart repository, a plugin or a source of values alone.
func templateBuildsRepo(tmpl *yaml.Node) bool {
	spec := source.Lookup(tmpl, "spec")
	srcs := []*yaml.Node{source.Lookup(spec, "source")}
	if ss := source.Lookup(spec, "sources"); ss != nil && ss.Kind == yaml.SequenceNode {
		srcs = append(srcs, ss.Content...)
	}
	return slices.ContainsFunc(srcs, func(s *yaml.Node) bool {
		return s != nil && source.Lookup(s, "chart") == nil && source.Lookup(s, "plugin") == nil && (source.Lookup(s, "ref") == nil || source.StringField(s, "path") != "")
	})
}

// templateTag is a template's {{...}}.
var templateTag = regexp.MustCompile(`\{\{.*?\}\}`)

// stopFound is what is said, at pos, of a generator of the
// ApplicationSet what that makes nothing keyhole reads.
func stopFound(pos diag.Pos, what string, s *appSetStop) source.ArgoFound {
	switch s.Severity {
	case diag.Error:
		return source.ArgoFound{Pos: pos, Err: what + ": " + s.Message}
	case diag.Warning:
		return source.ArgoFound{Pos: pos, Warn: what + ": " + s.Message + "; its Applications are not checked (" + s.Advice + ")", Code: source.CodeArgoCDUnread}
	}
	return source.ArgoFound{Pos: pos, Skip: what + ": " + s.Message + "; this generator's Applications are not checked"}
}

// revisionUnread is the warning that the Argo CD Application what,
// pinned to r, cannot be read at that revision.
func revisionUnread(what string, r *source.Revision) string {
	return what + " builds its path at targetRevision " + r.Rev() + ", other than the one keyhole reads, and " + r.Unread() +
		"; keyhole reads nothing for it, as the working tree is not what it deploys"
}

// transplantPositions gives each node of built the line and column of
// the node at the same place in orig (by key, and by index in a
// sequence), or of the nearest node above it that orig holds: what is
// said of an object a build wrote points into the file declaring it.
func transplantPositions(built, orig *yaml.Node) {
	var place func(b, o *yaml.Node, matched bool)
	place = func(b, o *yaml.Node, matched bool) {
		b.Line, b.Column = o.Line, o.Column
		switch {
		case matched && b.Kind == yaml.MappingNode && o.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(b.Content); i += 2 {
				ov, ok := o, false
				for j := 0; j+1 < len(o.Content); j += 2 {
					if o.Content[j].Value == b.Content[i].Value {
						ov, ok = o.Content[j+1], true
						b.Content[i].Line, b.Content[i].Column = o.Content[j].Line, o.Content[j].Column
						break
					}
				}
				if !ok {
					b.Content[i].Line, b.Content[i].Column = o.Line, o.Column
				}
				place(b.Content[i+1], ov, ok)
			}
		case matched && b.Kind == yaml.SequenceNode && o.Kind == yaml.SequenceNode:
			for i, c := range b.Content {
				if i < len(o.Content) {
					place(c, o.Content[i], true)
				} else {
					place(c, o, false)
				}
			}
		default:
			for _, c := range b.Content {
				place(c, o, false)
			}
		}
	}
	place(built, orig, true)
}
