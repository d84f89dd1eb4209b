package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"keyhole.dev/keyhole/bench/gen/synth"
	"keyhole.dev/keyhole/pipeline"
)

// BenchmarkCheckVsParse runs, on the same repository and in one run, the
// floor (reading the files and parsing them into yaml.Nodes with the
// YAML library), the whole of `keyhole check`, and `keyhole render
// --stdout` (check, then render every sandbox into one stream). Writing the
// rendered files with -o is measured apart (render-o): its cost is mostly
// the file system's, one file creation per rendered object.
func BenchmarkCheckVsParse(b *testing.B) {
	dir, files := synth.ForBenchmark(b)
	b.Run("parse", func(b *testing.B) {
		for b.Loop() {
			synth.ParseFloor(b, files)
		}
	})
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			var out bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard}
			if code := run(e, []string{"check", dir}); code != exitOK {
				b.Fatalf("exit %d:\n%s", code, out.String())
			}
		}
	})
	b.Run("render", func(b *testing.B) {
		for b.Loop() {
			var errs bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errs}
			if code := run(e, []string{"render", "--stdout", dir}); code != exitOK {
				b.Fatalf("exit %d:\n%s", code, errs.String())
			}
		}
	})
	b.Run("render-o", func(b *testing.B) {
		outDir := filepath.Join(b.TempDir(), "rendered")
		for b.Loop() {
			var out bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &out}
			if code := run(e, []string{"render", "-o", outDir, dir}); code != exitOK {
				b.Fatalf("exit %d:\n%s", code, out.String())
			}
		}
	})
}

// BenchmarkRenderVsCheck times `keyhole check` and `keyhole render
// --stdout` on the repository of BenchmarkCheckVsParse, one after the
// other in every iteration, so that on a shared machine both see the same
// load, each after a garbage collection. It reports the medians over the iterations of each one's wall
// time and of the ratio render/check within an iteration: run it with
// -benchtime 5x (or more) for medians of as many alternating runs.
func BenchmarkRenderVsCheck(b *testing.B) {
	dir, _ := synth.ForBenchmark(b)
	var checks, renders, ratios, checkCPU, renderCPU []float64
	for b.Loop() {
		// Each starts from a collected heap, as a process of its own
		// would, rather than paying for the other's garbage.
		runtime.GC()
		start, cpu0 := time.Now(), cpuTime(b)
		var out bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard}
		if code := run(e, []string{"check", dir}); code != exitOK {
			b.Fatalf("check: exit %d:\n%s", code, out.String())
		}
		check, cpu1 := time.Since(start), cpuTime(b)
		runtime.GC()
		mid, cpu2 := time.Now(), cpuTime(b)
		var errs bytes.Buffer
		e = &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errs}
		if code := run(e, []string{"render", "--stdout", dir}); code != exitOK {
			b.Fatalf("render: exit %d:\n%s", code, errs.String())
		}
		render, cpu3 := time.Since(mid), cpuTime(b)
		checks, renders = append(checks, check.Seconds()*1e3), append(renders, render.Seconds()*1e3)
		ratios = append(ratios, render.Seconds()/check.Seconds())
		checkCPU, renderCPU = append(checkCPU, (cpu1-cpu0).Seconds()*1e3), append(renderCPU, (cpu3-cpu2).Seconds()*1e3)
	}
	b.ReportMetric(median(checks), "check-ms")
	b.ReportMetric(median(renders), "render-ms")
	b.ReportMetric(median(ratios), "render/check")
	// CPU time, user and system, GC included: what the work costs apart
	// from waiting for a core on a shared machine.
	b.ReportMetric(median(checkCPU), "check-cpu-ms")
	b.ReportMetric(median(renderCPU), "render-cpu-ms")
}

// median is the median of xs, 0 for none; xs is left as it was.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// realShaped writes, into a new directory, a repository of at least
// minFiles files shaped as real GitOps repositories are: copies of the
// corpus under testdata/repos (a Flux monorepo, an Argo CD app of apps, a
// Helm chart repository, a kubebuilder controller), one per team
// directory, each team's agents in their own deploy units. It returns the
// directory and the number of files.
func realShaped(b *testing.B, minFiles int) (string, int) {
	b.Helper()
	dir := b.TempDir()
	n := 0
	for team := 0; n < minFiles; team++ {
		for _, repo := range corpus {
			dst := filepath.Join(dir, fmt.Sprintf("team-%02d", team), repo)
			if err := os.CopyFS(dst, os.DirFS(filepath.Join("testdata", "repos", repo))); err != nil {
				b.Fatal(err)
			}
			if team > 0 { // one repository, one Config
				if err := os.Remove(filepath.Join(dst, "keyhole.yaml")); err != nil && !errors.Is(err, fs.ErrNotExist) {
					b.Fatal(err)
				}
			}
			err := filepath.WalkDir(dst, func(_ string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					n++
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	return dir, n
}

// BenchmarkCheckRealShaped checks a 500-file repository shaped as real
// GitOps repositories are (see realShaped): Helm charts, templated docs,
// Flux and Argo CD objects, CRDs and kustomize overlays around keyhole's
// own objects. parse is the floor, as in BenchmarkCheckVsParse: reading
// and parsing every YAML file, templates excepted.
func BenchmarkCheckRealShaped(b *testing.B) {
	dir, n := realShaped(b, 500)
	b.ReportMetric(float64(n), "files")
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".json")) && !strings.Contains(p, "/templates/") && !strings.Contains(p, "snippets") && !strings.HasSuffix(p, "config.yaml") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("parse", func(b *testing.B) {
		for b.Loop() {
			synth.ParseFloor(b, files)
		}
	})
	b.Run("check", func(b *testing.B) {
		start := cpuTime(b)
		for b.Loop() {
			var out bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard}
			if code := run(e, []string{"check", dir}); code != exitOK {
				b.Fatalf("exit %d:\n%s", code, out.String())
			}
		}
		// On a shared machine wall time includes waiting for a core; the
		// process's CPU time (user and system, GC included) does not.
		b.ReportMetric((cpuTime(b)-start).Seconds()/float64(b.N), "cpu-s/op")
	})
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCheckHeap loads and compiles the repository of
// BenchmarkCheckVsParse as check does and, with the result still held,
// reports the live heap after a collection (live-MB): what check keeps
// per object, apart from the garbage a run makes on the way. With
// KEYHOLE_BENCH_HEAPPROFILE=FILE it also writes that heap's profile, for
// `go tool pprof -sample_index=inuse_space`.
func BenchmarkCheckHeap(b *testing.B) {
	dir, _ := synth.ForBenchmark(b)
	var live uint64
	for b.Loop() {
		var f checkFlags
		f.namespace = "default"
		c, err := pipeline.Check(f.options(&env{stdin: strings.NewReader("")}, []string{dir}))
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		live = ms.HeapAlloc
		if p := os.Getenv("KEYHOLE_BENCH_HEAPPROFILE"); p != "" {
			out, err := os.Create(p)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.Lookup("heap").WriteTo(out, 0); err != nil {
				b.Fatal(err)
			}
			if err := out.Close(); err != nil {
				b.Fatal(err)
			}
		}
		runtime.KeepAlive(c)
	}
	b.ReportMetric(float64(live)/(1<<20), "live-MB")
}
