package source

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
)

// A chart's templates run in a process of their own. Helm's template
// language can ask for any amount of memory (`repeat`, `until`, nested
// ranges) and any amount of time, and Go can neither stop a goroutine
// nor survive a failed allocation: rendered in keyhole's process, one
// line of a template could end the run in a runtime crash, or leave a
// loop spinning on after its bound. In a process of its own, the
// rendering gets a bounded address space and is killed at its time
// bound, and keyhole says which chart went over which bound.
//
// The process is keyhole's own executable (or the test binary), which
// becomes the renderer when helmApartEnv is set: the init below takes
// over before main. It is given the chart's files as the loader read
// them and the values already merged, renders with renderChart, and
// answers with the rendered templates; it reads no file and no network.

// helmApartEnv, set in a process's environment, makes it a renderer.
const helmApartEnv = "KEYHOLE_HELM_RENDERER"

// helmRenderMemory bounds how much address space a chart's rendering may
// add to its process. Real charts render in tens of MiB.
var helmRenderMemory int64 = 2 << 30

func init() {
	if os.Getenv(helmApartEnv) == "" {
		return
	}
	os.Exit(serveHelmRender(os.Stdin, os.Stdout))
}

// helmJob is what a renderer is given.
type helmJob struct {
	// Files are the chart's files, as chartFiles read them.
	Files []*archive.BufferedFile
	// ChartValues, when set, replace the chart's values.yaml.
	ChartValues *helmValue
	// Values are the values merged from what the deployer gives.
	Values  helmValue
	Overlay HelmOverlay
	// Memory is the address space the rendering may add.
	Memory int64
}

// helmAnswer is what a renderer answers.
type helmAnswer struct {
	Files map[string]string
	Err   string
}

// helmValue is one Helm value with its Go type kept, so the renderer's
// templates see what they would in one process: a number read from YAML
// is a float64, one from --set an int64, and templates print the two
// differently.
type helmValue struct {
	Kind  byte // one of the kinds below
	S     string
	F     float64
	I     int64
	B     bool
	Keys  []string
	Elems []helmValue
}

// The kinds of a helmValue.
const (
	valueNil = iota
	valueString
	valueFloat
	valueInt
	valueBool
	valueNumber // a json.Number, in S
	valueMap    // map[string]any: Keys and Elems
	valueValues // common.Values: Keys and Elems
	valueList   // []any: Elems
)

// carry is v as a helmValue, or why it cannot be one.
func carry(v any) (helmValue, error) {
	switch v := v.(type) {
	case nil:
		return helmValue{Kind: valueNil}, nil
	case string:
		return helmValue{Kind: valueString, S: v}, nil
	case float64:
		return helmValue{Kind: valueFloat, F: v}, nil
	case int64:
		return helmValue{Kind: valueInt, I: v}, nil
	case int:
		return helmValue{Kind: valueInt, I: int64(v)}, nil
	case bool:
		return helmValue{Kind: valueBool, B: v}, nil
	case json.Number:
		return helmValue{Kind: valueNumber, S: string(v)}, nil
	case map[string]any:
		return carryMap(valueMap, v)
	case common.Values:
		return carryMap(valueValues, v)
	case []any:
		out := helmValue{Kind: valueList, Elems: make([]helmValue, len(v))}
		for i, e := range v {
			c, err := carry(e)
			if err != nil {
				return helmValue{}, err
			}
			out.Elems[i] = c
		}
		return out, nil
	}
	return helmValue{}, fmt.Errorf("a value of type %T, which keyhole cannot hand to its chart renderer", v)
}

func carryMap(kind byte, m map[string]any) (helmValue, error) {
	out := helmValue{Kind: kind, Keys: make([]string, 0, len(m)), Elems: make([]helmValue, 0, len(m))}
	for k, e := range m {
		c, err := carry(e)
		if err != nil {
			return helmValue{}, err
		}
		out.Keys = append(out.Keys, k)
		out.Elems = append(out.Elems, c)
	}
	return out, nil
}

