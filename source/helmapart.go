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
}

// helmValue is one Helm value (or an ApplicationSet's parameter) with its Go type kept, so the renderer's
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
	valueNumber     // a json.Number, in S
	valueMap        // map[string]any: Keys and Elems
	valueValues     // common.Values: Keys and Elems
	valueList       // []any: Elems
	valueStringList // []string: Elems
	valueStringMap  // map[string]string: Keys and Elems
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
	case []string:
		out := helmValue{Kind: valueStringList, Elems: make([]helmValue, len(v))}
		for i, e := range v {
			out.Elems[i] = helmValue{Kind: valueString, S: e}
		}
		return out, nil
	case map[string]string:
		out := helmValue{Kind: valueStringMap, Keys: make([]string, 0, len(v)), Elems: make([]helmValue, 0, len(v))}
		for k, e := range v {
			out.Keys = append(out.Keys, k)
			out.Elems = append(out.Elems, helmValue{Kind: valueString, S: e})
		}
		return out, nil
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
	case valueStringList:
		l := make([]string, len(v.Elems))
		for i, e := range v.Elems {
			l[i] = e.S
		}
		return l
	case valueStringMap:
		m := make(map[string]string, len(v.Keys))
		for i, k := range v.Keys {
			m[k] = v.Elems[i].S
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

// apartJob is what a child process is given: one job of one kind, and
// the address space its work may add.
type apartJob struct {
	Helm     *helmJob
	Template *templateJob
	Memory   int64
}

// apartAnswer is what a child process answers.
type apartAnswer struct {
	Files map[string]string
	Text  string
	Err   string
	// Changing names the function whose result changes from run to run
	// that Err is about (changingError), if any.
	Changing string
}

// renderApart renders the chart made of files with vals and o, as
// renderChart does, in a renderer process bounded by helmRenderTimeout
// and helmRenderMemory.
func renderApart(files []*archive.BufferedFile, chartValues, vals map[string]any, o *HelmOverlay) (map[string]string, error) {
	job := helmJob{Files: files, Overlay: *o}
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
	ans, err := runApart(&apartJob{Helm: &job, Memory: helmRenderMemory}, helmRenderTimeout, "a chart")
	if err != nil {
		return nil, err
	}
	return ans.Files, nil
}

// runApart runs job in a child process bounded by timeout and job.Memory;
// what names the work for the bound's message ("a chart").
func runApart(job *apartJob, timeout time.Duration, what string) (*apartAnswer, error) {
	var in bytes.Buffer
	if err := gob.NewEncoder(&in).Encode(job); err != nil {
		return nil, fmt.Errorf("handing the work to keyhole's child process: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding keyhole's executable to run the work in: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self)
	// Nothing of keyhole's environment: templates cannot read it, and
	// the child does the same on every machine.
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
		return nil, fmt.Errorf("rendering did not end within %v, the bound keyhole gives %s", timeout, what)
	}
	if runErr != nil {
		if strings.Contains(stderr.String(), "out of memory") {
			return nil, fmt.Errorf("rendering needed more than %d MiB of memory, the bound keyhole gives %s", job.Memory>>20, what)
		}
		why, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		return nil, fmt.Errorf("keyhole's child process failed (%v): %s", runErr, why)
	}
	var ans apartAnswer
	if err := gob.NewDecoder(&out).Decode(&ans); err != nil {
		return nil, fmt.Errorf("reading the answer of keyhole's child process: %w", err)
	}
	if ans.Changing != "" {
		return nil, changingError{name: ans.Changing}
	}
	if ans.Err != "" {
		return nil, errors.New(ans.Err)
	}
	return &ans, nil
}

// serveHelmRender is a child process's life: it reads one job from in,
// bounds its own memory, does the work, and writes the answer to out. It
// returns the process's exit code.
func serveHelmRender(in io.Reader, out io.Writer) int {
	var job apartJob
	if err := gob.NewDecoder(in).Decode(&job); err != nil {
		fmt.Fprintln(os.Stderr, "keyhole's child process: reading its job:", err)
		return 2
	}
	if err := boundMemory(job.Memory); err != nil {
		fmt.Fprintln(os.Stderr, "keyhole's child process:", err)
		return 2
	}
	var ans apartAnswer
	var err error
	switch {
	case job.Helm != nil:
		ans.Files, err = renderJob(job.Helm)
	case job.Template != nil:
		ans.Text, err = job.Template.run()
	default:
		err = errors.New("a job of no known kind")
	}
	if err != nil {
		ans.Err = err.Error()
		if ce := (changingError{}); errors.As(err, &ce) {
			ans.Changing = ce.name
		}
	}
	if err := gob.NewEncoder(out).Encode(&ans); err != nil {
		fmt.Fprintln(os.Stderr, "keyhole's child process: writing its answer:", err)
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
