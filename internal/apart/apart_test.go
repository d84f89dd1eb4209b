package apart

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
)

// The test binary is a worker of its own kinds, as keyhole's executable
// is of the engines'.
func init() {
	switch os.Getenv(Env) {
	case "echo":
		os.Exit(Serve(os.Stdin, os.Stdout, func(job *echoJob) Answer {
			if job.Fail != "" {
				return Answer{Err: job.Fail}
			}
			return Answer{Text: job.Text + " " + strings.Join(os.Environ(), ",")}
		}))
	case "spin":
		os.Exit(Serve(os.Stdin, os.Stdout, func(*echoJob) Answer {
			time.Sleep(time.Minute)
			return Answer{}
		}))
	}
}

type echoJob struct {
	Text, Fail string
}

// TestRun: the child gets the job and only Env of the parent's
// environment, and its answer (a failure included) comes back whole.
func TestRun(t *testing.T) {
	ans, err := Run("echo", &echoJob{Text: "hello"}, 256<<20, time.Minute, "a test")
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello " + Env + "=echo"; ans.Text != want {
		t.Errorf("Text = %q, want %q", ans.Text, want)
	}
	ans, err = Run("echo", &echoJob{Fail: "no"}, 256<<20, time.Minute, "a test")
	if err != nil || ans.Err != "no" {
		t.Errorf("got %+v, %v; want the answer's Err", ans, err)
	}
}

// TestRunBounded: a child past its time bound is ended, and the error
// names the bound and the work.
func TestRunBounded(t *testing.T) {
	_, err := Run("spin", &echoJob{}, 256<<20, 100*time.Millisecond, "a test")
	if err == nil || !strings.Contains(err.Error(), "did not end within 100ms, the bound keyhole gives a test") {
		t.Errorf("err = %v", err)
	}
}

// TestCarry: a value comes back from Carry and Any as the Go value it
// was, its types kept.
func TestCarry(t *testing.T) {
	v := map[string]any{
		"s": "x", "f": 1.5, "i": int64(3), "b": true, "nil": nil, "n": json.Number("7"),
		"l":  []any{"a", 2.0, map[string]any{"k": "v"}},
		"ls": []string{"a", "b"}, "ms": map[string]string{"k": "v"},
		"vals": common.Values{"x": "y"},
	}
	c, err := Carry(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Any(); !reflect.DeepEqual(got, v) {
		t.Errorf("Any = %#v, want %#v", got, v)
	}
	if _, err := Carry(map[string]any{"c": make(chan int)}); err == nil {
		t.Error("a channel was carried")
	}
}
