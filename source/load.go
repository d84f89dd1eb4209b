package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/gitfs"
	"keyhole.dev/keyhole/internal/kustbuild"
	"keyhole.dev/keyhole/internal/parallel"
)

// ErrUnreadable marks a path that could not be read at all: missing, not
// permitted, or a broken symbolic link. The CLI maps it to exit code 2.
var ErrUnreadable = errors.New("unreadable input")

// DefaultMaxFileSize is the size limit when Options.MaxFileSize is zero.
// Real configuration files are far smaller; the limit keeps a stray dump or
// a hostile input from being read into memory.
const DefaultMaxFileSize = 16 << 20

// Options configures Load.
type Options struct {
	// Stdin is read when a path is "-".
	Stdin io.Reader
	// MaxFileSize is the largest file (or standard input) read, in bytes;
	// zero means DefaultMaxFileSize. A larger input is an InputInvalid
	// diagnostic and is never read whole.
	MaxFileSize int64
	// Dir is the working directory that reported paths are made relative
	// to; empty means the process's working directory.
	Dir string
	// Tree, when set, is read instead of the disk: the files of one
	// commit, standing where its repository's working tree stands (see
	// gitfs.Repo.Tree). Paths are still named as on disk, relative to Dir, so
	// documents and diagnostics read exactly as they would for a checkout
	// of that commit.
	Tree *gitfs.Tree
	// AllowRemoteBases lets kustomize fetch the remote bases a
	// kustomization names (git repositories, HTTP URLs), as kubectl
	// kustomize does. Otherwise such a kustomization is not built: a
	// KustomizeRemoteBase error points at the entry, and nothing is
	// fetched.
	AllowRemoteBases bool
	// Exclude lists patterns, in .gitignore's syntax and relative to
	// Dir, of paths a walk does not read (the keyhole.yaml Config's
	// exclude and include add theirs; see docs/inputs.md). A path named
	// explicitly is read whatever they say.
	Exclude []string
	// Root, when set, is the repository's root, whose keyhole.yaml (or
	// keyhole.yml) is the one Config read; empty means the git working
	// tree enclosing each path, else Dir. A Config anywhere else is
	// refused (ConfigInvalid), so a change cannot bring one of its own.
	Root string
	// Parallelism is how many files are read and parsed at once; zero
	// means runtime.GOMAXPROCS(0). Whatever it is, Load returns the same
	// documents and diagnostics in the same order.
	Parallelism int
	// Digest, when set, is given each document read from a file or
	// standard input as soon as it is parsed, on the goroutine that parsed
	// it (so calls run concurrently), before any other document of a
	// later file is taken. What it returns is the document's Digested;
	// when it says release, the loader drops the node tree of a document
	// read from a file (Node is nil, Released is true, Object still
	// answers), and Tree reads it again when needed. Documents kustomize
	// built, and those of standard input, always keep their trees.
	Digest Digest
	// Memo, when set, gives a file the documents an earlier parse of
	// the same name and bytes gave, rather than parsing it again (see
	// Memo). Load returns the same either way.
	Memo *Memo
	// Engines are the engines' packages the units are read with
	// (source/engines.All); a chart is not rendered without Helm's.
	Engines Engines
	// AllUnits builds every engine unit, not only those whose path
	// holds keyhole's kinds or a Secret: for comparing keyhole's reading
	// of a repository with an engine's own (bench/corpus/fluxcmp).
	AllUnits bool
}

// Load reads every path in order: a file, a directory, or "-" for
// standard input.
//
// A directory is walked in lexical order of slash-separated paths, reading
// only regular *.yaml, *.yml and *.json files other than kustomization
// files. Hidden files and directories (a name starting with ".") are
// skipped, and so is whatever the .gitignore files ignore that git does
// not track (a tracked file is read whatever they say): those inside
// the tree, and those of its enclosing git working tree (unless they
// ignore the named directory itself). Symbolic links to files are
// followed; symbolic links to directories are not, which also makes link
// loops harmless. A link that leads outside the repository is never
// followed, found or named (confine.go). A path named explicitly is read whatever its name or
// type. A file named twice is read once.
//
// A directory holding a kustomization (named, or found by a walk, or a
// kustomization file named itself) is built with kustomize instead of
// walked, and yields the objects the build yields, and the agent files
// beside its kustomizations; see buildKustomization, agentsBeside and
// docs/inputs.md.
//
// Load returns the documents that passed its checks, in a deterministic
// order, and diagnostics for what it could not accept. When a path cannot
// be read at all, the returned error wraps ErrUnreadable (several are
// joined); the documents of every other path are still returned.
func Load(paths []string, opts Options) ([]*Document, diag.List, error) {
	l, err := newLoader(opts)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range paths {
		if p != "-" {
			l.named = append(l.named, l.osPath(p))
		}
	}
	l.readConfigs(paths)
	l.connections, l.refs = l.mayHoldConnections(paths)
	// The units a GitOps engine declares come first: what lies under
	// their paths is theirs to build, not a walk's.
	engine, ds := l.engineUnits(paths)
	l.engine = engine
	l.diags = append(l.diags, ds...)
	for _, p := range paths {
		if p == "-" {
			l.readStdin()
			continue
		}
		l.loadPath(p)
	}
	for _, n := range l.ignoredNotes {
		if !l.seen[n.abs] {
			l.diags = append(l.diags, n.d)
		}
	}
	l.buildEngineUnits()
	l.closeRevs()
	l.background.Wait()
	l.sayHidden()
	if tooLarge(l.fsys) && !slices.ContainsFunc(l.errs, func(err error) bool { return errors.Is(err, gitfs.ErrTreeTooLarge) }) {
		l.errs = append(l.errs, fmt.Errorf("%w: commit %s: %w", ErrUnreadable, opts.Tree.Commit(), gitfs.ErrTreeTooLarge))
	}
	l.settleFailures()
	l.diags = append(l.diags, l.argoRenderedAgree()...)
	l.refuseConfigs()
	if o, ok := l.fsys.(*osFS); ok {
		// The documents keep the file system to read files again
		// (release.go), which asks nothing of its stat answers: kept,
		// they would be held until the last document is let go (5% of
		// check's peak live heap at 30,000 generated Connections).
		o.stats.Clear()
		o.lstats.Clear()
	}
	return l.docs, l.diags, errors.Join(l.errs...)
}

