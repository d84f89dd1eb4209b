package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	depsutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/ignore"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"helm.sh/helm/v4/pkg/strvals"
	"sigs.k8s.io/yaml"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/kustbuild"
)

// A Helm chart in the repository is rendered as `helm template` renders
// it, with Helm's own packages (loader, values, engine, manifest sorter):
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

// helmRenderTimeout bounds one chart's rendering: a template can loop
// for as long as its values say, and a CI gate must not hang on it.
var helmRenderTimeout = time.Minute

// helmMaxFiles bounds how many files one chart's load reads.
const helmMaxFiles = 10000

// renderedFile is one template's output (or one CRD file), named by its
// path on disk (absolute, OS form) where it has one.
type renderedFile struct {
	abs  string
	data []byte
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

// renderHelm renders the chart in dir (absolute) with o.
func (l *loader) renderHelm(dir string, o *HelmOverlay) helmRun {
	var run helmRun
	if o.Invalid != "" {
		run.err = errors.New(o.Invalid)
		return run
	}
	files, read, err := l.chartFiles(dir)
	run.read = read
	if err != nil {
		run.err = err
		return run
	}
	ch, err := chartloader.LoadFiles(files)
	if err == nil && ch.Metadata != nil && l.withLocalDependencies(dir, ch, &files, read) {
		ch, err = chartloader.LoadFiles(files)
	}
	if err != nil {
		run.err = err
		return run
	}
	if ch.Metadata == nil {
		run.err = errors.New("its Chart.yaml is empty")
		return run
	}
	run.missing = dropMissingDependencies(ch)
	var cvals map[string]any
	if o.ChartValues != nil {
		cvals, err = l.mergeValueFiles(dir, o.ChartValues, run.read)
		if err != nil {
			run.err = err
			return run
		}
		ch.Values = cvals
	}
	vals, err := l.helmValues(dir, o, run.read)
	run.values = secretCandidates(ch, append(valueStrings(ch, vals), o.givenStrings()...))
	if err != nil {
		run.err = err
		return run
	}
	rendered, err := renderApart(files, cvals, vals, o)
	if err != nil {
		run.err = err
		return run
	}
	chartDir := func(name string) string {
		// A rendered file is named chart/templates/x.yaml, or
		// chart/charts/sub/templates/x.yaml for a subchart: where it
		// stands under dir.
		_, rest, _ := strings.Cut(name, "/")
		return filepath.Join(dir, filepath.FromSlash(rest))
	}
	if !o.SkipCRDs {
		for _, crd := range ch.CRDObjects() {
			run.files = append(run.files, renderedFile{abs: chartDir(filepath.ToSlash(crd.Filename)), data: crd.File.Data})
		}
	}
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.TrimSpace(rendered[name]) != "" {
			run.files = append(run.files, renderedFile{abs: chartDir(name), data: []byte(rendered[name])})
		}
	}
	return run
}

// renderChart is what `helm template` does between loading the chart
// and printing it (Helm's action.Install in client-only mode and
// renderResources): dependencies enabled by the values, the values
// coalesced and checked against the chart's schema, the templates
// rendered, NOTES.txt set aside, and the output sorted into manifests
// and hooks, which fails on YAML that is not objects. It returns the
// rendered templates by name.
func renderChart(ch *chart.Chart, vals map[string]any, o *HelmOverlay) (map[string]string, error) {
	if err := depsutil.ProcessDependencies(ch, vals); err != nil {
		return nil, fmt.Errorf("chart dependencies processing failed: %w", err)
	}
	caps := common.DefaultCapabilities.Copy()
	if o.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(o.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("invalid kube version %q: %w", o.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	caps.APIVersions = append(caps.APIVersions, o.APIVersions...)
	if ch.Metadata.KubeVersion != "" && !depsutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, caps.KubeVersion.Version)
	}
	opts := common.ReleaseOptions{Name: o.ReleaseName, Namespace: o.Namespace, Revision: 1, IsInstall: true}
	// A schema may refer to others by URL, which Helm would fetch:
	// keyhole reads nothing from the network, so such a chart's values
	// are not checked against its schema.
	skipSchema := remoteSchema(ch)
	render, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, skipSchema)
	if err != nil {
		return nil, err
	}
	var e engine.Engine
	files, err := e.RenderWithContext(context.Background(), ch, render)
	if err != nil {
		return nil, err
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, _, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	if o.SkipTests {
		// What `helm template --skip-tests` leaves out: documents whose
		// hook is a test, which are all of their template's hooks.
		for _, h := range hooks {
			for _, ev := range h.Events {
				if ev == "test" {
					delete(files, h.Path)
				}
			}
		}
	}
	return files, nil
}