// value is the Go value v carries.
func (v helmValue) value() any {
	switch v.Kind {
	case valueString:
		return v.S
	case valueFloat:
		return v.F
	case valueInt:
		// An int in the parent comes back an int64: only strvals makes
		// integers, and it makes int64.
		return v.I
	case valueBool:
		return v.B
	case valueNumber:
		return json.Number(v.S)
	case valueMap, valueValues:
		m := make(map[string]any, len(v.Keys))
		for i, k := range v.Keys {
			m[k] = v.Elems[i].value()
		}
		if v.Kind == valueValues {
			return common.Values(m)
		}
		return m
	case valueList:
		l := make([]any, len(v.Elems))
		for i, e := range v.Elems {
			l[i] = e.value()
		}
		return l
	}
	return nil
}

// renderApart renders the chart made of files with vals and o, as
// renderChart does, in a renderer process bounded by helmRenderTimeout
// and helmRenderMemory.
func renderApart(files []*archive.BufferedFile, chartValues, vals map[string]any, o *HelmOverlay) (map[string]string, error) {
	job := helmJob{Files: files, Overlay: *o, Memory: helmRenderMemory}
	// What the deployer gives is already in vals: the renderer needs
	// none of it again, and none of it in its job.
	job.Overlay.ValueFiles, job.Overlay.Values, job.Overlay.Set, job.Overlay.SetString = nil, nil, nil, nil
	job.Overlay.SetFile, job.Overlay.ChartValues, job.Overlay.From = nil, nil, nil
	var err error
	if job.Values, err = carry(vals); err != nil {
		return nil, err
	}
	if chartValues != nil {
		cv, err := carry(chartValues)
		if err != nil {
			return nil, err
		}
		job.ChartValues = &cv
	}
	var in bytes.Buffer
	if err := gob.NewEncoder(&in).Encode(&job); err != nil {
		return nil, fmt.Errorf("handing the chart to its renderer: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding keyhole's executable to render the chart with: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), helmRenderTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self)
	// Nothing of keyhole's environment: templates cannot read it, and
	// the renderer does the same on every machine.
	cmd.Env = []string{helmApartEnv + "=1"}
	cmd.Stdin = &in
	var out bytes.Buffer
	cmd.Stdout = &out
	// A crash prints every goroutine's stack: its first lines say why.
	stderr := &capped{max: 4 << 10}
	cmd.Stderr = stderr
	cmd.WaitDelay = time.Second
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("rendering did not end within %v", helmRenderTimeout)
	}
	if runErr != nil {
		if strings.Contains(stderr.String(), "out of memory") {
			return nil, fmt.Errorf("rendering needed more than %d MiB of memory, the bound keyhole gives a chart", helmRenderMemory>>20)
		}
		why, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		return nil, fmt.Errorf("the chart's renderer failed (%v): %s", runErr, why)
	}
	var ans helmAnswer
	if err := gob.NewDecoder(&out).Decode(&ans); err != nil {
		return nil, fmt.Errorf("reading the chart renderer's answer: %w", err)
	}
	if ans.Err != "" {
		return nil, errors.New(ans.Err)
	}
	return ans.Files, nil
}

// serveHelmRender is a renderer's life: it reads one job from in, bounds
// its own memory, renders, and writes the answer to out. It returns the
// process's exit code.
func serveHelmRender(in io.Reader, out io.Writer) int {
	var job helmJob
	if err := gob.NewDecoder(in).Decode(&job); err != nil {
		fmt.Fprintln(os.Stderr, "keyhole's chart renderer: reading its job:", err)
		return 2
	}
	if err := boundMemory(job.Memory); err != nil {
		fmt.Fprintln(os.Stderr, "keyhole's chart renderer:", err)
		return 2
	}
	var ans helmAnswer
	files, err := renderJob(&job)
	if err != nil {
		ans.Err = err.Error()
	}
	ans.Files = files
	if err := gob.NewEncoder(out).Encode(&ans); err != nil {
		fmt.Fprintln(os.Stderr, "keyhole's chart renderer: writing its answer:", err)
		return 2
	}
	return 0
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
		ch.Values, _ = job.ChartValues.value().(map[string]any)
	}
	vals, _ := job.Values.value().(map[string]any)
	return renderChart(ch, vals, &job.Overlay)
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