// ignoredNote is what a walk says of a file .gitignore ignores, kept
// until every PATH is read: a PATH that names the file reads it.
type ignoredNote struct {
	abs string
	d   diag.Diagnostic
}

// loader holds the state of one Load call.
type loader struct {
	opts Options
	fsys fileSystem
	dir  string // absolute working directory
	// named are the PATHs Load was given, absolute (buildRoot).
	named []string
	seen  map[string]bool
	// docs points into each file's own array of documents (fileRead.docs)
	// and each build's: they are never copied again.
	docs  []*Document
	diags diag.List
	errs  []error
	// paths filters what walks read (--exclude, keyhole.yaml).
	paths pathFilter
	// roots are the repository roots of the paths, and governing the
	// Config files at them, as reported (readConfigs).
	roots, governing []string
	// reread reads released documents' files again (see release.go).
	reread *rereader
	// connections is false when nothing the paths hold names keyhole's
	// kinds, so no Connection can read a Secret (see mayHoldConnections).
	connections bool
	// scopeMemo serves kustomizationHolds (scope.go).
	scopeMemo scopeMemo
	// refs is the text a Secret a walk's kustomization declares must
	// name for the kustomization to be built (secretscope.go).
	refs refText
	// walks keeps each walk mayHoldConnections made, for loadPath.
	walks map[string]walked
	// engine are the units GitOps engines' objects declare (flux.go,
	// argocd.go).
	engine []*Unit
	// engineCharts are the Helm charts rendered for the engine objects
	// their templates declare (engineUnits).
	engineCharts map[string]bool
	// ownSources are the Flux sources, besides flux-system/flux-system,
	// that are this repository (findOwnSources), by "namespace/name".
	ownSources map[string]bool
	// artifacts are the ExternalArtifacts the repository's
	// ArtifactGenerators make, by "namespace/name" (fluxartifacts.go).
	artifacts map[string]*ArtifactCut
	// argoClusters is the Argo CD cluster Secrets each repository root
	// declares, read once a clusters generator asks (clusterSecrets).
	argoClusters map[string][]ArgoCluster
	// argoClaimed are the directories ApplicationSet generators keyhole
	// cannot read may deploy, and those a Flux Kustomization applies when
	// Load was given no Flux engine (engineOwns).
	argoClaimed []string
	// argoRevs is what engineUnits knows of each repository's revisions
	// (pinAt).
	argoRevs map[string]*repoRevs
	// helmOptionAt is, per repository root, where its argocd-cm enables
	// helm in kustomize builds (argoHelmAt).
	helmOptionAt map[string]string
	helmOptionMu sync.Mutex
	// argoDirs are the directories under each root, walked once for
	// the ApplicationSet generators (allDirs).
	argoDirs map[string][]string
	// gitRefs is the revision the spec.ref of each Flux GitRepository
	// engineUnits' scan found names, by "namespace/name" (gitRef).
	gitRefs map[string]fluxRef
	// artifactURLs is the spec.url of each Flux OCIRepository
	// engineUnits' scan found, by "namespace/name": whose artifact a
	// Kustomization building from it reads (sourceIs).
	artifactURLs map[string]string
	// fluxInstances are the namespaces whose FluxInstance, as
	// engineUnits' scan found it, syncs a GitRepository: flux-operator
	// names that source after the namespace, as bootstrap does.
	fluxInstances map[string]bool
	// argo is what keyhole.yaml's argocd field says (readArgoConfig).
	argo argoConfig
	// flux is what keyhole.yaml's flux field says (readFluxConfig).
	flux FluxConfig
	// scope says which cluster the objects Flux substitution reads
	// belong to (fluxScope).
	scope *fluxScope
	// applying are the builds of Flux units that fluxApplied made to read
	// the Flux objects they apply, for buildEngineUnits to use.
	applying map[*Unit]*applyingBuild
	// failedSaid holds the engine objects (the position of their
	// declaration and their name) whose failed applying build is said:
	// one object may make several units (read again as each Application
	// applying it builds it), each with a build of its own.
	failedSaid map[string]bool
	// reach is, for an engine unit's path and components, the files its
	// build may read (buildReads).
	reach map[string]buildFiles
	// anyFlux says the repository holds Flux units, once engineUnits has
	// found them: every build then has load restrictions off.
	anyFlux bool
	// fluxHeld says the inputs declare a Flux Kustomization, read or
	// not (its source out of reach): every kustomization is then built
	// as kustomize-controller builds it, load restrictions off
	// (buildOptions).
	fluxHeld bool
	// repoObjs are the ConfigMaps and Secrets Flux substitution reads,
	// by repository root (flux.go).
	repoObjs   map[string]func() *repoObjects
	repoObjsMu sync.Mutex
	// failures are the failed units failedUnit holds for settleFailures.
	failures []unitFailure
	// background is work started ahead of need (readRepoObjectsAhead).
	background sync.WaitGroup
	// ignoredNotes are the walks' notes of ignored files (ignoredNote).
	ignoredNotes []ignoredNote
	// hiddenNotes are the walks' InputHidden warnings, each at its file,
	// kept until every unit is built (sayHidden).
	hiddenNotes diag.List
}

