package source

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/kustbuild"
)

// A Helm chart in the repository is rendered as `helm template` renders
// it, by the Helm engine (source/helm, with Helm's own packages):
// with the values an Argo CD Application gives it, or with its own
// defaults when the walk found it and no engine object deploys it. What
// it renders is one deploy unit. See docs/inputs.md, "Helm charts".

// UnitHelm is a Helm chart a walk found that no engine object deploys,
// rendered with its default values.
const UnitHelm UnitSource = "helm"

// HelmOverlay is what a chart is rendered with: the arguments `helm
// template` is given by whoever deploys it.
type HelmOverlay struct {
	// ReleaseName is .Release.Name ("release-name" for `helm template`).
	ReleaseName string
	// Namespace is .Release.Namespace.
	Namespace string
	// ValueFiles are read in order, after the chart's values.yaml
	// (absolute, OS form), as --values.
	ValueFiles []string
	// Values is YAML merged after the files (an Argo CD Application's
	// values or valuesObject).
	Values []byte
	// Set and SetString are --set and --set-string, in order.
	Set, SetString []string
	// SetFile is --set-file: name=path (absolute, OS form), the value
	// being the file's contents.
	SetFile []string
	// KubeVersion is .Capabilities.KubeVersion; "" for Helm's default.
	KubeVersion string
	// APIVersions are added to .Capabilities.APIVersions.
	APIVersions []string
	// SkipCRDs leaves out the chart's crds/ directory.
	SkipCRDs bool
	// SkipTests leaves out the chart's test hooks.
	SkipTests bool
	// ChartValues, when not nil, replace the chart's values.yaml: the
	// files merged in order (absolute, OS form), as a Flux HelmChart's
	// valuesFiles do.
	ChartValues []string
	// From are values merged after the value files and before Values,
	// in order (a Flux HelmRelease's valuesFrom).
	From []HelmValuesFrom
	// Without, when set, names what the engine would give the chart and
	// keyhole does not (a Secret's values): said in a warning.
	Without string
	// Invalid, when set, is why the engine would refuse to render the
	// chart with these arguments (a value file that is not there).
	Invalid string
}

// HelmValuesFrom is one value source: YAML merged at the top, or a
// single value set at TargetPath (Helm's dotted path).
type HelmValuesFrom struct {
	Value      string
	TargetPath string
}

// chartMatters reports whether a file of the chart in dir names keyhole's
// kinds, or, when a Connection may read it, declares a Secret.
func (l *loader) chartMatters(dir string) bool {
	return l.chartHolds(dir, func(name string, data []byte) bool {
		return namesKeyhole(name, data) || l.connections && declaresSecret(data)
	})
}

// chartNamesKeyhole reports whether a file of the chart in dir names
// keyhole's kinds.
func (l *loader) chartNamesKeyhole(dir string) bool {
	return l.chartHolds(dir, namesKeyhole)
}

// chartHolds reports whether a file under the chart in dir satisfies
// holds: its templates, values and subcharts alike.
func (l *loader) chartHolds(dir string, holds func(name string, data []byte) bool) bool {
	if l.chartHoldsHere(dir, holds) {
		return true
	}
	// The directories of this repository its dependencies are copied
	// from (Helm.LocalDependencies) are its subcharts once rendered.
	return slices.ContainsFunc(l.helmLocalDependencies(dir), func(d string) bool { return l.chartHoldsHere(d, holds) })
}

// helmLocalDependencies are the directories of this repository the chart
// in dir lists as its dependencies (Helm.LocalDependencies).
func (l *loader) helmLocalDependencies(dir string) []string {
	if l.opts.Engines.Helm == nil {
		return nil
	}
	return l.opts.Engines.Helm.LocalDependencies(Host{l}, dir)
}

// chartHoldsHere is chartHolds of the files under dir alone.
func (l *loader) chartHoldsHere(dir string, holds func(name string, data []byte) bool) bool {
	found := false
	n := 0
	l.visitTree(dir, func(rel string, fi fs.FileInfo) bool {
		if found || n > maxScopeFiles {
			return false
		}
		n++
		if fi.IsDir() {
			return true
		}
		data := l.sniff(filepath.Join(dir, filepath.FromSlash(rel)), nil)
		if data != nil && holds(rel, data) {
			found = true
		}
		return false
	})
	return found
}

// renderedFile is one template's output (or one CRD file), named by its
// path on disk (absolute, OS form) where it has one.
type renderedFile struct {
	abs  string
	data []byte
	// lines are where the template wrote each line of data
	// (RenderedFile.Lines).
	lines []TemplateLine
}

