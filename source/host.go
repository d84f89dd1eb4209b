package source

import (
	"errors"
	"io/fs"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/resmap"

	"keyhole.dev/keyhole/diag"
)

// An engine whose semantics have a package of their own under source/
// (source/helm, source/flux, source/argocd, source/kustomize) is given to
// Load in Options.Engines; source never imports one. The engine reads the
// repository through a Host: the loader's file system (the disk, or a
// commit's tree), confined to the repository as every read of the loader
// is. See docs/architecture.md, "Packages".

// Engines are the engines' packages a Load reads with; source/engines.All
// gives every one.
type Engines struct {
	// Helm renders the Helm charts the units deploy (source/helm).
	Helm Helm
	// Flux builds the Flux Kustomizations' paths (source/flux).
	Flux Flux
	// Argo makes the Applications of Argo CD's ApplicationSets
	// (source/argocd).
	Argo Argo
	// Kustomize reads what kustomize built of each kustomization root
	// (source/kustomize).
	Kustomize Kustomize
}

// Helm renders a Helm chart as `helm template` renders it.
type Helm interface {
	// Render renders the chart in dir (absolute, OS form) with o,
	// reading through h. It is called from several goroutines at once.
	Render(h Host, dir string, o *HelmOverlay) HelmRun
	// LocalDependencies are the directories of the repository (absolute,
	// OS form) that the chart in dir lists as its dependencies by path
	// (file://): its subcharts, once rendered.
	LocalDependencies(h Host, dir string) []string
}

// HelmRun is what rendering one chart gave.
type HelmRun struct {
	// Files are the templates' output and the chart's CRD files, in
	// order.
	Files []RenderedFile
	// Read is every file the chart's load read, by absolute path.
	Read map[string][]byte
	// Missing names the dependencies Chart.yaml lists that the chart's
	// charts/ directory does not hold: rendered without them.
	Missing []string
	// Values are the string values the chart was given, which a message
	// about it must not quote.
	Values []string
	Err    error
}

// RenderedFile is one template's output (or one CRD file), named by its
// path on disk (absolute, OS form) where it has one.
type RenderedFile struct {
	Abs  string
	Data []byte
	// Lines are where the template wrote each line of Data, nil where
	// Data is as written (a CRD file) or the engine could not tell.
	Lines []TemplateLine
}

// TemplateLine is where a template wrote one line of its output: on its
// line Line (1-based). The line's first Same characters are the
// template line's own, so a column up to Same+1 is the template's too;
// a column past it is in what an action wrote, and is given as Column,
// that action's.
type TemplateLine struct {
	Line, Same, Column int32
}

// templatePos is where the template wrote line and column col of its output,
// in file; as they are when lines is nil. A line past the output's (the end
// of the text, where a syntax error may stand) is at the template's line
// that wrote the output's last, never past the template's end.
func templatePos(lines []TemplateLine, file string, line, col int) diag.Pos {
	if line < 1 || len(lines) == 0 {
		return diag.Pos{File: file, Line: line, Column: col}
	}
	t := lines[min(line, len(lines))-1]
	if col > int(t.Same)+1 {
		col = int(t.Column)
	}
	return diag.Pos{File: file, Line: int(t.Line), Column: col}
}