func newLoader(opts Options) (*loader, error) {
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = DefaultMaxFileSize
	}
	dir := opts.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("source: working directory: %w", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("source: working directory %s: %w", dir, err)
	}
	var fsys fileSystem = &osFS{}
	if opts.Tree != nil {
		fsys = commitFS{Tree: opts.Tree, kusts: &sync.Map{}}
	}
	l := &loader{opts: opts, fsys: fsys, dir: abs, seen: map[string]bool{}, reread: &rereader{fsys: fsys}}
	l.paths.exclude = parsePatterns(opts.Exclude, abs)
	return l, nil
}

// fileSystem is what the loader reads from, by absolute OS path: the disk
// (osFS), or a commit's tree (commitFS) standing at its working tree's place.
// It is closed (an unexported method) so the loader's behaviour on each
// is this package's to test.
type fileSystem interface {
	Stat(name string) (fs.FileInfo, error)
	Lstat(name string) (fs.FileInfo, error)
	Open(name string) (fs.File, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	ReadFile(name string) ([]byte, error)
	// readlink is the target of the symbolic link at name (confine.go).
	readlink(name string) (string, error)
	// kustomize is the filesystem kustomize builds from, confined to
	// root (see kustbuild.Options.Root); allowRemote lets it read the
	// remote bases kustomize clones.
	kustomize(root string, allowRemote bool) (filesys.FileSystem, error)
	// kustomizations keeps what kustomizationNode parsed, by path.
	kustomizations() *sync.Map
	// tracked says which paths under the git working tree root (absolute)
	// git holds, whatever a .gitignore says: a walk never skips those.
	tracked(root string) func(abs string) bool
}

// osFS is the disk, as one Load sees it. The walks, the confinement of
// links and the search for the enclosing git working tree ask the same
// questions about the same directories again and again (a repository of
// 600 files asked 40,000 of them); each answer about a directory, each
// path found missing, and each .gitignore (every walk reads those of its
// directories and their parents) is kept for the Load and given again.
// Other files' answers are not kept: they are asked about once or twice,
// and a repository of 100,000 files would keep them all.
type osFS struct {
	stats, lstats sync.Map // path → statAnswer
	files         sync.Map // path → fileAnswer: a .gitignore, or a path found missing
	kusts         sync.Map // see kustomizationNode
	index         sync.Map // working tree root → func() map[string]bool, its index's paths
}

type fileAnswer struct {
	data []byte
	err  error
}

type statAnswer struct {
	fi  fs.FileInfo
	err error
}

func (o *osFS) Stat(name string) (fs.FileInfo, error) { return o.stat(&o.stats, os.Stat, name) }
func (o *osFS) Lstat(name string) (fs.FileInfo, error) {
	return o.stat(&o.lstats, os.Lstat, name)
}

func (o *osFS) stat(kept *sync.Map, stat func(string) (fs.FileInfo, error), name string) (fs.FileInfo, error) {
	if a, ok := kept.Load(name); ok {
		return a.(statAnswer).fi, a.(statAnswer).err
	}
	fi, err := stat(name)
	if errors.Is(err, fs.ErrNotExist) || err == nil && fi.IsDir() {
		kept.Store(name, statAnswer{fi, err})
	}
	return fi, err
}

func (o *osFS) Open(name string) (fs.File, error)          { return os.Open(name) }
func (o *osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// ReadFile gives each caller bytes of its own.
func (o *osFS) ReadFile(name string) ([]byte, error) {
	if a, ok := o.files.Load(name); ok {
		return bytes.Clone(a.(fileAnswer).data), a.(fileAnswer).err
	}
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) || err == nil && filepath.Base(name) == ".gitignore" {
		o.files.Store(name, fileAnswer{bytes.Clone(data), err})
	}
	return data, err
}

func (o *osFS) kustomize(root string, allowRemote bool) (filesys.FileSystem, error) {
	return kustbuild.OnDisk(root, allowRemote)
}
func (o *osFS) kustomizations() *sync.Map { return &o.kusts }

// tracked reads the index of the working tree at root once per Load: a
// file git tracks is in the repository, and a cluster gets it, whatever a
// .gitignore the same change adds says.
func (o *osFS) tracked(root string) func(abs string) bool {
	load, _ := o.index.LoadOrStore(root, sync.OnceValue(func() map[string]bool {
		wt, paths := gitfs.Tracked(root)
		if wt != root {
			return nil
		}
		return paths
	}))
	paths := load.(func() map[string]bool)()
	return func(abs string) bool {
		rel, err := filepath.Rel(root, abs)
		return err == nil && paths[filepath.ToSlash(rel)]
	}
}

// commitFS is a commit's tree standing at its working tree's place.
// tooLarge reports whether fsys is a commit's and a read of it met
// gitfs.ErrTreeTooLarge: the walks that met it stopped, so what was read
// of the commit is not all of it.
func tooLarge(fsys fileSystem) bool {
	c, ok := fsys.(commitFS)
	return ok && c.TooLarge()
}

type commitFS struct {
	*gitfs.Tree
	kusts *sync.Map // see kustomizationNode
}

func (c commitFS) readlink(name string) (string, error)               { return c.Readlink(name) }
func (c commitFS) kustomize(string, bool) (filesys.FileSystem, error) { return c.KustomizeFS() }
func (c commitFS) kustomizations() *sync.Map                          { return c.kusts }

// tracked is true of every path: a commit holds only what git tracks.
func (c commitFS) tracked(string) func(string) bool { return func(string) bool { return true } }

// osPath turns a path as named by the user into one the OS resolves,
// relative paths being relative to the loader's working directory.
func (l *loader) osPath(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(l.dir, p)
}

// display is the path reported to users for abs, which the user named as
// p (or which lies inside the directory they named as p, at abs): relative
// to the working directory when under it, else as the user wrote it, and
// always slash-separated.
func (l *loader) display(p, abs string) string {
	if rel, err := filepath.Rel(l.dir, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(rel)
	}
	if !filepath.IsAbs(p) {
		return filepath.ToSlash(filepath.Clean(p))
	}
	return filepath.ToSlash(abs)
}

// under is the display path of a file found at abs while walking the
// directory the user named as p, at root.
func (l *loader) under(p, root, abs string) string {
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return filepath.ToSlash(abs)
	}
	return l.display(filepath.Join(p, rel), abs)
}