// helmRun is what rendering one chart gave.
type helmRun struct {
	files []renderedFile
	// read is every file the chart's load read, by absolute path.
	read map[string][]byte
	// missing names the dependencies Chart.yaml lists that the chart's
	// charts/ directory does not hold: rendered without them.
	missing []string
	// values are the string values the chart was given, which a message
	// about it must not quote.
	values []string
	err    error
}

// renderHelm renders the chart in dir (absolute) with o, as the Helm
// engine Load was given renders it.
func (l *loader) renderHelm(dir string, o *HelmOverlay) helmRun {
	if l.opts.Engines.Helm == nil {
		return helmRun{err: errNoHelm}
	}
	r := l.opts.Engines.Helm.Render(Host{l}, dir, o)
	run := helmRun{read: r.Read, missing: r.Missing, values: r.Values, err: r.Err}
	for _, f := range r.Files {
		run.files = append(run.files, renderedFile{abs: f.Abs, data: f.Data, lines: f.Lines})
	}
	return run
}

// The diagnostics of rendering Helm charts.
const (
	// CodeHelmRenderFailed is reported when a chart keyhole renders
	// cannot be rendered as `helm template` renders it.
	CodeHelmRenderFailed = "HelmRenderFailed"
	// CodeHelmDependencyMissing is reported when a chart's Chart.yaml
	// lists a dependency its charts/ directory does not hold.
	CodeHelmDependencyMissing = "HelmDependencyMissing"
	// CodeHelmValuesUnread is reported when an engine gives a chart
	// values keyhole does not read (a Secret's), or post-renders it.
	CodeHelmValuesUnread = "HelmValuesUnread"
)

// takeHelm takes what rendering the chart of unit u gave (run), the
// chart's directory reported as named: its documents, or why there are
// none. with says whose values rendered it, for messages.
func (l *loader) takeHelm(u *Unit, named string, run *helmRun, with string) {
	d0 := len(l.diags)
	defer func() {
		for i := d0; i < len(l.diags); i++ {
			l.diags[i].Units = []string{u.Name}
		}
	}()
	chartPos := diag.Pos{File: l.under(named, u.Root, filepath.Join(u.Root, "Chart.yaml")), Line: 1, Column: 1}
	if len(run.missing) > 0 {
		l.diags = append(l.diags, diag.Diagnostic{
			Code:     CodeHelmDependencyMissing,
			Severity: diag.Warning,
			Pos:      chartPos,
			Message: fmt.Sprintf("Chart.yaml lists %s, which charts/ does not hold: an engine fetches %s (helm dependency build) and keyhole fetches nothing, so the chart is rendered without %s and what %s would deploy is not checked; run helm dependency build and commit charts/ to have it checked",
				quoteList(run.missing), them(run.missing), them(run.missing), them(run.missing)),
		})
	}
	if u.Helm.Without != "" {
		l.diags = append(l.diags, diag.Diagnostic{
			Code:     CodeHelmValuesUnread,
			Severity: diag.Warning,
			Pos:      u.Decl,
			Message:  "the chart is rendered without " + u.Helm.Without + ": what they would change is not checked",
		})
	}
	if run.err != nil {
		msg := run.message()
		l.diags = append(l.diags, diag.Diagnostic{
			Code:     CodeHelmRenderFailed,
			Severity: diag.Error,
			Pos:      chartPos,
			Message:  "Helm cannot render this chart " + with + ": " + msg + "; keyhole checks what it renders, so nothing of it is checked",
		})
		l.failedUnit(u, len(l.diags)-1, chartPos, "Helm cannot render its chart "+with+" ("+msg+")")
		return
	}
	shared := &sharedFrom{unit: u, walked: true}
	for _, f := range run.files {
		name := l.under(named, u.Root, f.abs)
		from := shared
		if f.lines != nil {
			// Placed at the template's lines (Document.Where).
			from = &sharedFrom{unit: u, walked: true, lines: f.lines}
		}
		// Not through the memo: documents of one rendered text belong to
		// each unit that renders it, and the memo's carry the first's.
		docs, diags := parse(name, f.data, true, func(d *Document) {
			d.from = from
			d.Pos = templatePos(from.lines, d.File, d.Pos.Line, d.Pos.Column)
			l.digest(d)
		})
		for i := range docs {
			l.docs = append(l.docs, &docs[i])
		}
		for i := range diags {
			if p := &diags[i].Pos; p.File == name && from.lines != nil {
				*p = templatePos(from.lines, name, p.Line, p.Column)
			}
		}
		l.diags = append(l.diags, diags...)
	}
}

