// Package apart runs a piece of work in a child process bounded in
// memory and time: keyhole's own executable (or the test binary), which
// becomes the worker when Env names a kind of work.
//
// Helm's template language, and the Go templates of an Argo CD
// ApplicationSet, can ask for any amount of memory (`repeat`, `until`,
// nested ranges) and any amount of time, and Go can neither stop a
// goroutine nor survive a failed allocation: run in keyhole's process,
// one line of a template could end the run in a runtime crash, or leave
// a loop spinning on after its bound. In a process of its own, the work
// gets a bounded address space and is killed at its time bound, and the
// caller says which input went over which bound.
//
// The package that does a kind of work serves it from an init function
// (Serve), which takes over before main when Env names its kind; the
// child is given what the parent read, reads no file and no network, and
// gets nothing of keyhole's environment.
package apart

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
)

// Env, set in a process's environment, makes it a worker for the kind of
// work it names.
const Env = "KEYHOLE_HELM_RENDERER"

// The kinds of work, as Env names them.
const (
	// KindHelm renders a Helm chart (source/helm).
	KindHelm = "helm"
	// KindTemplate fills one string of an ApplicationSet's template
	// (source/argocd).
	KindTemplate = "template"
)

// Answer is what a child process answers.
type Answer struct {
	Files map[string]string
	Text  string
	Err   string
	// Changing names the function whose result changes from run to run
	// that Err is about, if any.
	Changing string
}

// Run runs job, of the kind named, in a child process bounded by timeout
// and memory; what names the work for the bound's message ("a chart").
// An error is about the child process; what the work itself answered,
// its failure included, is in the Answer.
func Run(kind string, job any, memory int64, timeout time.Duration, what string) (*Answer, error) {
	var in bytes.Buffer
	enc := gob.NewEncoder(&in)
	if err := enc.Encode(memory); err != nil {
		return nil, fmt.Errorf("handing the work to keyhole's child process: %w", err)
	}
	if err := enc.Encode(job); err != nil {
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
	cmd.Env = []string{Env + "=" + kind}
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
			return nil, fmt.Errorf("rendering needed more than %d MiB of memory, the bound keyhole gives %s", memory>>20, what)
		}
		why, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		return nil, fmt.Errorf("keyhole's child process failed (%v): %s", runErr, why)
	}
	var ans Answer
	if err := gob.NewDecoder(&out).Decode(&ans); err != nil {
		return nil, fmt.Errorf("reading the answer of keyhole's child process: %w", err)
	}
	return &ans, nil
}

// Serve is a child process's life: it reads one job from in, bounds its
// own memory, does the work, and writes the answer to out. It returns
// the process's exit code.
func Serve[J any](in io.Reader, out io.Writer, do func(job *J) Answer) int {
	dec := gob.NewDecoder(in)
	var memory int64
	var job J
	if err := dec.Decode(&memory); err != nil {
		fmt.Fprintln(os.Stderr, "keyhole's child process: reading its job:", err)
		return 2
	}
	if err := dec.Decode(&job); err != nil {
		fmt.Fprintln(os.Stderr, "keyhole's child process: reading its job:", err)
		return 2
	}
	if err := boundMemory(memory); err != nil {
		fmt.Fprintln(os.Stderr, "keyhole's child process:", err)
		return 2
	}
	ans := do(&job)
	if err := gob.NewEncoder(out).Encode(&ans); err != nil {
		fmt.Fprintln(os.Stderr, "keyhole's child process: writing its answer:", err)
		return 2
	}
	return 0
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

// Value is one Helm value (or an ApplicationSet's parameter) with its Go
// type kept, so the child's templates see what they would in one
// process: a number read from YAML is a float64, one from --set an
// int64, and templates print the two differently.
type Value struct {
	Kind  byte // one of the kinds below
	S     string
	F     float64
	I     int64
	B     bool
	Keys  []string
	Elems []Value
}

// The kinds of a Value.
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

// Carry is v as a Value, or why it cannot be one.
func Carry(v any) (Value, error) {
	switch v := v.(type) {
	case nil:
		return Value{Kind: valueNil}, nil
	case string:
		return Value{Kind: valueString, S: v}, nil
	case float64:
		return Value{Kind: valueFloat, F: v}, nil
	case int64:
		return Value{Kind: valueInt, I: v}, nil
	case int:
		return Value{Kind: valueInt, I: int64(v)}, nil
	case bool:
		return Value{Kind: valueBool, B: v}, nil
	case json.Number:
		return Value{Kind: valueNumber, S: string(v)}, nil
	case map[string]any:
		return carryMap(valueMap, v)
	case common.Values:
		return carryMap(valueValues, v)
	case []string:
		out := Value{Kind: valueStringList, Elems: make([]Value, len(v))}
		for i, e := range v {
			out.Elems[i] = Value{Kind: valueString, S: e}
		}
		return out, nil
	case map[string]string:
		out := Value{Kind: valueStringMap, Keys: make([]string, 0, len(v)), Elems: make([]Value, 0, len(v))}
		for k, e := range v {
			out.Keys = append(out.Keys, k)
			out.Elems = append(out.Elems, Value{Kind: valueString, S: e})
		}
		return out, nil
	case []any:
		out := Value{Kind: valueList, Elems: make([]Value, len(v))}
		for i, e := range v {
			c, err := Carry(e)
			if err != nil {
				return Value{}, err
			}
			out.Elems[i] = c
		}
		return out, nil
	}
	return Value{}, fmt.Errorf("a value of type %T, which keyhole cannot hand to its chart renderer", v)
}

func carryMap(kind byte, m map[string]any) (Value, error) {
	out := Value{Kind: kind, Keys: make([]string, 0, len(m)), Elems: make([]Value, 0, len(m))}
	for k, e := range m {
		c, err := Carry(e)
		if err != nil {
			return Value{}, err
		}
		out.Keys = append(out.Keys, k)
		out.Elems = append(out.Elems, c)
	}
	return out, nil
}

// Any is the Go value v carries.
func (v Value) Any() any {
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
			m[k] = v.Elems[i].Any()
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
			l[i] = e.Any()
		}
		return l
	}
	return nil
}