func (l *loader) unreadable(name string, err error) {
	// The OS error names the path again; keep only its reason.
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	l.errs = append(l.errs, fmt.Errorf("%w: %s: %w", ErrUnreadable, name, err))
}

func (l *loader) loadPath(p string) {
	abs := l.osPath(p)
	if l.namedOutside(p, abs) {
		return
	}
	fi, err := l.fsys.Stat(abs)
	if err != nil {
		l.unreadable(l.display(p, abs), err)
		return
	}
	if !fi.IsDir() && isKustomizationName(filepath.Base(abs)) && kustomizationFile(l.fsys, filepath.Dir(abs)) == abs {
		// A kustomization names a build, not objects: build its directory.
		l.buildKustomization(filepath.Dir(p), filepath.Dir(abs), false)
		return
	}
	if !fi.IsDir() {
		l.readFile(abs, l.display(p, abs), false)
		return
	}
	if kustomizationFile(l.fsys, abs) != "" {
		if !l.engineOwns(abs) {
			l.buildKustomization(p, abs, false)
		}
		return
	}
	if helmChartFile(l.fsys, abs) != "" {
		if !l.engineOwns(abs) {
			l.walkedChart(l.display(p, abs), abs, false)
		}
		return
	}
	w, ok := l.walks[abs]
	if !ok {
		w = walk(l.fsys, abs, &l.paths)
	}
	roots := kustomizeRoots(l.fsys, w.files)
	for _, c := range kustomizeCycles(l.fsys, w.files) {
		l.cycle(p, abs, c)
	}
	// What a Flux unit's path holds is built by that unit, as Flux
	// builds it (buildFlux), not on its own.
	roots = slices.DeleteFunc(roots, l.engineOwns)
	// A kustomize Component is applied only as part of what lists it (a
	// kustomization's components:, Flux's spec.components, an Argo CD
	// source's kustomize.components), never alone: no engine builds it
	// without the unit's patches and substitution, so it is no root.
	roots = slices.DeleteFunc(roots, func(f string) bool {
		k := kustomizationFile(l.fsys, f)
		if k == "" || stringField(kustomizationNode(l.fsys, k), "kind") != "Component" {
			return false
		}
		l.diags = append(l.diags, skipped(diag.Pos{File: l.under(p, abs, k), Line: 1, Column: 1},
			"kustomize Component not built on its own: a Component is applied only by the kustomization or GitOps engine object that lists it in its components, with that unit's patches and substitution, so it is checked there and is no deploy unit of its own (name it explicitly to build it alone)"))
		return true
	})
	// What each root is, decided in walk order: a kustomization worth
	// building, one that is not, or a file to read.
	kfiles := make([]string, len(roots))
	matters := make([]bool, len(roots))
	notes := make([]string, len(roots)) // why a kustomization that declares Secrets is not built
	for i, f := range roots {
		if kfiles[i] = kustomizationFile(l.fsys, f); kfiles[i] != "" {
			matters[i], notes[i] = l.walkedKustomizationMatters(f)
		}
	}
	// Files parse, and kustomizations build, independently of each
	// other: that work is done up front on every core, and its results
	// are taken below in walk order.
	pre := l.prefetch(roots, kfiles, matters, func(f string) string { return l.under(p, abs, f) })
	n := 0
	for _, r := range pre {
		if r.file != nil {
			n += len(r.file.docs)
		}
	}
	l.docs = slices.Grow(l.docs, n) // one array of pointers, not one per doubling
	for i, f := range roots {
		switch k := kfiles[i]; {
		case k != "" && !matters[i]:
			// Nothing in it is keyhole's business: said once, not built.
			msg := "kustomization not built: none of its files names keyhole's kinds or declares a Secret; skipped (name it explicitly to check it)"
			if notes[i] != "" {
				msg = notes[i]
			} else if !l.connections && l.kustomizationHolds(f, func(_ string, data []byte) bool { return declaresSecret(data) }) {
				msg = "kustomization not built: it declares Secrets, but nothing keyhole read names keyhole's kinds, so no Connection can read them; skipped (name it explicitly to check it)"
			}
			l.diags = append(l.diags, skipped(diag.Pos{File: l.under(p, abs, k), Line: 1, Column: 1}, msg))
		case k != "":
			l.buildKustomizationFrom(l.rootUnit(l.under(p, abs, f), f), l.under(p, abs, f), f, true, pre[i].build)
			pre[i].build = nil // what it built is in l.docs now
		case pre[i].file != nil:
			if !l.seen[f] {
				l.seen[f] = true
				l.take(l.under(p, abs, f), *pre[i].file)
			}
			pre[i].file = nil
		default:
			l.readFile(f, l.under(p, abs, f), true)
		}
	}
	for _, c := range w.charts {
		dir := filepath.Dir(c)
		l.agentsInChart(p, abs, dir)
		if !l.engineOwns(dir) {
			l.walkedChart(l.under(p, abs, dir), dir, true)
		}
	}
	for _, e := range w.broken {
		// Nothing can be read from it, so only its name can make it
		// keyhole's: a broken agent.yaml is an input that is missing.
		name := l.under(p, abs, e.path)
		if namesKeyhole(name, nil) {
			l.unreadable(name, e.err)
			continue
		}
		l.diags = append(l.diags, skipped(diag.Pos{File: name, Line: 1, Column: 1},
			fmt.Sprintf(linkUnreadable+" (%s); skipped", linkReason(e.err))))
	}
	for _, e := range w.errs {
		l.unreadable(l.under(p, abs, e.path), e.err)
	}
	for _, f := range w.ignored {
		// Only its head is read, and only to say so: what git does not
		// hold is not what CI or the cluster reads.
		if head := readHead(l.fsys, f, ignoredHead); namesKeyhole(f, head) || declaresSecret(head) {
			// Said at the end, and only if no PATH named it: a file
			// named on the command line is read however it is ignored.
			l.ignoredNotes = append(l.ignoredNotes, ignoredNote{abs: f, d: skipped(diag.Pos{File: l.under(p, abs, f), Line: 1, Column: 1},
				gitIgnored+", so it is not read as input, though it names keyhole's kinds or declares a Secret: what git does not hold, CI and the cluster never see; name the file to have it checked")})
		}
	}
	for _, h := range w.hidden {
		if f := hiddenKeyhole(l.fsys, h); f != "" {
			file, name := l.under(p, abs, f), l.under(p, abs, h)
			l.hiddenNotes = append(l.hiddenNotes, diag.Diagnostic{Code: CodeInputHidden, Severity: diag.Warning,
				Pos:     diag.Pos{File: file, Line: 1, Column: 1},
				Message: fmt.Sprintf("this file names keyhole's kinds, but a walk does not enter %s, whose name begins with a dot: git holds it, and what deploys it is not checked; name it to have it checked (keyhole check %s)", name, name)})
		}
	}
	for _, link := range w.outside {
		l.diags = append(l.diags, linkOutsideDiag(l.under(p, abs, link), w.outsideGit))
	}
	for _, d := range w.rendered {
		// Said, so that a marker copied into a directory of inputs does
		// not hide them from the check without a word.
		marker := filepath.Join(d, renderMarker)
		if l.seen[marker] || slices.Contains(l.flux.Rendered, d) || slices.Contains(l.argo.rendered, d) {
			continue // keyhole.yaml says it is render's: no marker hides it
		}
		l.seen[marker] = true
		name := l.under(p, abs, d)
		l.diags = append(l.diags, skipped(diag.Pos{File: l.under(p, abs, marker), Line: 1, Column: 1},
			fmt.Sprintf("%s not read: it holds %s, so it is the output `keyhole render` writes, not an input; name the directory to check it, or remove the file if it holds inputs", name, renderMarker)))
	}
}

