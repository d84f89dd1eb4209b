package source

import (
	"bytes"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
)

// keyhole's scope (docs/inputs.md): its findings are about its own objects
// and what they depend on. A file or kustomization found by walking a
// directory that cannot be read as objects, and that names none of
// keyhole's kinds, is some other tool's business: it is skipped with one
// InputSkipped note instead of an error. Named explicitly, it is still an
// error, since the user asked for it.

// keyholeMarkers are byte strings that only a file about keyhole's objects
// holds: the API group of its kinds, its Config's apiVersion and its
// annotation (not keyhole.dev/ alone, which a Go module path also holds).
var keyholeMarkers = [][]byte{[]byte("omnia.altairalabs.ai/"), []byte("keyhole.dev/v1"), []byte("keyhole.dev/ignore")}

// keyholeFileNames are the file names keyhole reads by name alone.
var keyholeFileNames = []string{"agent.yaml", "agent.yml", "keyhole.yaml", "keyhole.yml"}

// keyholeKind matches a kind field naming one of keyhole's kinds, in YAML
// or JSON, for a document that lost its apiVersion.
var keyholeKind = regexp.MustCompile(`(?m)(^|[{,\s])"?kind"?\s*:\s*["']?(` + strings.Join(kindStrings(schema.GroupKinds()), "|") + `)["']?\s*($|[,}#])`)

// namesKeyhole reports whether a file, by its name or its bytes, is about
// keyhole's objects: it is agent.yaml or keyhole.yaml, or it names an API
// group of keyhole's (omnia.altairalabs.ai/, keyhole.dev/), or a kind
// field names one of keyhole's kinds. A file in UTF-16 or UTF-32 is
// sniffed as its text.
func namesKeyhole(name string, data []byte) bool {
	base := path.Base(name)
	for _, n := range keyholeFileNames {
		if base == n {
			return true
		}
	}
	data = sniffText(data)
	for _, m := range keyholeMarkers {
		if bytes.Contains(data, m) {
			return true
		}
	}
	return kindField(data, keyholeKind, keyholeKindNames)
}

// keyholeKindNames are the kinds keyholeKind matches.
var keyholeKindNames = kindBytes(schema.GroupKinds())

// kindStrings are kinds as strings.
func kindStrings(kinds []schema.Kind) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = string(k)
	}
	return out
}

// kindBytes are kinds as byte strings.
func kindBytes(kinds []schema.Kind) [][]byte {
	out := make([][]byte, len(kinds))
	for i, k := range kinds {
		out[i] = []byte(k)
	}
	return out
}

// kindField reports whether re, an expression for a kind field whose
// value is one of names (keyholeKind, secretMarkers), matches data. It runs
// re only around each occurrence of a name: most files hold none, and
// over a large file (an operator's release manifest of a megabyte, whose
// prose says "Connection" or "Secret" somewhere) the expression scans a
// few megabytes a second, where a search for a word scans gigabytes.
func kindField(data []byte, re *regexp.Regexp, names [][]byte) bool {
	for _, n := range names {
		for off := 0; ; {
			i := bytes.Index(data[off:], n)
			if i < 0 {
				break
			}
			i += off
			if re.Match(kindWindow(data, i, i+len(n))) {
				return true
			}
			off = i + len(n)
		}
	}
	return false
}

// kindWindow is the part of data where a kind field whose value is
// data[i:j] can lie: from the start of the line where its key can begin
// (back over the blanks, quotes and colon between key and value, and the
// key itself) to the end of the value's line. Its ends are line ends, so
// ^ and $ match in it where they match in data, and a match of the
// expression there is one in data.
func kindWindow(data []byte, i, j int) []byte {
	s := i
	for s > 0 && strings.IndexByte(" \t\n\v\f\r\"':", data[s-1]) >= 0 {
		s--
	}
	s = max(0, s-len(`"kind`)-1) // the key, and the character before it
	s = bytes.LastIndexByte(data[:s], '\n') + 1
	e := len(data)
	if k := bytes.IndexByte(data[j:], '\n'); k >= 0 {
		e = j + k
	}
	return data[s:e]
}

// templateAction finds a template action: a Go template's {{ ... }} or a
// Jinja/Liquid {% ... %} or {# ... #}.
var templateAction = regexp.MustCompile(`\{\{-?\s*(.*?)\s*-?\}\}|\{%|\{#`)

