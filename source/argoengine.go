package source

import (
	"errors"
	"io/fs"
	"slices"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// Argo reads Argo CD's Applications and ApplicationSets as Argo CD reads
// them (source/argocd): the units each source of an Application makes,
// and the Applications an ApplicationSet's controller makes. Which
// objects are read, what applies them, and what each unit builds, is the
// loader's.
type Argo interface {
	// Units is what the Application or ApplicationSet d makes, one
	// record per source of each Application, reading the repository
	// through h: its fields read from vals, the object as the Argo CD
	// unit applying it builds it in namespace ns, or from d when vals is
	// nil. srcRoots are the roots it was found under.
	Units(h Host, d *Document, vals *yaml.Node, ns string, srcRoots []string) []ArgoFound
	// Manifest is the kustomization Argo CD's repo server builds the
	// Argo CD unit u's path with, and the path it stands at (absolute):
	// the path's own with the Application's kustomize options written
	// in, or one listing the files a directory application reads.
	Manifest(h Host, u *Unit) (kfile string, kdata []byte)
	// Jsonnet are the warnings (CodeJsonnetNotEvaluated) that the
	// directory application u evaluates Jsonnet files naming keyhole's
	// kinds or declaring a Secret (Host.Matters), which keyhole does
	// not evaluate.
	Jsonnet(h Host, u *Unit) []diag.Diagnostic
	// AppsChart is, for the Helm chart in dir whose Chart.yaml lists
	// argo-helm's argocd-apps without charts/ holding it, the
	// Applications and ApplicationSets argocd-apps renders from the
	// chart's values.yaml (reported as file); ok is false when there is
	// nothing to read.
	AppsChart(h Host, dir, file string) (docs []*Document, ok bool)
	// UnvendoredApps is the warning, when there is one, that the Helm
	// chart in dir (its Chart.yaml reported as chart) has a dependency
	// its charts/ does not hold to which the chart's values give Argo CD
	// objects to render.
	UnvendoredApps(h Host, dir, chart string) (diag.Diagnostic, bool)
	// Settle settles what the loader's scan found of Argo CD, once
	// every Application and ApplicationSet is read as the unit applying
	// it builds it: it may change the Skip, Err, Warn and Code of their
	// records (a source of this repository told by another building
	// from it) and set Unreached (an object no root reaches).
	Settle(h Host, objs []*ArgoObject)
	// Clusters sets the Cluster of each Argo CD unit of units (the
	// units found, every engine's), where the repository holds more
	// than one Argo CD instance: the instance its root starts.
	Clusters(h Host, units []*Unit)
	// Applies is what Argo CD applies of the Argo CD unit u's build,
	// docs, that keyhole's render of it does not make, as warnings.
	Applies(h Host, u *Unit, docs []*Document) []diag.Diagnostic
	// ClusterSecret is the Argo CD cluster Secret d declares (one with
	// Argo CD's cluster label, or an object making one); ok is false
	// when d declares none.
	ClusterSecret(d *Document) (c ArgoCluster, ok bool)
	// Config reads the argocd field of keyhole.yaml's Config document
	// d, whose directory is base (absolute, OS form): what it says, and
	// a ConfigInvalid error at each root that is not the repository's.
	Config(h Host, d *Document, base string) (ArgoConfig, diag.List)
}

// ArgoConfig is what keyhole.yaml's argocd field says.
type ArgoConfig struct {
	// Roots are the Applications and ApplicationSets (files or
	// directories) an Argo CD instance starts from.
	Roots []ArgoRoot
	// Rendered are the directories (absolute) keyhole render writes that
	// Argo CD Applications apply (argocd.rendered); nil when the field
	// holds no list.
	Rendered []string
}

// ArgoRoot is one of keyhole.yaml's argocd.roots.
type ArgoRoot struct {
	// Path is the file or directory (absolute), Shown as keyhole.yaml
	// writes it.
	Path, Shown string
	// Instance names the Argo CD instance it starts, when set.
	Instance string
}

// ArgoCluster is an Argo CD cluster Secret the repository declares: the
// fields a clusters generator's parameters take (never its config,
// which holds credentials).
type ArgoCluster struct {
	Name, Server, Project string
	Labels, Annotations   map[string]string
	// Made, when not empty, says the Secret is made by something whose
	// values keyhole does not read ("the ExternalSecret argocd/prod").
	Made string
}

// ArgoObject is an Argo CD Application or ApplicationSet the loader's
// scan found, with the records it makes (Argo.Units), as the unit
// applying it builds it.
type ArgoObject struct {
	Doc *Document
	// File is the file declaring it (absolute, OS form).
	File  string
	Found []ArgoFound
	// Unreached, when Settle sets it, is why no root of keyhole.yaml's
	// argocd.roots reaches the object: it makes no unit, and the loader
	// says so once, at Doc, as an InputSkipped note.
	Unreached string
}

// errNoArgo is an ApplicationSet's reading when Load was given no Argo CD
// engine.
var errNoArgo = errors.New("keyhole was built without its Argo CD engine (source.Options.Engines)")

// ArgoFound is what one source of an Argo CD Application (or one
// generator of an ApplicationSet) makes, as source.Argo reads it: the
// deploy unit, or why it makes none. The loader says what is not a unit
// once, at Pos, when every object is read.
type ArgoFound struct {
	// Unit is the deploy unit the source makes; nil when it makes none.
	Unit *Unit
	// Pos is where the source, or the generator, stands.
	Pos diag.Pos
	// Skip, when not empty, is why it is out of reach: an InputSkipped
	// note.
	Skip string
	// Err is a mistake Argo CD would refuse it for; Chart says it is
	// about rendering a Helm chart.
	Err   string
	Chart bool
	// Warn, when not empty, is what keyhole cannot know of it (Code
	// says which): a warning.
	Warn, Code string
	// Repo is the repository and revision (RepoKey) the source builds
	// from. OwnErr and OwnWarn, when another source builds from that
	// repository out of this one, so that it is this one, say what
	// replaces Skip.
	Repo            string
	OwnErr, OwnWarn string
	// Claim are the directories (absolute) a source or generator keyhole
	// cannot read may deploy: read as nothing else.
	Claim []string
	// SrcRoot is the root of the source the unit's path is relative to;
	// DeclRoot, when set, the root of the repository declaring it, where
	// that is not SrcRoot (an idpbuilder package's).
	SrcRoot, DeclRoot string
	// Revision, when set, is the revision the unit is read at
	// (Host.Revision): another commit than the one keyhole reads.
	Revision *Revision
	// Shallow says the unit is a directory application that does not
	// recurse: its files are those at the top of its path. Plugin says
	// keyhole's config management plugin renders it (Unit.KeyholePlugin).
	Shallow, Plugin bool
	// Rendered, when set, says the source applies a directory
	// keyhole.yaml's argocd.rendered names (Host.ArgoRenderedDirs):
	// Skip says so, and the loader says, once every unit is known,
	// where render writes no unit there.
	Rendered *ArgoRenderUse
}

// argoFound is f as the loader keeps it.
func argoFound(f ArgoFound) engineFound {
	ef := engineFound{unit: f.Unit, pos: f.Pos, skip: f.Skip, err: f.Err, helm: f.Chart, warn: f.Warn, code: f.Code,
		repo: f.Repo, ownErr: f.OwnErr, ownWarn: f.OwnWarn, claim: f.Claim, srcRoot: f.SrcRoot, declRoot: f.DeclRoot}
	if f.Rendered != nil {
		ef.argoRender = &argoRenderUse{ArgoRenderUse: *f.Rendered, pos: f.Pos}
	}
	if u := f.Unit; u != nil {
		u.shallow, u.rendered = f.Shallow, f.Plugin
		if f.Revision != nil {
			u.pin = f.Revision.p
		}
	}
	return ef
}

// Revision is a revision an Argo CD source's targetRevision names, other
// than the one keyhole reads (Host.Revision).
type Revision struct{ p *revPin }

// Rev is the revision as written.
func (r *Revision) Rev() string { return r.p.rev }

// Held reports whether the repository holds the revision's commit, which
// keyhole then reads (Host.AtRevision).
func (r *Revision) Held() bool { return r.p.fsys != nil }

// Unread, when the revision is not held, says why keyhole cannot read it
// and what would make it readable.
func (r *Revision) Unread() string { return r.p.unread }

// Other reports whether the revision is not held and is another
// repository's: the source's URL is none of the repository's remotes.
func (r *Revision) Other() bool { return r.p.other }

// Revision is what the revision rev of the repository url names, read
// from the repository at root: nil for the working tree (or the commit
// --base/--head names, or a branch whose tip it holds), else the commit
// keyhole reads the source at, or why it cannot.
func (h Host) Revision(rev, root, url string) *Revision {
	if p := h.l.pinAt(rev, root, url); p != nil {
		return &Revision{p: p}
	}
	return nil
}

// AtRevision runs read with h reading the files of r's commit, when r is
// held; else with the files it reads.
func (h Host) AtRevision(r *Revision, read func()) {
	if r == nil || r.p.fsys == nil {
		read()
		return
	}
	saved := h.l.fsys
	h.l.fsys = r.p.fsys
	defer func() { h.l.fsys = saved }()
	read()
}

// ArgoRenderedDirs are the directories (absolute) keyhole.yaml's
// argocd.rendered names, and base the directory of the keyhole.yaml
// naming them.
func (h Host) ArgoRenderedDirs() (dirs []string, base string) {
	return h.l.argo.rendered, h.l.argo.base
}

// ArgoRoots are keyhole.yaml's argocd.roots, as Argo.Config read them.
func (h Host) ArgoRoots() []ArgoRoot { return h.l.argo.roots }

// Holds reports whether the build of the engine unit u may read file
// (absolute), which lies under its path: a path with a kustomization
// applies only what that kustomization (and those it uses) lists, a
// path without one every file under it.
func (h Host) Holds(u *Unit, file string) bool { return h.l.holds(u, file) }

// EngineUnits are the units the engines' objects make, in order, once
// they are all known (the builds' time); nil before.
func (h Host) EngineUnits() []*Unit { return h.l.engine }

// ArgoClusters are the Argo CD cluster Secrets declared under root (the
// repository's), scanned once per Load.
func (h Host) ArgoClusters(root string) []ArgoCluster { return h.l.clusterSecrets(root) }

// MayHoldConnections reports whether something the Load reads names
// keyhole's kinds: where nothing does, no Connection reads a Secret.
func (h Host) MayHoldConnections() bool { return h.l.connections }

// FileMatters reports whether the file abs, within the size limit,
// names keyhole's kinds or declares a Secret.
func (h Host) FileMatters(abs string) bool {
	data := h.l.sniff(abs, nil)
	return data != nil && (namesKeyhole(abs, data) || declaresSecret(data))
}

// Matters reports whether something under the directory dir (absolute)
// names keyhole's kinds or, where a Connection may read it, declares a
// Secret: what keyhole checks of a unit building it.
func (h Host) Matters(dir string) bool { return h.l.kustomizationMatters(dir) }

// NamesKeyhole reports whether something under the directory dir
// (absolute), or a path its kustomization reads, names keyhole's kinds.
func (h Host) NamesKeyhole(dir string) bool { return h.l.kustomizationNamesKeyhole(dir) }

// Abs is the path p, as the loader reports it (a Document's File), made
// absolute (OS form).
func (h Host) Abs(p string) string { return h.l.osPath(p) }

// Shown is the path reported for abs.
func (h Host) Shown(abs string) string { return h.l.display(abs, abs) }

// KustomizationFile is the kustomization file of the directory dir
// (absolute), or "" when it has none.
func (h Host) KustomizationFile(dir string) string { return kustomizationFile(h.l.fsys, dir) }

// Walk is the input files under root (absolute) a walk finds, and the
// kustomize directories it does not descend into, sorted; what
// .gitignore keeps out of the repository left out, and no path filter
// applied.
func (h Host) Walk(root string) []string { return walk(h.l.fsys, root, nil).files }

// VisitTree calls visit for each entry under root but hidden ones, in
// order, with its path relative to root (slash-separated); it descends
// into a directory when visit returns true for it.
func (h Host) VisitTree(root string, visit func(rel string, fi fs.FileInfo) bool) {
	h.l.visitTree(root, visit)
}

// ConfigName reports whether a file of that name is keyhole's Config
// (keyhole.yaml).
func ConfigName(name string) bool { return slices.Contains(configFileNames, name) }

// Resolve is n, a node yaml.v3 parsed, as Parse gives a Document's Node:
// its aliases resolved into copies (refused past the bound Parse sets)
// and its merge keys applied.
func Resolve(n *yaml.Node) (*yaml.Node, error) {
	r := resolver{budget: maxAliasNodes, onPath: map[*yaml.Node]bool{}}
	out, err := r.resolve(n, false)
	if err != nil {
		return nil, err
	}
	if err := applyMerges(out); err != nil {
		return nil, err
	}
	return out, nil
}

// RepoKey is how an Argo CD source's repository and revision are
// compared: the repoURL without scheme, user, ".git" or a trailing "/",
// in lower case, and the revision, HEAD when none is set; "" for no URL.
func RepoKey(repoURL, revision string) string { return repoKey(repoURL, revision) }