// cycle reports a cycle of kustomizations a walk of the directory the user
// named as p (at abs) found: an error when one of them names keyhole's
// kinds, else a note, as for any kustomization that does not build.
func (l *loader) cycle(p, abs string, c []string) {
	names := make([]string, len(c))
	for i, d := range c {
		names[i] = l.under(p, abs, d)
	}
	first := c[0]
	pos := diag.Pos{File: l.under(p, abs, kustomizationFile(l.fsys, first)), Line: 1, Column: 1}
	msg := "kustomization cycle: " + strings.Join(names, " → ") + "; each uses the next as a base, so kustomize builds none of them and nothing in them is deployed"
	if slices.ContainsFunc(c[:len(c)-1], l.kustomizationNamesKeyhole) {
		l.diags = append(l.diags, diag.Diagnostic{Code: CodeKustomizeBuildFailed, Severity: diag.Error, Pos: pos, Message: msg + "; break the cycle"})
		return
	}
	l.diags = append(l.diags, skipped(pos, msg+"; none of their files names keyhole's kinds, so skipped"))
}

// linkReason is why a symbolic link cannot be followed, in the OS's words
// without the path it already names.
func linkReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return err.Error()
}

func (l *loader) readStdin() {
	if l.seen["-"] {
		return
	}
	l.seen["-"] = true
	if l.opts.Stdin == nil {
		l.errs = append(l.errs, fmt.Errorf("%w: -: no standard input", ErrUnreadable))
		return
	}
	l.take("-", l.parseRead("-", "", l.readFrom("-", l.opts.Stdin, 0, false), false))
}