// keyReference is what a Connection's inject value may hold between {{
// and }}: a reference to a Secret key, plain (.token) or by index (index .
// "tls.crt").
var keyReference = regexp.MustCompile(`^(\.[A-Za-z0-9_-]+|index \. "[^"]*")$`)

// templated reports whether data is a template rather than YAML: it holds
// a Jinja or Liquid tag, or a Go template action other than a plain key
// reference such as a Connection's {{ .token }}. Such a file is YAML only
// after the tool that owns it renders it (Helm, a docs generator).
func templated(data []byte) bool {
	for _, m := range templateAction.FindAllSubmatch(data, -1) {
		if len(m[1]) == 0 || !keyReference.Match(m[1]) {
			return true
		}
	}
	return false
}

// actionField is the first of a document's identifying fields
// (apiVersion, kind, metadata.name, metadata.namespace) whose value is a
// Go template action written bare, as {{.Name}}, which YAML reads as a
// mapping whose one key is a mapping: the document is a template's, whose
// tool fills those fields before anything applies it, whatever the action
// holds. A Connection's {{ .token }} is never there. A document of
// keyhole's own kinds is read anyway (keyholeAPI).
func actionField(n *yaml.Node) (string, *yaml.Node) {
	bare := func(v *yaml.Node) bool {
		return v != nil && v.Kind == yaml.MappingNode && v.Style&yaml.FlowStyle != 0 && len(v.Content) == 2 &&
			v.Content[0].Kind == yaml.MappingNode && v.Content[0].Style&yaml.FlowStyle != 0
	}
	for _, k := range []string{"apiVersion", "kind"} {
		if v := Lookup(n, k); bare(v) {
			return k, v
		}
	}
	if md := Lookup(n, "metadata"); md != nil && md.Kind == yaml.MappingNode {
		for _, k := range []string{"name", "namespace"} {
			if v := Lookup(md, k); bare(v) {
				return "metadata." + k, v
			}
		}
	}
	return "", nil
}

// keyholeAPI reports whether apiVersion is of keyhole's kinds: such a
// document is one keyhole checks however it is written, and a bare
// template action in it gets the schema's advice to quote it.
func keyholeAPI(apiVersion string) bool {
	return strings.HasPrefix(apiVersion, "omnia.altairalabs.ai/") || strings.HasPrefix(apiVersion, "keyhole.dev/")
}

// templateFieldMessage ends the error a walked document with a bare
// template action in an identifying field gets (actionField), which
// skipUnreadable reads as the file being a template.
const templateFieldMessage = "a template action written bare, which YAML reads as a mapping where a string must be"

// skipUnreadable decides the fate of a file found by a walk whose reading
// gave errors: when it is templated, or names none of keyhole's kinds, it
// is skipped, and the one InputSkipped note that says why replaces its
// documents and diagnostics. Otherwise they stand.
func skipUnreadable(file string, data []byte, docs []Document, ds diag.List) ([]Document, diag.List) {
	first := -1
	for i, d := range ds {
		if d.Severity == diag.Error {
			first = i
			break
		}
	}
	if first < 0 {
		return docs, ds
	}
	var why string
	switch {
	case data != nil && templated(data), ds[first].Code == CodeInputInvalid && strings.HasSuffix(ds[first].Message, templateFieldMessage):
		why = "it is a template (Go template, Jinja or Liquid), YAML only once the tool that owns it renders it"
	case !namesKeyhole(file, data):
		why = "it names none of keyhole's kinds"
	default:
		return docs, ds
	}
	e := ds[first]
	return nil, diag.List{skipped(e.Pos, fmt.Sprintf("not read as objects: %s (%s: %s); skipped (name the file explicitly to check it)", why, e.Code, firstClause(e.Message)))}
}

// linkUnreadable begins the note of a symbolic link a walk could not
// follow (see Unread).
const linkUnreadable = "symbolic link that leads nowhere readable"

// Unread returns the files of ds (the loader's diagnostics) a walk could
// not read at all, in order: symbolic links that lead nowhere. Whatever
// they were meant to hold is not in the input, so a message about
// something missing names them as where it may be.
func Unread(ds diag.List) []string {
	var files []string
	for _, d := range ds {
		if d.Code == CodeInputSkipped && strings.HasPrefix(d.Message, linkUnreadable) {
			files = append(files, d.Pos.File)
		}
	}
	return files
}

