package helm

import (
	"errors"
	"os"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"

	"keyhole.dev/keyhole/internal/apart"
	"keyhole.dev/keyhole/source"
)

// A chart's templates run in a process of their own (internal/apart),
// bounded in memory and time: keyhole says which chart went over which
// bound. The renderer is given the chart's files as the loader read them
// and the values already merged, renders with renderChart, and answers
// with the rendered templates; it reads no file and no network.

// helmRenderMemory bounds how much address space a chart's rendering may
// add to its process. Real charts render in tens of MiB.
var helmRenderMemory int64 = 2 << 30

// The process is keyhole's own executable (or the test binary), which
// becomes the renderer when apart.Env names Helm: the init below takes
// over before main.
func init() {
	if os.Getenv(apart.Env) == apart.KindHelm {
		os.Exit(apart.Serve(os.Stdin, os.Stdout, serveHelmJob))
	}
}

// helmJob is what a renderer is given.
type helmJob struct {
	// Files are the chart's files, as chartFiles read them.
	Files []*archive.BufferedFile
	// ChartValues, when set, replace the chart's values.yaml.
	ChartValues *apart.Value
	// Values are the values merged from what the deployer gives.
	Values  apart.Value
	Overlay source.HelmOverlay
}

// renderApart renders the chart made of files with vals and o, as
// renderChart does, in a renderer process bounded by helmRenderTimeout
// and helmRenderMemory.
func renderApart(files []*archive.BufferedFile, chartValues, vals map[string]any, o *source.HelmOverlay) (map[string]string, error) {
	job := helmJob{Files: files, Overlay: *o}
	// What the deployer gives is already in vals: the renderer needs
	// none of it again, and none of it in its job.
	job.Overlay.ValueFiles, job.Overlay.Values, job.Overlay.Set, job.Overlay.SetString = nil, nil, nil, nil
	job.Overlay.SetFile, job.Overlay.ChartValues, job.Overlay.From = nil, nil, nil
	var err error
	if job.Values, err = apart.Carry(vals); err != nil {
		return nil, err
	}
	if chartValues != nil {
		cv, err := apart.Carry(chartValues)
		if err != nil {
			return nil, err
		}
		job.ChartValues = &cv
	}
	ans, err := apart.Run(apart.KindHelm, &job, helmRenderMemory, helmRenderTimeout, "a chart")
	if err != nil {
		return nil, err
	}
	if ans.Err != "" {
		return nil, errors.New(ans.Err)
	}
	return ans.Files, nil
}

// serveHelmJob renders job, in the child process.
func serveHelmJob(job *helmJob) apart.Answer {
	files, err := renderJob(job)
	if err != nil {
		return apart.Answer{Err: err.Error()}
	}
	return apart.Answer{Files: files}
}

// renderJob loads the chart as the parent did and renders it.
func renderJob(job *helmJob) (map[string]string, error) {
	ch, err := chartloader.LoadFiles(job.Files)
	if err != nil {
		return nil, err
	}
	if ch.Metadata == nil {
		return nil, errors.New("its Chart.yaml is empty")
	}
	dropMissingDependencies(ch)
	if job.ChartValues != nil {
		ch.Values, _ = job.ChartValues.Any().(map[string]any)
	}
	vals, _ := job.Values.Any().(map[string]any)
	return renderChart(ch, vals, &job.Overlay)
}