// readFile reads one file, reported as name, refusing it by its size
// before reading when it is a regular file, and through a limit otherwise.
func (l *loader) readFile(abs, name string, walked bool) {
	if l.seen[abs] {
		return
	}
	l.seen[abs] = true
	l.take(name, l.parseRead(name, abs, l.read(abs, name, walked), walked))
}

// fileRead is what reading one file gave, then what parsing it gave: its
// bytes until they are parsed, its documents and diagnostics, or why it
// could not be read at all.
type fileRead struct {
	data   []byte
	docs   []Document
	diags  diag.List
	err    error // the reason the file is unreadable, without its path
	parsed bool  // data was parsed, or there was nothing to parse
}

// read reads the file at abs, reported as name, without parsing it. It
// touches no loader state but the file system's, so reads of files on
// disk run in parallel (see readAll).
func (l *loader) read(abs, name string, walked bool) fileRead {
	f, err := l.fsys.Open(abs)
	if err != nil {
		return fileRead{err: err, parsed: true}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fileRead{err: err, parsed: true}
	}
	if fi.Mode().IsRegular() && fi.Size() > l.opts.MaxFileSize {
		return fileRead{diags: l.tooLarge(name, f, fi.Size(), walked), parsed: true}
	}
	return l.readFrom(name, f, fi.Size(), walked)
}

// readFrom reads at most MaxFileSize+1 bytes of r, whose size is expected
// to be sizeHint (0 when unknown).
func (l *loader) readFrom(name string, r io.Reader, sizeHint int64, walked bool) fileRead {
	var buf bytes.Buffer
	if sizeHint > 0 && sizeHint <= l.opts.MaxFileSize {
		buf.Grow(int(sizeHint) + bytes.MinRead) // one allocation for the common case
	}
	_, err := buf.ReadFrom(io.LimitReader(r, l.opts.MaxFileSize+1))
	if err != nil {
		return fileRead{err: err, parsed: true}
	}
	if int64(buf.Len()) > l.opts.MaxFileSize {
		return fileRead{diags: l.tooLarge(name, nil, -1, walked), parsed: true}
	}
	return fileRead{data: buf.Bytes()}
}

// parseRead parses what read gave, unless there is nothing to parse, and
// gives the documents to Options.Digest; abs is where the file is read
// again from ("" for standard input). It depends on its arguments alone,
// so files parse in parallel.
func (l *loader) parseRead(name, abs string, r fileRead, walked bool) fileRead {
	if r.parsed {
		return r
	}
	var from *sharedFrom // made with the first document
	r.docs, r.diags = l.opts.Memo.parse(name, r.data, walked, func(d *Document) {
		if from == nil {
			from = &sharedFrom{unit: looseUnit, walked: walked, origin: l.originOf(name, abs, walked, r.data)}
		}
		d.from = from
		l.digest(d)
	})
	r.data, r.parsed = nil, true
	return r
}

// take adds what reading the file reported as name gave.
func (l *loader) take(name string, r fileRead) {
	if r.err != nil {
		l.unreadable(name, r.err)
		return
	}
	for i := range r.docs {
		l.docs = append(l.docs, &r.docs[i])
	}
	l.diags = append(l.diags, r.diags...)
}