// skipped is an InputSkipped note.
func skipped(pos diag.Pos, msg string) diag.Diagnostic {
	return diag.Diagnostic{Code: CodeInputSkipped, Severity: diag.Info, Pos: pos, Message: msg}
}

// firstClause is a loader message up to its first semicolon: what is
// wrong, without the advice that follows, which a skipped file does not
// need.
func firstClause(msg string) string {
	if i := bytes.IndexByte([]byte(msg), ';'); i > 0 {
		return msg[:i]
	}
	return msg
}

// kustomizationNamesKeyhole reports whether any local file of the
// kustomization in dir (absolute) names keyhole's kinds: the files under
// dir, and those under every local path its kustomization files name
// (resources, components, patches, generators), followed through bases.
// It reads each file at most once, and only up to the size limit; it runs
// only when a build that a walk found has failed.
func (l *loader) kustomizationNamesKeyhole(dir string) bool {
	return l.kustomizationHolds(dir, namesKeyhole)
}

// secretMarkers are what a kustomization that makes a Secret holds: a
// Connection in another deploy unit may read it (see docs/inputs.md).
var secretMarkers = regexp.MustCompile(`(?m)(^|[{,\s])"?kind"?\s*:\s*["']?(Secret|SealedSecret|ExternalSecret|ClusterExternalSecret)["']?\s*($|[,}#])|secretGenerator`)

// declaresSecret reports whether data declares a Secret (secretMarkers),
// looking for the words first, as namesKeyhole does.
func declaresSecret(data []byte) bool {
	data = sniffText(data)
	return bytes.Contains(data, []byte("secretGenerator")) || kindField(data, secretMarkers, secretKindNames)
}

// secretKindNames are the kinds secretMarkers matches.
var secretKindNames = [][]byte{[]byte("Secret"), []byte("SealedSecret"), []byte("ExternalSecret"), []byte("ClusterExternalSecret")}

// kustomizationMatters reports whether a kustomization a walk found is
// worth building: one of its local files names keyhole's kinds, or
// declares a Secret (or a stand-in, or generates one) that a Connection
// may read. Others hold nothing keyhole checks, and building them would
// only cost kustomize's time.
func (l *loader) kustomizationMatters(dir string) bool {
	return l.kustomizationHolds(dir, func(name string, data []byte) bool {
		return namesKeyhole(name, data) || (l.connections && declaresSecret(data))
	})
}

// engineComponents are the components a GitOps engine adds to the unit
// u's kustomization: Flux's spec.components, an Argo CD source's
// kustomize.components; relative to its path.
func engineComponents(u *Unit) []string {
	switch {
	case u.Flux != nil:
		comps, _, _ := unstructured.NestedStringSlice(u.Flux.Object.Object, "spec", "components")
		return comps
	case u.Argo != nil:
		return stringList(Lookup(u.Argo.Kustomize, "components"))
	}
	return nil
}

// engineUnitMatters is kustomizationMatters for a GitOps engine's unit:
// its path, and the components its engine adds to the path's
// kustomization (Flux's spec.components, an Argo CD source's
// kustomize.components), which may hold what the path does not. A
// component outside the repository, or fetched, is not read, as a remote
// base is not.
func (l *loader) engineUnitMatters(u *Unit) bool {
	if l.opts.AllUnits || l.kustomizationMatters(u.Root) {
		return true
	}
	root := l.sourceRoot(u.Root)
	for _, c := range engineComponents(u) {
		dir := filepath.Join(u.Root, filepath.FromSlash(c))
		if c != "" && !path.IsAbs(c) && !strings.Contains(c, "://") && within(root, dir) && l.kustomizationMatters(dir) {
			return true
		}
	}
	return false
}

