package pipeline

import (
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"keyhole.dev/keyhole/bench/gen/synth"
	"keyhole.dev/keyhole/render"
)

// checkCost is what one Check of a generated repository cost.
type checkCost struct {
	// alloc is every byte Check allocated, garbage included.
	alloc uint64
	// peakLive is the largest live heap a collection found while Check
	// ran, what it held at once.
	peakLive uint64
}

// measureCheck checks a repository of n Connections made as the
// benchmarks make theirs (bench/gen: n/10 agents), and returns its cost.
// The collector runs at GOGC=10 meanwhile, so that the live heap is
// taken every tenth of growth and its peak is not missed between two
// collections far apart.
func measureCheck(t *testing.T, n int) checkCost {
	t.Helper()
	return measure(t, n, func(dir string) any {
		// As keyhole check runs by default, in the text format: every
		// check, and no plan.
		c, err := Check(Options{Paths: []string{dir}, DefaultNamespace: "default", CountSuppressed: true, DiagnosticsOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if c.Result.Diagnostics.HasErrors() {
			t.Fatalf("diagnostics:\n%v", c.Result.Diagnostics)
		}
		return c
	})
}

// measureRender is measureCheck for render -o: the check, and every
// sandbox rendered and written to a directory.
func measureRender(t *testing.T, n int) checkCost {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	return measure(t, n, func(dir string) any {
		c, err := Check(Options{Paths: []string{dir}, DefaultNamespace: "default", CountSuppressed: true, SandboxImage: "example.com/sandbox:1"})
		if err != nil {
			t.Fatal(err)
		}
		renderer, err := render.ForTarget(render.TargetKubernetes)
		if err != nil {
			t.Fatal(err)
		}
		w := render.NewDirWriter(out)
		units, err := RenderTo(&c, render.Options{}, renderer, "", w)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		return units
	})
}

// measure generates a repository of n Connections and returns what run
// cost on it; what run returns is held until the cost is taken.
func measure(t *testing.T, n int, run func(dir string) any) checkCost {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if _, err := synth.Generate(dir, synth.Options{Connections: n, Agents: n / 10}); err != nil {
		t.Fatal(err)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	done, peak := make(chan struct{}), make(chan uint64)
	go func() {
		var peakSeen uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peakSeen = max(peakSeen, sample[0].Value.Uint64())
			select {
			case <-done:
				peak <- peakSeen
				return
			case <-tick.C:
			}
		}
	}()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	kept := run(dir)
	runtime.ReadMemStats(&after)
	// The last collection's count, with the result still held.
	runtime.GC()
	runtime.KeepAlive(kept)
	close(done)
	return checkCost{alloc: after.TotalAlloc - before.TotalAlloc, peakLive: <-peak}
}

// TestCheckMemoryPerConnection holds check's cost per Connection, on the
// repository the memory budget is stated for (docs/benchmarks.md: 10,000
// Connections within 100 MiB of peak RSS, 100,000 within 400 MB), to
// bounds with room for noise: what a check of 3,000 Connections costs
// beyond one of 500, per Connection added. The fixed part (the schemas,
// the binary) is left out, and the per-Connection part is what grows
// with a repository: at 100,000 Connections each kilobyte of peak live
// heap is 100 MB, and the soft limit keyhole sets from the input's size
// (internal/memlimit.ForInput) holds only about 10% above what is live
// there. Bytes allocated count too: garbage paces the
// collector, and a loop that allocates per finding or per byte of input
// shows there first.
func TestCheckMemoryPerConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: it generates and checks repositories of 500 and 3,000 Connections, seconds of work; make test runs without -short")
	}
	const small, large = 500, 3000
	a, b := measureCheck(t, small), measureCheck(t, large)
	perAlloc := float64(b.alloc-a.alloc) / (large - small)
	perLive := (float64(b.peakLive) - float64(a.peakLive)) / (large - small)
	t.Logf("per Connection: %.0f bytes allocated, %.0f bytes of peak live heap (%d and %d Connections: %.1f and %.1f MB allocated, %.1f and %.1f MB peak live)",
		perAlloc, perLive, small, large, float64(a.alloc)/1e6, float64(b.alloc)/1e6, float64(a.peakLive)/1e6, float64(b.peakLive)/1e6)
	const maxAlloc, maxLive = 85_000, 2_300
	if perAlloc > maxAlloc {
		t.Errorf("check allocates %.0f bytes per Connection, over %d", perAlloc, maxAlloc)
	}
	if perLive > maxLive {
		t.Errorf("check's peak live heap grows %.0f bytes per Connection, over %d", perLive, maxLive)
	}
}

// TestRenderMemoryPerConnection holds render -o to what check costs
// (docs/benchmarks.md: render's peak RSS within 1.5 times check's), as
// TestCheckMemoryPerConnection measures it: the rendered files are
// written as each sandbox is rendered, so what render holds at once
// beyond check's result is the plans and the sandboxes being rendered
// (2,800 bytes per Connection in all, against 1,900 for check, which
// builds no plan), not
// every file (11,300 bytes per Connection when render held them all).
func TestRenderMemoryPerConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: it generates, checks and renders repositories of 500 and 3,000 Connections, seconds of work; make test runs without -short")
	}
	const small, large = 500, 3000
	a, b := measureRender(t, small), measureRender(t, large)
	perLive := (float64(b.peakLive) - float64(a.peakLive)) / (large - small)
	t.Logf("per Connection: %.0f bytes of peak live heap (%d and %d Connections: %.1f and %.1f MB peak live)",
		perLive, small, large, float64(a.peakLive)/1e6, float64(b.peakLive)/1e6)
	const maxLive = 3_400
	if perLive > maxLive {
		t.Errorf("render's peak live heap grows %.0f bytes per Connection, over %d", perLive, maxLive)
	}
}