// prefetched is what was done for one root of a walk before the walk's
// results are taken in order: its file read and parsed, or its
// kustomization built; nil when it was not done beforehand.
type prefetched struct {
	file  *fileRead
	build *kustomizeRun
}

// prefetch reads and parses the files among roots (kfiles[i] empty) and
// builds the kustomizations that matter, not yet seen, spreading the work
// over Options.Parallelism workers; name gives a file's reported path.
// A commit's tree is safe for concurrent use, as the disk is.
func (l *loader) prefetch(roots, kfiles []string, matters []bool, name func(string) string) []prefetched {
	pre := make([]prefetched, len(roots))
	var jobs []int
	for i, f := range roots {
		switch {
		case l.seen[f]:
		case kfiles[i] == "":
			pre[i].file = &fileRead{}
			jobs = append(jobs, i)
		case matters[i]:
			pre[i].build = &kustomizeRun{}
			jobs = append(jobs, i)
		}
	}
	parallel.For(len(jobs), l.opts.Parallelism, func(j int) {
		i := jobs[j]
		f := roots[i]
		if pre[i].build != nil {
			*pre[i].build = l.runKustomize(f, l.buildOptions(f))
			return
		}
		*pre[i].file = l.parseRead(name(f), f, l.read(f, name(f), true), true)
	})
	return pre
}

// inputExt reports whether a file found by walking a directory is an
// input: YAML or JSON, except kustomize's own kustomization files, which
// configure a build rather than declare objects (their apiVersion and kind
// are optional, so reading them would report KindMissing on a valid
// repository).
func inputExt(name string) bool {
	switch name {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// walkErr is a path inside a walked tree that could not be read.
type walkErr struct {
	path string
	err  error
}

// walked is what a walk found.
type walked struct {
	// files are the input files and kustomize directories, sorted by
	// their slash-separated paths.
	files []string
	// charts are the Chart.yaml files of the Helm charts skipped, sorted.
	charts []string
	// errs are the paths that could not be read.
	errs []walkErr
	// broken are the symbolic links to input files whose target is
	// missing or that loop: git keeps them, and they are part of the
	// repository as committed, not a fault of the machine reading it.
	broken []walkErr
	// ignored are input files the .gitignore files ignore, at most
	// maxIgnoredNamed of them: not read as input, but looked at for
	// whether they name keyhole's kinds (see gitIgnored).
	ignored []string
	// hidden are the files and directories whose names begin with a
	// dot, other than .git and what the .gitignore files ignore, at most
	// maxIgnoredNamed of them: not walked, but looked at for whether they
	// name keyhole's kinds (hiddenKeyhole).
	hidden []string
	// rendered are the directories keyhole render wrote (renderedDir),
	// not walked.
	rendered []string
	// outside are the symbolic links to input files whose target is
	// outside the root (confine.go), not followed; outsideGit says the
	// root is a git working tree's.
	outside    []string
	outsideGit bool
}

// walk lists the input files under root (absolute), with the Helm charts
// it skipped and the paths it could not read. filter, when set, says
// which paths it may read.
func walk(fsys fileSystem, root string, filter *pathFilter) walked {
	var (
		files    []string
		charts   []string
		rendered []string
		errs     []walkErr
		broken   []walkErr
		ignored  []string
		hidden   []string
	)
	var outside []string
	confine, confineGit := confinement(fsys, root)
	base, inherited := enclosingIgnores(fsys, root)
	// .gitignore says what git does not add, not what it holds: a file
	// git tracks is read whatever a .gitignore says, and so is a
	// directory that holds one.
	tracked := func(string) bool { return false }
	if confineGit {
		tracked = fsys.tracked(confine)
	}
	stopped := false // a commit too large to list (gitfs.ErrTreeTooLarge): said once
	var visit func(dir string, patterns []gitignore.Pattern)
	visit = func(dir string, patterns []gitignore.Pattern) {
		if stopped {
			return
		}
		domain := components(base, dir)
		if ps, err := readIgnoreFile(fsys, filepath.Join(dir, ".gitignore"), domain); err != nil {
			errs = append(errs, walkErr{filepath.Join(dir, ".gitignore"), err})
		} else if len(ps) > 0 {
			patterns = append(slices.Clip(patterns), ps...)
		}
		m := gitignore.NewMatcher(patterns)
		entries, err := fsys.ReadDir(dir)
		if err != nil {
			errs = append(errs, walkErr{dir, err})
			stopped = errors.Is(err, gitfs.ErrTreeTooLarge)
			return
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				// Not walked (.github, .devcontainer hold other tools'
				// YAML), but looked at for keyhole's kinds (hiddenKeyhole)
				// where git holds it.
				full := filepath.Join(dir, name)
				if name != ".git" && (e.IsDir() || inputExt(name)) && len(hidden) < maxIgnoredNamed &&
					!(m.Match(append(domain, name), e.IsDir()) && !tracked(full)) && !filter.excluded(full, e.IsDir()) {
					hidden = append(hidden, full)
				}
				continue
			}
			full := filepath.Join(dir, name)
			isDir, regular := e.IsDir(), e.Type().IsRegular()
			if m.Match(append(domain, name), isDir) && !tracked(full) {
				if regular && inputExt(name) && len(ignored) < maxIgnoredNamed && !filter.excluded(full, false) && filter.included(full, false) {
					ignored = append(ignored, full)
				}
				continue
			}
			if e.Type()&fs.ModeSymlink != 0 && inputExt(name) && linkOutside(fsys, confine, full) != "" {
				if !filter.excluded(full, false) && filter.included(full, false) {
					outside = append(outside, full)
				}
				continue
			}
			if e.Type()&fs.ModeSymlink != 0 {
				fi, err := fsys.Stat(full)
				switch {
				case err != nil && inputExt(name) && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP)):
					broken = append(broken, walkErr{full, err})
					continue
				case err != nil && inputExt(name):
					errs = append(errs, walkErr{full, err})
					continue
				case err != nil || fi.IsDir():
					continue // not followed: a link may lead back up the tree
				}
				regular = fi.Mode().IsRegular()
			}
			if filter.excluded(full, isDir) {
				continue
			}
			switch {
			case isDir && renderedDir(fsys, full):
				// keyhole render's own output, written from the
				// inputs this walk reads: read back, its objects
				// would be checked twice, and differently after each
				// render. Named, it is read.
				if filter.included(full, true) {
					rendered = append(rendered, full)
				}
			case isDir && kustomizationFile(fsys, full) != "":
				if filter.included(full, true) {
					files = append(files, full) // built, not walked: see kustomize.go
				}
			case isDir && helmChartFile(fsys, full) != "":
				// Templates are not YAML until helm renders them: the
				// chart is skipped whole, and said once.
				if filter.included(full, true) {
					charts = append(charts, helmChartFile(fsys, full))
				}
			case isDir:
				visit(full, patterns)
			case regular && inputExt(name):
				// Only regular files: opening a FIFO found by a walk
				// would block until someone writes to it.
				if filter.included(full, false) {
					files = append(files, full)
				}
			}
		}
	}
	visit(root, inherited)
	if stopped {
		// Part of a commit is no answer: nothing of it is read, and
		// the loader says why (tooLarge).
		return walked{errs: errs, outsideGit: confineGit}
	}
	bySlash := func(a, b string) int {
		return strings.Compare(filepath.ToSlash(a), filepath.ToSlash(b))
	}
	slices.SortFunc(files, bySlash)
	slices.SortFunc(charts, bySlash)
	slices.SortFunc(outside, bySlash)
	slices.SortFunc(ignored, bySlash)
	slices.SortFunc(hidden, bySlash)
	return walked{files: files, charts: charts, errs: errs, broken: broken, ignored: ignored, hidden: hidden, rendered: rendered, outside: outside, outsideGit: confineGit}
}