// Flux builds a Flux Kustomization's path as kustomize-controller does.
type Flux interface {
	// Manifest is the kustomization kustomize-controller builds the path
	// of the Flux unit u with (the path's own with the Kustomization's
	// fields applied, or one it generates), and the path of the file it
	// stands for (absolute, OS form), reading through h.
	Manifest(h Host, u *Unit) (data []byte, kfile string, err error)
	// Substitute applies u's postBuild substitution to m, what kustomize
	// built of its path, as kustomize-controller does after the build,
	// its variables read from the ConfigMaps and Secrets the repository
	// holds in the clear that u's cluster reads (Host.Held). It is
	// called from several goroutines at once.
	Substitute(h Host, u *Unit, m resmap.ResMap) error
	// Config reads the flux field of keyhole.yaml's Config document d,
	// whose directory is base (absolute, OS form): what it says, and a
	// ConfigInvalid error at each path that is not the repository's.
	Config(h Host, d *Document, base string) (FluxConfig, diag.List)
	// Kustomization is the unit the Flux Kustomization d, applied in
	// namespace ns, makes, or why it makes none: its spec.path resolved
	// against its source (srcRoots are the roots it was found under),
	// its fields read from vals, the object as the Flux unit applying it
	// builds it, or from d when vals is nil.
	Kustomization(h Host, d *Document, vals *yaml.Node, ns string, srcRoots []string) Found
	// HelmRelease is the unit the Flux HelmRelease d, in namespace ns,
	// makes, or why it makes none, read as Kustomization reads; by is
	// the Flux unit applying it, or nil.
	HelmRelease(h Host, d *Document, vals *yaml.Node, ns string, srcRoots []string, by *Unit) Found
	// Object reads one of Flux's objects that the loader's scan found
	// in file (absolute, OS form) under srcRoots: a Kustomization,
	// HelmRelease, GitRepository, OCIRepository, FluxInstance or
	// ArtifactGenerator. It says what the loader records of it; a
	// Kustomization's unit as written is read at once (Kustomization).
	Object(h Host, d *Document, file string, srcRoots []string) FluxObject
	// OwnSources are the GitRepositories of repos that a cluster syncs
	// this repository with, besides flux-system/flux-system: each in
	// Flux's own namespace, built from by one of kustomizations whose
	// path holds the file declaring it.
	OwnSources(h Host, repos, kustomizations []FluxDecl) []FluxSource
	// Clusters sets the Cluster of each Flux unit of units (the units
	// found, every engine's) that deploys to another cluster than the
	// one keyhole's caller means.
	Clusters(h Host, units []*Unit)
	// Reach says, of each Flux Kustomization of ks (every one found, in
	// the scan's order), whether Flux applies it: one under a Flux
	// unit's path that its kustomization does not list is no deploy
	// unit, nor, where the repository has cluster entries, one no entry
	// reaches. entries says whether it has.
	Reach(h Host, ks []FluxFound) (r []FluxReached, entries bool)
	// ReleaseNamespace is the namespace the HelmRelease d is applied in
	// by the Flux unit by (nil for none); listed is the one the
	// kustomization listing its file sets.
	ReleaseNamespace(d *Document, by *Unit, listed string) string
	// Unapplied is why the HelmRelease d, declared in file and applied
	// by no Flux unit of ks (those found once Reach has said, in order),
	// is no deploy unit, or "" when it stays one, read as written;
	// entries is what Reach said.
	Unapplied(h Host, d *Document, file, listed string, ks []FluxFound, entries bool) string
	// ReleaseClusters sets the Cluster of each HelmRelease unit of units
	// that names none to the cluster of the Flux unit applying it, once
	// every unit's cluster is known.
	ReleaseClusters(h Host, units []*Unit)
	// Cluster names the cluster of the Flux unit u, the top of whose
	// chain of applying units is top: what Clusters sets, and what tells
	// the clusters apart before it has (the ConfigMaps and Secrets a
	// unit's substitution reads, Host.FluxDeploys), "" for the cluster
	// keyhole's caller means.
	Cluster(h Host, u, top *Unit) string
}

// FluxDecl is one of Flux's objects as the loader's scan found it.
type FluxDecl struct {
	Doc *Document
	// File is the file declaring it (absolute, OS form), Namespace its
	// namespace (FluxObject's), SrcRoots the roots it was found under.
	File, Namespace string
	SrcRoots        []string
}

// FluxObject is what the Flux engine reads of one of Flux's objects
// (Flux.Object): what the loader records of it for the phases that
// follow the scan.
type FluxObject struct {
	// Namespace is a Kustomization's, source's or ArtifactGenerator's:
	// its own, else the one the kustomization listing its file sets
	// (Host.ListedNamespace), else, but for a Kustomization, Flux's own
	// (FluxOwnSource). A HelmRelease's is its applying unit's to say.
	Namespace string
	// Unit, for a Kustomization, is the unit it makes as written.
	Unit *Found
	// Release says the object is a HelmRelease, read once every Flux
	// Kustomization is known: the one applying it may set its namespace
	// (Flux.HelmRelease).
	Release bool
	// GitRepository says the object is a GitRepository, whose revision
	// the loader compares with the one it reads: Revision is what its
	// spec.ref names, as source-controller reads it, and Semver says
	// that is a semver range over the repository's tags.
	GitRepository bool
	Revision      string
	Semver        bool
	// OCIRepository says the object is an OCIRepository.
	OCIRepository bool
	// URL is a GitRepository's or OCIRepository's spec.url.
	URL string
	// SyncsGit says the object is a FluxInstance whose sync is a
	// GitRepository, which flux-operator names after Namespace.
	SyncsGit bool
	// Cuts are what an ArtifactGenerator says of each ExternalArtifact
	// it makes, in its order.
	Cuts []ArtifactCut
}