// remoteSchema reports whether a values schema of ch or its subcharts
// refers to another by URL.
func remoteSchema(ch *chart.Chart) bool {
	if bytes.Contains(ch.Schema, []byte("http://")) || bytes.Contains(ch.Schema, []byte("https://")) {
		return true
	}
	return slices.ContainsFunc(ch.Dependencies(), remoteSchema)
}

// dropMissingDependencies removes from ch's Chart.yaml the dependencies
// its charts/ directory does not hold, and returns their names: Argo CD
// would fetch them (helm dependency build), keyhole fetches nothing, and
// the chart's own templates still render without them.
func dropMissingDependencies(ch *chart.Chart) []string {
	var missing []string
	ch.Metadata.Dependencies = slices.DeleteFunc(ch.Metadata.Dependencies, func(d *chart.Dependency) bool {
		if d == nil {
			return true
		}
		if slices.ContainsFunc(ch.Dependencies(), func(c *chart.Chart) bool { return c.Name() == d.Name }) {
			return false
		}
		missing = append(missing, d.Name)
		return true
	})
	return missing
}

// helmValues merges what o gives a chart, as `helm template` merges its
// --values, --set and --set-string (Helm's values.Options.MergeValues):
// each file over the last, then the inline values, then each --set.
// The files it reads go into read.
func (l *loader) helmValues(dir string, o *HelmOverlay, read map[string][]byte) (map[string]any, error) {
	base, err := l.mergeValueFiles(dir, o.ValueFiles, read)
	if err != nil {
		return nil, err
	}
	for i, f := range o.From {
		if f.TargetPath != "" {
			if err := strvals.ParseInto(f.TargetPath+"="+f.Value, base); err != nil {
				return nil, fmt.Errorf("values source %d, at %s: %w", i+1, f.TargetPath, err)
			}
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(f.Value), &m); err != nil {
			return nil, fmt.Errorf("values source %d: %w", i+1, err)
		}
		base = chartloader.MergeMaps(base, m)
	}
	if len(o.Values) > 0 {
		var m map[string]any
		if err := yaml.Unmarshal(o.Values, &m); err != nil {
			return nil, fmt.Errorf("inline values: %w", err)
		}
		base = chartloader.MergeMaps(base, m)
	}
	for _, s := range o.Set {
		if err := strvals.ParseInto(s, base); err != nil {
			return nil, fmt.Errorf("parameter %s: %w", paramName(s), err)
		}
	}
	for _, s := range o.SetString {
		if err := strvals.ParseIntoString(s, base); err != nil {
			return nil, fmt.Errorf("parameter %s: %w", paramName(s), err)
		}
	}
	for _, s := range o.SetFile {
		err := strvals.ParseIntoFile(s, base, func(rs []rune) (any, error) {
			file := string(rs)
			if l.outsideRepo(dir, file) {
				return nil, ErrOutsideRepo
			}
			data, err := l.fsys.ReadFile(file)
			if err != nil {
				return nil, pathless(err)
			}
			read[file] = data
			return string(data), nil
		})
		if err != nil {
			return nil, fmt.Errorf("file parameter %s: %w", paramName(s), err)
		}
	}
	return base, nil
}

// mergeValueFiles merges the YAML files (absolute, OS form) in order,
// each over the last; what it reads goes into read.
func (l *loader) mergeValueFiles(dir string, files []string, read map[string][]byte) (map[string]any, error) {
	base := map[string]any{}
	for _, f := range files {
		if l.outsideRepo(dir, f) {
			return nil, fmt.Errorf("reading values file %s: %w", filepath.Base(f), ErrOutsideRepo)
		}
		data, err := l.fsys.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading values file %s: %w", filepath.Base(f), pathless(err))
		}
		read[f] = data
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("values file %s: %w", filepath.Base(f), err)
		}
		base = chartloader.MergeMaps(base, m)
	}
	return base, nil
}

// paramName is the name of a name=value parameter: its value may be a
// secret, so messages name the parameter only.
func paramName(s string) string {
	name, _, _ := strings.Cut(s, "=")
	return name
}

