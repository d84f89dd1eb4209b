package diff

import (
	"io"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/bench/gen/synth"
	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/render"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/engines"
	"keyhole.dev/keyhole/source/fixture"
)

// benchSides renders bench/gen's synthetic repository twice: as it is,
// and as a pull request that touches every sandbox would leave it (each
// sandbox's first injected host loses its rules, and the proxy image is
// bumped), the worst case for a diff: every sandbox's proxy config,
// ConfigMap and Deployment change.
func benchSides(b *testing.B) (base, head Side) {
	b.Helper()
	dir, _ := synth.ForBenchmark(b)
	docs, _, err := source.Load([]string{"."}, source.Options{Engines: engines.All(), Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	v := fixture.Validator(b)
	res := compiler.Compile(docs, v, compiler.Options{})
	if res.Diagnostics.HasErrors() {
		b.Fatalf("the synthetic repository does not check: %v", res.Diagnostics)
	}
	opts := render.Options{DefaultSandboxImage: "ghcr.io/acme/sandbox:1"}
	// The repository's deploy units (its loose files and its overlays)
	// hold sandboxes of distinct namespaces: one plan of them all is
	// what one cluster would run.
	var baseSandboxes []compiler.Sandbox
	for _, u := range res.Units {
		baseSandboxes = append(baseSandboxes, u.Plan.Sandboxes...)
	}
	bf, err := render.Render(compiler.Plan{Sandboxes: baseSandboxes}, opts)
	if err != nil {
		b.Fatal(err)
	}
	plan := compiler.Plan{Sandboxes: slices.Clone(baseSandboxes)}
	for i := range plan.Sandboxes {
		sb := &plan.Sandboxes[i]
		sb.Proxy.Hosts = slices.Clone(sb.Proxy.Hosts)
		if len(sb.Proxy.Hosts) > 0 {
			sb.Proxy.Hosts[0].Rules = nil
		}
	}
	opts.ProxyImage = "ghcr.io/keyhole-dev/keyhole-proxy:v0.2.0"
	hf, err := render.Render(plan, opts)
	if err != nil {
		b.Fatal(err)
	}
	return Side{Ref: Ref{Name: "base"}, Files: bf, Sandboxes: baseSandboxes},
		Side{Ref: Ref{Name: "head"}, Files: hf, Sandboxes: plan.Sandboxes}
}

// BenchmarkCompare times comparing two renders of the synthetic
// repository (KEYHOLE_BENCH_N Connections; see bench/gen), and writing the
// text and markdown reports of the result.
func BenchmarkCompare(b *testing.B) {
	base, head := benchSides(b)
	b.Run("compare", func(b *testing.B) {
		var r Result
		for b.Loop() {
			r = Compare(base, head)
		}
		b.ReportMetric(float64(len(r.Resources)), "resources")
		b.ReportMetric(float64(len(r.Sandboxes)), "sandboxes")
		if len(r.Sandboxes) == 0 {
			b.Fatal("no sandbox changed: the benchmark compares nothing")
		}
	})
	b.Run("policies", func(b *testing.B) {
		// The per-sandbox summary and access verdicts alone, which
		// Compare includes.
		var n int
		for b.Loop() {
			n = len(comparePolicies(base, head))
		}
		b.ReportMetric(float64(n), "sandboxes")
	})
	b.Run("access", func(b *testing.B) {
		// Each sandbox's access comparison on its own, without the
		// cache Compare shares between sandboxes.
		bs, hs := sandboxes(base), sandboxes(head)
		for b.Loop() {
			for id, s := range bs {
				if a := CompareAccess(&s.Proxy, &hs[id].Proxy); a.Verdict == VerdictUndecided {
					b.Fatalf("%s: undecided: %s", id, a.Undecided)
				}
			}
		}
	})
	r := Compare(base, head)
	for _, f := range []string{FormatText, FormatMarkdown, FormatJSON} {
		b.Run("write-"+f, func(b *testing.B) {
			for b.Loop() {
				if err := Write(io.Discard, f, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGenerated times Compare and the markdown report on 4,000
// sandboxes: TestMarkdownLimitGenerated's repository, its sandboxes
// copied eight times, each copy on its own hosts.
func BenchmarkGenerated(b *testing.B) {
	base, head := generatedChange(b)
	base, head = copies(base, 8, true), copies(head, 8, true)
	b.Run("compare", func(b *testing.B) {
		var r Result
		for b.Loop() {
			r = Compare(base, head)
		}
		b.ReportMetric(float64(len(r.Sandboxes)), "sandboxes")
	})
	r := Compare(base, head)
	b.Run("write-markdown", func(b *testing.B) {
		var n int
		for b.Loop() {
			var w strings.Builder
			if err := Write(&w, FormatMarkdown, r); err != nil {
				b.Fatal(err)
			}
			n = w.Len()
		}
		b.ReportMetric(float64(n), "bytes")
	})
}