// FluxConfig is what keyhole.yaml's flux field says.
type FluxConfig struct {
	// Sources maps a Flux source to the directory (absolute) that is its
	// artifact's root.
	Sources map[FluxSource]string
	// Entries are the files and directories (absolute) declaring the
	// entry Kustomizations of clusters.
	Entries []string
	// Rendered are the directories (absolute) keyhole render writes that
	// Flux Kustomizations apply: keyhole's output, read by no unit.
	Rendered []string
}

// FluxSource names a Flux source (a GitRepository, an OCIRepository, an
// ExternalArtifact...).
type FluxSource struct{ Kind, Namespace, Name string }

// ArtifactCut is what an ArtifactGenerator says of one ExternalArtifact:
// where every copy into it takes a directory of one source and places it
// at the same path, the directories it holds of that source.
type ArtifactCut struct {
	// Artifact is the ExternalArtifact's name, Generator the generator's
	// namespace/name.
	Artifact, Generator string
	// Kind, Namespace and Name are the source its copies take from.
	Kind, Namespace, Name string
	// Dirs are the directories (slash, relative; "" for the whole
	// artifact) the artifact holds, each at its place in the artifact.
	Dirs []string
	// Prefix is the directory of the source (slash, relative) that is
	// the artifact's root, where the copies move what they take up to
	// it; "" where they place it at its path in the source.
	Prefix string
	// Odd is the first copy that is not such a directory, as written
	// ("no copy" for none): the artifact is no cut of a source's tree.
	Odd string
}

// Kustomize reads what kustomize built of a kustomization root. The
// loader runs the build (internal/kustbuild, through the Memo, then
// Flux's post-build substitution for a Flux unit), and keeps what the
// documents mean for their unit.
type Kustomize interface {
	// Read reads b through h: the objects kustomize built, as documents
	// whose nodes keep the file, line and column that wrote them,
	// through patches and generators; or, when the build failed, its
	// error placed on the input that caused it.
	Read(h Host, b *KustomizeBuild) KustomizeRead
}

// KustomizeBuild is one kustomize build of a kustomization root, as the
// loader ran it.
type KustomizeBuild struct {
	// Unit is the deploy unit the build makes.
	Unit *Unit
	// Named is the directory built as the user named it (or as a walk
	// found it), for the paths reported (Host.Display); Dir is it,
	// absolute (OS form).
	Named, Dir string
	// KFile is Dir's kustomization file (absolute; "" when an engine's
	// unit has none), KName the file as reported (the engine object's
	// file when there is none).
	KFile, KName string
	// Built is what kustomize built, Read every file it read (by
	// absolute path), Err why it built nothing.
	Built resmap.ResMap
	Read  map[string][]byte
	Err   error
}

// KustomizeRead is what reading one build gave.
type KustomizeRead struct {
	// Docs are the objects built, in the build's order; Where places
	// their nodes that were not written at their own line and column of
	// their File (Document.Where), and Copies says a kustomization of
	// the build copies values between objects (Document.Copied).
	Docs   []Document
	Where  map[*yaml.Node]Placed
	Copies bool
	// Diags are what reading the files the objects came from reported,
	// in order, or the failed build's error.
	Diags diag.List
	// Sources are the files the objects were read from (absolute), each
	// as reported.
	Sources map[string]string
	// Unwritable, where Diags hold invalid YAML kustomize reads (a
	// duplicate mapping key), is kustomize's error writing out what it
	// built, quoting no key or value; "" when it writes it out.
	Unwritable string
}

// errNoFlux is a Flux unit's build when Load was given no Flux engine.
var errNoFlux = errors.New("keyhole was built without its Flux engine (source.Options.Engines)")

// errNoKustomize is a kustomization's build when Load was given no
// Kustomize engine.
var errNoKustomize = errors.New("keyhole was built without its kustomize engine (source.Options.Engines)")

// errNoHelm is a chart's rendering when Load was given no Helm engine.
var errNoHelm = errors.New("keyhole was built without its Helm engine (source.Options.Engines)")

// Host is what an engine's package reads of one Load.
type Host struct{ l *loader }

// ReadFile reads the file at abs (absolute, OS form).
func (h Host) ReadFile(abs string) ([]byte, error) { return h.l.fsys.ReadFile(abs) }

// ReadDir lists the directory at abs.
func (h Host) ReadDir(abs string) ([]fs.DirEntry, error) { return h.l.fsys.ReadDir(abs) }

// Stat describes the file at abs, following symbolic links.
func (h Host) Stat(abs string) (fs.FileInfo, error) { return h.l.fsys.Stat(abs) }