// renderedDir says whether dir (absolute) is a directory keyhole render
// wrote: it holds render's marker file, which render writes in no
// directory but its own (it refuses any other that is not empty).
func renderedDir(fsys fileSystem, dir string) bool {
	fi, err := fsys.Stat(filepath.Join(dir, renderMarker))
	return err == nil && fi.Mode().IsRegular()
}

// helmChartFile returns the Chart.yaml of dir (absolute) when dir is a
// Helm chart, else "".
func helmChartFile(fsys fileSystem, dir string) string {
	p := filepath.Join(dir, "Chart.yaml")
	if fi, err := fsys.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p
	}
	return ""
}

// components splits dir, relative to base, into path elements.
func components(base, dir string) []string {
	rel, err := filepath.Rel(base, dir)
	if err != nil || rel == "." {
		return nil
	}
	return strings.Split(filepath.ToSlash(rel), "/")
}

// enclosingIgnores finds the git working tree enclosing root (the nearest
// ancestor holding .git) and returns it with the patterns of the .gitignore
// files between it and root, so that a walk of a subdirectory ignores what
// git ignores. When those patterns would ignore root itself, which the
// user named explicitly, they are dropped. Without an enclosing working
// tree, root is its own base.
func enclosingIgnores(fsys fileSystem, root string) (string, []gitignore.Pattern) {
	base := ""
	for d := root; ; {
		if _, err := fsys.Lstat(filepath.Join(d, ".git")); err == nil {
			base = d
			break
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if base == "" || base == root {
		return root, nil
	}
	var patterns []gitignore.Pattern
	for d := base; d != root; {
		domain := components(base, d)
		ps, _ := readIgnoreFile(fsys, filepath.Join(d, ".gitignore"), domain) // an unreadable ancestor .gitignore is not the user's input
		patterns = append(patterns, ps...)
		rest := components(d, root)
		if len(rest) == 0 {
			break
		}
		d = filepath.Join(d, rest[0])
	}
	rootPath := components(base, root)
	for i := range rootPath {
		if gitignore.NewMatcher(patterns).Match(rootPath[:i+1], true) {
			return root, nil
		}
	}
	return base, patterns
}

// readIgnoreFile parses one .gitignore; a missing one has no patterns.
func readIgnoreFile(fsys fileSystem, path string, domain []string) ([]gitignore.Pattern, error) {
	data, err := fsys.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ps []gitignore.Pattern
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps, nil
}