// mayHoldConnections reports whether anything paths name, or a walk of
// them finds, names keyhole's kinds: a file, or a local file of a
// kustomization. A Secret is checked only for a Connection that reads it
// (docs/inputs.md), so when none can, a kustomization found by a walk
// that only declares Secrets is not built. In a cluster's repository that
// holds nothing of keyhole's yet, building those is most of the work.
// Standard input, which cannot be read twice, counts as naming them. The
// same pass gathers refs, the text the names of the Secrets a Connection
// reads are in (secretscope.go): a kustomization's files as read, the
// files that name keyhole's kinds by path, read again only if a
// kustomization asks (refText.read). The walks made here are kept for
// loadPath.
func (l *loader) mayHoldConnections(paths []string) (found bool, refs refText) {
	l.walks = map[string]walked{}
	add := func(data []byte) {
		if bytes.Contains(data, []byte("${")) {
			refs.all = true // a Flux substitution can write a name from anywhere
		}
		refs.text = append(append(refs.text, data...), 0)
	}
	file := func(p string) {
		fi, err := l.fsys.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > l.opts.MaxFileSize {
			// What cannot be read names nothing; loadPath says why (and
			// a file over the limit that names keyhole's kinds fails
			// the check whatever is built).
			return
		}
		if root, git := confinement(l.fsys, filepath.Dir(p)); git && linkOutside(l.fsys, root, p) != "" {
			return // never read: loadPath says where the link is
		}
		if data, err := l.fsys.ReadFile(p); err == nil && namesKeyhole(p, data) {
			found = true
			if bytes.Contains(data, []byte("${")) {
				refs.all = true
			}
			refs.files = append(refs.files, p)
		}
	}
	// A kustomization that names keyhole's kinds gives all its local
	// files: a patch among them may set a Connection's secretRef. Each is
	// read once: the files read up to the first that names keyhole's
	// kinds are kept, and only the others are read again.
	kustomization := func(dir string) {
		var read [][]byte
		seen := map[string]bool{}
		if !l.kustomizationHolds(dir, func(p string, data []byte) bool {
			seen[p] = true
			read = append(read, data)
			return namesKeyhole(p, data)
		}) {
			return
		}
		found = true
		for _, data := range read {
			add(data)
		}
		l.kustomizationVisit(dir, seen, func(_ string, data []byte) bool {
			add(data)
			return false
		})
	}
	// A Helm chart's templates can write any name from its values: one
	// that names keyhole's kinds makes every Secret a candidate, unless
	// its files give only plain names (chartNamesPlain).
	// Where its files give only plain names, those names, and its
	// values', are in their text.
	chart := func(dir string) {
		if !l.chartNamesKeyhole(dir) {
			return
		}
		found = true
		if !l.chartNamesPlain(dir) {
			refs.all = true
			return
		}
		l.chartHolds(dir, func(_ string, data []byte) bool {
			add(data)
			return false
		})
	}
	for _, p := range paths {
		if p == "-" {
			found, refs.all = true, true
			continue
		}
		abs := l.osPath(p)
		fi, err := l.fsys.Stat(abs)
		switch {
		case err != nil:
		case !fi.IsDir():
			if isKustomizationName(filepath.Base(abs)) && kustomizationFile(l.fsys, filepath.Dir(abs)) == abs {
				kustomization(filepath.Dir(abs))
			} else {
				file(abs)
			}
		case kustomizationFile(l.fsys, abs) != "":
			kustomization(abs)
		case helmChartFile(l.fsys, abs) != "":
			chart(abs)
		default:
			w := walk(l.fsys, abs, &l.paths)
			l.walks[abs] = w
			for _, f := range kustomizeRoots(l.fsys, w.files) {
				if kustomizationFile(l.fsys, f) != "" {
					kustomization(f)
				} else {
					file(f)
				}
			}
			for _, c := range w.charts {
				chart(filepath.Dir(c))
			}
		}
	}
	if !found {
		refs = refText{}
	}
	return found, refs
}

// kustomizationHolds reports whether a local file of the kustomization in
// dir satisfies holds; see kustomizationNamesKeyhole.
func (l *loader) kustomizationHolds(dir string, holds func(name string, data []byte) bool) bool {
	return l.kustomizationVisit(dir, nil, holds)
}