// OnDisk reports whether the files read are the disk's: not a commit's
// tree, which a library reading the disk needs laid out.
func (h Host) OnDisk() bool {
	_, ok := h.l.fsys.(*osFS)
	return ok
}

// MaxFileSize is the size past which the loader reads no file.
func (h Host) MaxFileSize() int64 { return h.l.opts.MaxFileSize }

// Sniff returns the bytes of the regular file abs when they hold marker
// and the file is within the size limit, else nil.
func (h Host) Sniff(abs string, marker []byte) []byte { return h.l.sniff(abs, marker) }

// Dirs are the directories under root (absolute, OS form), relative to
// it and slash-separated, sorted; hidden ones, and what lies below them,
// left out. A Load walks each root once for them.
func (h Host) Dirs(root string) []string { return h.l.allDirs(root) }

// InputFiles are the input files (absolute, OS form) the loader's walk
// finds under root, those of kustomize directories included, as the
// paths the Load is given allow.
func (h Host) InputFiles(root string) []string { return walkAll(h.l.fsys, root, &h.l.paths) }

// RepoRoot is the root of the repository the path at dir is in:
// Options.Root when set; else the enclosing git working tree's top; else
// the working directory, or dir itself when it lies outside that too.
func (h Host) RepoRoot(dir string) string { return h.l.repoRoot(dir) }

// BuildRoot is the root no read of a build of dir (absolute) may leave:
// the repository's.
func (h Host) BuildRoot(dir string) string { return h.l.buildRoot(dir) }

// LinkOutside returns the first symbolic link met in resolving abs whose
// target lies outside root, or in a .git directory under it; "" when
// there is none.
func (h Host) LinkOutside(root, abs string) string { return linkOutside(h.l.fsys, root, abs) }

// OutsideRepo reports whether reading abs (a file an engine's object
// names) would leave the repository that holds dir; such a read is
// refused with ErrOutsideRepo.
func (h Host) OutsideRepo(dir, abs string) bool { return h.l.outsideRepo(dir, abs) }

// Kustomization is the kustomization file kfile (absolute) parsed into
// its root mapping, or nil: parsed once per Load, and shared, so never
// to be changed.
func (h Host) Kustomization(kfile string) *yaml.Node { return kustomizationNode(h.l.fsys, kfile) }

// ListedNamespace is the namespace the kustomization that lists the file
// abs sets (kustomize's namespace field), or "": the namespace a Flux
// object written without one is applied in. The kustomization is the
// nearest one, up to root, whose resources name the file.
func (h Host) ListedNamespace(abs, root string) string { return h.l.listedNamespace(abs, root) }

// Display is the path reported for abs, a file found under root (both
// absolute, OS form), the directory the user named as named (or a walk
// found as named).
func (h Host) Display(named, root, abs string) string { return h.l.under(named, root, abs) }

// Scrub makes an error of the kustomize build of root (absolute), named
// as named, readable and the same on every machine: absolute paths
// become the paths the user would type, on one line.
func (h Host) Scrub(named, root, msg string) string { return h.l.scrub(named, root, msg) }

// ArgoHelmOption is where the repository at root gives Argo CD's
// kustomize builds --enable-helm, as FILE:LINE; "" when it does not.
func (h Host) ArgoHelmOption(root string) string { return h.l.argoHelmAt(root) }

// Within reports whether abs is dir or under it (both absolute, OS form).
func Within(dir, abs string) bool { return within(dir, abs) }

// InputName reports whether a file of that name is one the loader reads
// as input (YAML or JSON, not a kustomization file).
func InputName(name string) bool { return inputExt(name) }

// Text is data as the loader reads its text: decoded when it is UTF-16
// or UTF-32.
func Text(data []byte) []byte { return sniffText(data) }

// YAMLErrorLine is the line (from 1) of a yaml.v3 error "line n:
// problem" in data, as the loader reports it.
func YAMLErrorLine(data []byte, n int, problem string) int { return errorLine(data, n, problem) }

// StringMap returns a mapping node's string values by key.
func StringMap(n *yaml.Node) map[string]string { return stringMap(n) }

// StringField returns the value of key in mapping m when it is a string
// scalar, else "".
func StringField(m *yaml.Node, key string) string { return stringField(m, key) }

// BoolField reports whether key of mapping n is the boolean true.
func BoolField(n *yaml.Node, key string) bool { return boolField(n, key) }

// StringList returns the string scalars of the sequence n, or nil when n
// is not a sequence.
func StringList(n *yaml.Node) []string { return stringList(n) }