// pathless is err without the path a file system error carries.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// chartFiles reads the chart in dir as Helm's directory loader does
// (.helmignore and its defaults apply, a byte order mark is dropped),
// from the loader's file system so a commit's tree renders as the disk
// does; a link leaving the repository is refused. It also returns what
// it read, by absolute path.
func (l *loader) chartFiles(dir string) ([]*archive.BufferedFile, map[string][]byte, error) {
	rules := ignore.Empty()
	if data, err := l.fsys.ReadFile(filepath.Join(dir, ignore.HelmIgnore)); err == nil {
		r, err := ignore.Parse(bytes.NewReader(data))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
		rules = r
	}
	rules.AddDefaults()
	confine := l.buildRoot(dir)
	read := map[string][]byte{}
	var files []*archive.BufferedFile
	var total int64
	var visit func(d string) error
	visit = func(d string) error {
		entries, err := l.fsys.ReadDir(d)
		if err != nil {
			return err
		}
		for _, e := range entries {
			full := filepath.Join(d, e.Name())
			if kustbuild.IsGitElement(e.Name()) {
				continue // a git directory is not the chart's, nor the repository's
			}
			rel, _ := filepath.Rel(dir, full)
			rel = filepath.ToSlash(rel)
			if e.Type()&fs.ModeSymlink != 0 && linkOutside(l.fsys, confine, full) != "" {
				return fmt.Errorf("%s is a link to a file outside the repository, which keyhole does not read", rel)
			}
			fi, err := l.fsys.Stat(full)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, pathless(err))
			}
			if fi.IsDir() {
				if !rules.Ignore(rel, fi) {
					if err := visit(full); err != nil {
						return err
					}
				}
				continue
			}
			if rules.Ignore(rel, fi) {
				continue
			}
			if !fi.Mode().IsRegular() {
				return fmt.Errorf("cannot load irregular file %s", rel)
			}
			total += fi.Size()
			if total > archive.MaxDecompressedChartSize || len(files) >= helmMaxFiles {
				return fmt.Errorf("the chart is larger than Helm loads (%d MiB, or %d files)", archive.MaxDecompressedChartSize>>20, helmMaxFiles)
			}
			data, err := l.fsys.ReadFile(full)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, pathless(err))
			}
			read[full] = data
			files = append(files, &archive.BufferedFile{Name: rel, Data: bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))})
		}
		return nil
	}
	err := visit(dir)
	return files, read, err
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
	// from (localDependencies) are its subcharts once rendered.
	return slices.ContainsFunc(l.localDependencies(dir), func(d localDependency) bool { return l.chartHoldsHere(d.dir, holds) })
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
	from := &sharedFrom{unit: u, walked: true}
	for _, f := range run.files {
		name := l.under(named, u.Root, f.abs)
		// Not through the memo: documents of one rendered text belong to
		// each unit that renders it, and the memo's carry the first's.
		docs, diags := parse(name, f.data, true, func(d *Document) {
			d.from = from
			l.digest(d)
		})
		for i := range docs {
			l.docs = append(l.docs, &docs[i])
		}
		l.diags = append(l.diags, diags...)
	}
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

// givenStrings are the values o gives a chart as it gives them, for a
// message about values that did not merge: each parameter's value, and
// the string values (or, when they are not YAML, the lines) of inline
// values and value sources.
func (o *HelmOverlay) givenStrings() []string {
	var out []string
	for _, kv := range slices.Concat(o.Set, o.SetString) {
		_, v, _ := strings.Cut(kv, "=")
		out = append(out, v)
	}
	texts := []string{string(o.Values)}
	for _, f := range o.From {
		texts = append(texts, f.Value)
	}
	for _, t := range texts {
		var m map[string]any
		if yaml.Unmarshal([]byte(t), &m) == nil {
			out = append(out, valueStrings(nil, m)...)
		} else {
			out = append(out, strings.Split(t, "\n")...)
		}
	}
	return out
}

// secretCandidates is values less those a template of ch (or of its
// subcharts) writes out itself: those are the chart's own text, and
// taking them out of messages too would leave messages unreadable
// (a value "prometheus" in a chart named kube-prometheus-stack).
func secretCandidates(ch *chart.Chart, values []string) []string {
	var text bytes.Buffer
	var add func(c *chart.Chart)
	add = func(c *chart.Chart) {
		for _, t := range c.Templates {
			text.Write(t.Data)
			text.WriteByte(0)
		}
		for _, d := range c.Dependencies() {
			add(d)
		}
	}
	add(ch)
	return slices.DeleteFunc(values, func(v string) bool { return bytes.Contains(text.Bytes(), []byte(v)) })
}

// valueStrings lists the string values of ch's values (its subcharts'
// too) and of vals: a render error may quote any of them (a schema's
// pattern, a failed conversion), and a Secret's value may come from one.
func valueStrings(ch *chart.Chart, vals map[string]any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case string:
			out = append(out, v)
		}
	}
	walk(vals)
	var charts func(c *chart.Chart)
	charts = func(c *chart.Chart) {
		walk(c.Values)
		for _, d := range c.Dependencies() {
			charts(d)
		}
	}
	if ch != nil {
		charts(ch)
	}
	slices.Sort(out)
	return slices.Compact(out)
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