// kustomizationVisit is kustomizationHolds that does not read the files
// in skip (it still follows a kustomization file's local paths).
//
// Every file under dir is visited, those of subdirectories the build does
// not include too, and each kustomization file's local paths followed: a
// cheap bound on what the build may read. A path outside the repository,
// or a link out of dir's confinement, counts as holding (the build says
// where it is) only where the build reads it: named by a kustomization the
// build includes, through dir's own kustomization's local paths; one that
// only a stray kustomization of a subdirectory names is none of the
// build's.
func (l *loader) kustomizationVisit(dir string, skip map[string]bool, holds func(name string, data []byte) bool) bool {
	const (
		listed     = 1 // under dir, or under a path a kustomization names
		referenced = 2 // read by the build: dir's kustomization, and what it names
	)
	seen := map[string]int{}
	confine, _ := confinement(l.fsys, dir)
	root := l.buildRoot(dir)
	var visit func(p string, how int) bool
	visit = func(p string, how int) bool {
		p = filepath.Clean(p)
		before := seen[p]
		if before >= how || len(seen) > maxScopeFiles {
			return false
		}
		seen[p] = how
		outside, real := l.scopeMemo.resolve(l.fsys, confine, p)
		if outside || !inRepo(root, p) {
			// Not read: its build says where the link is, or that the
			// path is outside the repository.
			return how == referenced
		}
		if real != "" && real != p {
			// Read once, where its links land: a link back up the tree
			// (a -> .) names the same directory under ever longer
			// paths, two such links 2^40 of them.
			if seen[real] >= how {
				return false
			}
			seen[real] = how
		}
		fi, err := l.fsys.Stat(p)
		if err != nil {
			return false
		}
		if !fi.IsDir() {
			if !fi.Mode().IsRegular() {
				return false
			}
			if before == 0 && !skip[p] {
				if fi.Size() > l.opts.MaxFileSize {
					return largeFileHolds(l.fsys, p, l.opts.MaxFileSize, holds)
				}
				data, err := l.fsys.ReadFile(p)
				if err != nil {
					return false
				}
				if holds(p, data) {
					return true
				}
			}
			if isKustomizationName(filepath.Base(p)) {
				for _, ref := range l.scopeMemo.localPaths(l.fsys, p) {
					if visit(filepath.Join(filepath.Dir(p), filepath.FromSlash(ref)), how) {
						return true
					}
				}
			}
			return false
		}
		entries, err := l.fsys.ReadDir(p)
		if err != nil {
			return false
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			h := listed
			if how == referenced && isKustomizationName(e.Name()) {
				h = referenced
			}
			if visit(filepath.Join(p, e.Name()), h) {
				return true
			}
		}
		return false
	}
	return visit(dir, referenced)
}

// scopeMemo keeps, for the scope questions asked before anything is
// built (several per kustomization, over bases they share), what does
// not change between them: each kustomization file's local paths and
// whether a path leads through a link out of its confinement.
type scopeMemo struct {
	mu      sync.Mutex
	paths   map[string][]string
	outside map[[2]string]resolved
}

func (m *scopeMemo) localPaths(fsys fileSystem, kfile string) []string {
	m.mu.Lock()
	refs, ok := m.paths[kfile]
	m.mu.Unlock()
	if ok {
		return refs
	}
	refs = localPaths(kustomizationNode(fsys, kfile))
	m.mu.Lock()
	if m.paths == nil {
		m.paths = map[string][]string{}
	}
	m.paths[kfile] = refs
	m.mu.Unlock()
	return refs
}

// resolve is resolveLinks(fsys, root, p): whether a link on the way
// leads outside root, and else where p lands ("" when it cannot be
// resolved).
func (m *scopeMemo) resolve(fsys fileSystem, root, p string) (outside bool, real string) {
	k := [2]string{root, p}
	m.mu.Lock()
	r, ok := m.outside[k]
	m.mu.Unlock()
	if ok {
		return r.outside, r.real
	}
	link, real := resolveLinks(fsys, root, p)
	r = resolved{outside: link != "", real: real}
	m.mu.Lock()
	if m.outside == nil {
		m.outside = map[[2]string]resolved{}
	}
	m.outside[k] = r
	m.mu.Unlock()
	return r.outside, r.real
}

// resolved is one answer of scopeMemo.resolve.
type resolved struct {
	outside bool
	real    string
}

// maxScopeFiles bounds the files and directories one scope question
// reads: a kustomization that reaches more is taken to name none.
const maxScopeFiles = 20000

// localPaths returns every string scalar of a kustomization that could
// name a local file or directory: the loader tries each, and those that
// do not exist cost a stat.
func localPaths(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	var out []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.ScalarNode:
			v := n.Value
			if v != "" && len(v) < 4096 && !strings.ContainsAny(v, "\n:") {
				out = append(out, v)
			}
		default:
			for _, c := range n.Content {
				walk(c)
			}
		}
	}
	walk(n)
	return out
}