// atTemplateLines places d, a document of a template's output that lines
// map back to the template (nil: as written), at the template's lines:
// its Pos and each node's line and column, so that what an engine reads
// of it (an app of apps' Applications, read from their nodes as from a
// file's) is said at the template's line, each pass of a range block at
// the block's lines.
func atTemplateLines(d *Document, lines []TemplateLine) {
	if lines == nil {
		return
	}
	d.Pos = templatePos(lines, d.File, d.Pos.Line, d.Pos.Column)
	placed := map[*yaml.Node]bool{} // a node resolved aliases share is placed once
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n == nil || placed[n] {
			return
		}
		placed[n] = true
		p := templatePos(lines, d.File, n.Line, n.Column)
		n.Line, n.Column = p.Line, p.Column
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(d.Node)
}

// them is "it" or "them", for names.
func them(names []string) string {
	if len(names) == 1 {
		return "it"
	}
	return "them"
}

// quoteList is names quoted and joined: "a", "a and b", "a, b and c".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// prepareHelm readies the rendering of the chart of unit u, deployed by
// what (an engine object, named for messages), or says why there is
// nothing to render.
func (l *loader) prepareHelm(u *Unit) engineJob {
	what := "Argo CD Application " + strings.TrimPrefix(u.Name, "argocd:")
	if u.Source == UnitHelmRelease {
		what = "Flux HelmRelease " + strings.TrimPrefix(u.Name, "helmrelease:")
	}
	j := engineJob{u: u, named: l.unitName(u), with: "with the values " + what + " gives it"}
	if !l.chartMatters(u.Root) {
		j.note = skipped(u.Decl, what+" not rendered: nothing in its Helm chart names keyhole's kinds or declares a Secret")
		return j
	}
	// A HelmRelease's postRenderers may rename what its chart declares;
	// Argo CD renders a Helm source with Helm alone.
	if u.Source != UnitHelmRelease && !l.chartNamesKeyhole(u.Root) {
		if note := l.chartUnread(u.Root); note != "" {
			j.note = skipped(u.Decl, what+" not rendered: "+note)
			return j
		}
	}
	j.build = true
	return j
}

// walkedChart renders the chart in dir (absolute), reported as named,
// that no engine object deploys, with its default values as `helm
// template` renders it, when it may hold something of keyhole's; walked
// says a walk found it rather than the user naming it.
func (l *loader) walkedChart(named, dir string, walked bool) {
	if l.seen[dir] {
		return
	}
	l.seen[dir] = true
	pos := diag.Pos{File: l.under(named, dir, filepath.Join(dir, "Chart.yaml")), Line: 1, Column: 1}
	if walked && !l.chartMatters(dir) {
		msg := "Helm chart not rendered: none of its files names keyhole's kinds or declares a Secret; skipped (name it explicitly to check it)"
		if l.engineCharts[dir] {
			msg = "Helm chart rendered only for the GitOps engine objects its templates declare: none of its files names keyhole's kinds or declares a Secret; skipped (name it explicitly to check it)"
		}
		l.diags = append(l.diags, skipped(pos, msg))
		return
	}
	if walked && !l.engineCharts[dir] && !l.chartNamesKeyhole(dir) {
		if note := l.chartUnread(dir); note != "" {
			l.diags = append(l.diags, skipped(pos, "Helm chart not rendered: "+note+"; skipped (name it explicitly to check it)"))
			return
		}
	}
	u := &Unit{ID: "helm:" + named, Name: dirUnitName(named), Dir: outputDir(named), Source: UnitHelm, Root: dir, Decl: pos,
		Helm: &HelmOverlay{ReleaseName: "release-name", Namespace: "default"}}
	run := l.renderHelm(dir, u.Helm)
	l.takeHelm(u, named, &run, "with its default values (as helm template does, no engine object deploying it)")
}

// message is why the chart did not render, holding none of the values
// it was given.
func (run *helmRun) message() string {
	msg := kustbuild.Redact(run.err.Error(), run.read)
	msg = kustbuild.Redact(msg, map[string][]byte{"values": []byte(strings.Join(run.values, "\n"))})
	return strings.Join(strings.Fields(msg), " ") // a schema's findings come one per line
}

// declaresEngineObjects reports whether data may declare a Flux
// Kustomization or an Argo CD Application or ApplicationSet: the group
// and a kind field naming one (an annotation such as
// argocd.argoproj.io/sync-wave names the group alone).
func declaresEngineObjects(_ string, data []byte) bool {
	return (bytes.Contains(data, []byte(fluxGroup)) || bytes.Contains(data, []byte(argoGroup))) &&
		kindField(data, engineKind, engineKindNames)
}

// engineKind matches a kind field naming an engine object's kind.
var engineKind = regexp.MustCompile(`(?m)(^|[{,\s])"?kind"?\s*:\s*["']?(Application|ApplicationSet|Kustomization)["']?\s*($|[,}#])`)

// engineKindNames are the kinds engineKind matches.
var engineKindNames = [][]byte{[]byte("Application"), []byte("Kustomization")}
