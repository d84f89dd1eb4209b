package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
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

	"keyhole.dev/keyhole/internal/kustbuild"
	"keyhole.dev/keyhole/source"
)

// helmRenderTimeout bounds one chart's rendering: a template can loop
// for as long as its values say, and a CI gate must not hang on it.
var helmRenderTimeout = time.Minute

// helmMaxFiles bounds how many files one chart's load reads.
const helmMaxFiles = 10000

// Render renders the chart in dir (absolute) with o.
func (Engine) Render(h source.Host, dir string, o *source.HelmOverlay) source.HelmRun {
	var run source.HelmRun
	if o.Invalid != "" {
		run.Err = errors.New(o.Invalid)
		return run
	}
	files, read, err := chartFiles(h, dir)
	run.Read = read
	if err != nil {
		run.Err = err
		return run
	}
	ch, err := chartloader.LoadFiles(files)
	if err == nil && ch.Metadata != nil && withLocalDependencies(h, dir, ch, &files, read) {
		ch, err = chartloader.LoadFiles(files)
	}
	if err != nil {
		run.Err = err
		return run
	}
	if ch.Metadata == nil {
		run.Err = errors.New("its Chart.yaml is empty")
		return run
	}
	run.Missing = dropMissingDependencies(ch)
	var cvals map[string]any
	if o.ChartValues != nil {
		cvals, err = mergeValueFiles(h, dir, o.ChartValues, run.Read)
		if err != nil {
			run.Err = err
			return run
		}
		ch.Values = cvals
	}
	vals, err := helmValues(h, dir, o, run.Read)
	run.Values = secretCandidates(ch, append(valueStrings(ch, vals), givenStrings(o)...))
	if err != nil {
		run.Err = err
		return run
	}
	rendered, err := renderApart(files, cvals, vals, o)
	if err != nil {
		run.Err = err
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
			run.Files = append(run.Files, source.RenderedFile{Abs: chartDir(filepath.ToSlash(crd.Filename)), Data: crd.File.Data})
		}
	}
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	slices.Sort(names)
	templates := map[string][]byte{}
	templateTexts(ch, ch.Name(), templates)
	for _, name := range names {
		if strings.TrimSpace(rendered[name]) != "" {
			f := source.RenderedFile{Abs: chartDir(name), Data: []byte(rendered[name])}
			if tmpl, ok := templates[name]; ok {
				f.Lines = templateLines(string(tmpl), rendered[name])
			}
			run.Files = append(run.Files, f)
		}
	}
	return run
}

// templateTexts adds the templates of c, whose templates Helm names
// under prefix, and of its subcharts to texts, by the names Helm's
// engine gives their output: a subchart's under each name a dependency
// gives it (its own, or an alias).
func templateTexts(c *chart.Chart, prefix string, texts map[string][]byte) {
	for _, t := range c.Templates {
		if t != nil {
			texts[path.Join(prefix, t.Name)] = t.Data
		}
	}
	for _, sub := range c.Dependencies() {
		names := []string{sub.Name()}
		for _, d := range dependencies(c) {
			if d != nil && d.Name == sub.Name() && d.Alias != "" {
				names = append(names, d.Alias)
			}
		}
		for _, n := range names {
			templateTexts(sub, prefix+"/charts/"+n, texts)
		}
	}
}

// renderChart is what `helm template` does between loading the chart
// and printing it (Helm's action.Install in client-only mode and
// renderResources): dependencies enabled by the values, the values
// coalesced and checked against the chart's schema, the templates
// rendered, NOTES.txt set aside, and the output sorted into manifests
// and hooks, which fails on YAML that is not objects. It returns the
// rendered templates by name.
func renderChart(ch *chart.Chart, vals map[string]any, o *source.HelmOverlay) (map[string]string, error) {
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
	e := engine.Engine{CustomTemplateFuncs: seededFuncs(ch, o)}
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
func helmValues(h source.Host, dir string, o *source.HelmOverlay, read map[string][]byte) (map[string]any, error) {
	base, err := mergeValueFiles(h, dir, o.ValueFiles, read)
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
			if h.OutsideRepo(dir, file) {
				return nil, source.ErrOutsideRepo
			}
			data, err := h.ReadFile(file)
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
func mergeValueFiles(h source.Host, dir string, files []string, read map[string][]byte) (map[string]any, error) {
	base := map[string]any{}
	for _, f := range files {
		if h.OutsideRepo(dir, f) {
			return nil, fmt.Errorf("reading values file %s: %w", filepath.Base(f), source.ErrOutsideRepo)
		}
		data, err := h.ReadFile(f)
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
func chartFiles(h source.Host, dir string) ([]*archive.BufferedFile, map[string][]byte, error) {
	rules := ignore.Empty()
	if data, err := h.ReadFile(filepath.Join(dir, ignore.HelmIgnore)); err == nil {
		r, err := ignore.Parse(bytes.NewReader(data))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
		rules = r
	}
	rules.AddDefaults()
	confine := h.BuildRoot(dir)
	read := map[string][]byte{}
	var files []*archive.BufferedFile
	var total int64
	var visit func(d string) error
	visit = func(d string) error {
		entries, err := h.ReadDir(d)
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
			if e.Type()&fs.ModeSymlink != 0 && h.LinkOutside(confine, full) != "" {
				return fmt.Errorf("%s is a link to a file outside the repository, which keyhole does not read", rel)
			}
			fi, err := h.Stat(full)
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
			data, err := h.ReadFile(full)
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

// givenStrings are the values o gives a chart as it gives them, for a
// message about values that did not merge: each parameter's value, and
// the string values (or, when they are not YAML, the lines) of inline
// values and value sources.
func givenStrings(o *source.HelmOverlay) []string {
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

// dependencies are the dependencies c's Chart.yaml lists.
func dependencies(c *chart.Chart) []*chart.Dependency {
	if c.Metadata == nil {
		return nil
	}
	return c.Metadata.Dependencies
}
