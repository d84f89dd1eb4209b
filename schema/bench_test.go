package schema

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"github.com/santhosh-tekuri/jsonschema/v5"
	"go.yaml.in/yaml/v3"
)

// benchDocs returns n distinct, valid Connections: different names, hosts
// and rules, so that no cache makes one document stand for all.
func benchDocs(n int) [][]byte {
	docs := make([][]byte, n)
	for i := range docs {
		docs[i] = fmt.Appendf(nil, `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: conn-%[1]d
  namespace: team-%[2]d
  labels:
    app.kubernetes.io/name: conn-%[1]d
spec:
  hosts: [api%[1]d.example.com, git%[1]d.example.com]
  credential:
    kind: secret
    secretRef:
      name: token-%[1]d
  placement:
    inject:
      - hosts: [api%[1]d.example.com]
        header: Authorization
        value: "Bearer {{ .token }}"
        placeholderEnv: [TOKEN_%[1]d]
        rules:
          - methods: [GET, HEAD]
            pathPrefixes: [/repos/acme/w%[1]d]
          - methods: [POST]
            pathPrefixes: [/repos/acme/w%[1]d/pulls]
      - hosts: [git%[1]d.example.com]
        basic:
          usernameKey: user
          passwordKey: token
`, i, i%17)
	}
	return docs
}

func parseBench(b *testing.B, src []byte) *yaml.Node {
	var n yaml.Node
	if err := yaml.Unmarshal(src, &n); err != nil {
		b.Fatal(err)
	}
	return &n
}

// BenchmarkConnection measures, per Connection document, what the design
// compares: parsing YAML into nodes (the floor), and validating the parsed
// node with the generated JSON Schema (what Validate does) or by unifying
// with the CUE definition directly (the alternative it replaces).
func BenchmarkConnection(b *testing.B) {
	const n = 1000
	docs := benchDocs(n)
	nodes := make([]*yaml.Node, n)
	for i, d := range docs {
		nodes[i] = parseBench(b, d)
	}
	v := newValidator(b)

	b.Run("parse", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			parseBench(b, docs[i%n])
		}
	})
	b.Run("parse+validate/jsonschema", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if vs := v.Validate(KindConnection, parseBench(b, docs[i%n])); len(vs) > 0 {
				b.Fatal(vs)
			}
		}
	})
	b.Run("validate/jsonschema", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if vs := v.Validate(KindConnection, nodes[i%n]); len(vs) > 0 {
				b.Fatal(vs)
			}
		}
	})
	// What Validate's fast path saves: the same schema, with references
	// (original) and written out in place (inlined), conversion included.
	for _, sch := range []struct {
		name string
		s    *jsonschema.Schema
	}{{"original", v.schemas[KindConnection]}, {"inlined", v.inlined[KindConnection]}} {
		s := sch.s
		b.Run("validate/jsonschema-"+sch.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				c := converter{}
				if err := s.Validate(c.value(nodes[i%n], 0)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("validate/cue", func(b *testing.B) {
		ctx := cuecontext.New()
		pkg := ctx.CompileBytes(CUE())
		if err := pkg.Err(); err != nil {
			b.Fatal(err)
		}
		def := pkg.LookupPath(cue.ParsePath("#Connection"))
		for i := 0; b.Loop(); i++ {
			c := converter{}
			val := c.value(nodes[i%n], 0)
			if err := def.Unify(ctx.Encode(val)).Validate(cue.Concrete(true)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkInvalidConnection measures the failure path: building readable
// violations costs more than passing, and a repository with many broken
// documents must still check quickly.
func BenchmarkInvalidConnection(b *testing.B) {
	src := []byte(`apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: github-acme
  namspace: agents
spec:
  hsots: [api.github.com]
  credential: {kind: secret, secretRef: {}}
  placement:
    inject:
      - hosts: [API.github.com]
        rules: [{methods: [FETCH], pathPrefixes: [repos]}]
`)
	n := parseBench(b, src)
	v := newValidator(b)
	for b.Loop() {
		if vs := v.Validate(KindConnection, n); len(vs) == 0 {
			b.Fatal("no violations")
		}
	}
}

// cpuTime is the process's user+system CPU time. The ratio benchmark uses
// it rather than wall time because the machines it runs on are shared:
// waiting for a core is not work.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCheck10k is the design's bar: checking 10,000 Connections
// should cost at most 5x parsing them. It reports CPU time per document
// for parsing alone and for parsing plus validating, and their ratio.
func BenchmarkCheck10k(b *testing.B) {
	const n = 10000
	docs := benchDocs(n)
	v := newValidator(b)
	parseCheck(b, docs, func(n *yaml.Node) {
		if vs := v.Validate(KindConnection, n); len(vs) > 0 {
			b.Fatal(vs)
		}
	})
}

// parseCheck reports the CPU time per document of parsing docs alone
// and of parsing and checking them with check, and their ratio.
func parseCheck(b *testing.B, docs [][]byte, check func(*yaml.Node)) {
	var parse, checked time.Duration
	for b.Loop() {
		t0 := cpuTime(b)
		for _, d := range docs {
			parseBench(b, d)
		}
		t1 := cpuTime(b)
		for _, d := range docs {
			check(parseBench(b, d))
		}
		t2 := cpuTime(b)
		parse += t1 - t0
		checked += t2 - t1
	}
	n := len(docs)
	b.ReportMetric(float64(parse.Microseconds())/float64(b.N*n), "parse-µs/doc")
	b.ReportMetric(float64(checked.Microseconds())/float64(b.N*n), "check-µs/doc")
	b.ReportMetric(float64(checked)/float64(parse), "check/parse")
}

// BenchmarkCheck1kCUE is BenchmarkCheck10k's ratio for the alternative:
// unifying each parsed document with the CUE definition. It runs on 1,000
// documents because it is an order of magnitude slower.
func BenchmarkCheck1kCUE(b *testing.B) {
	const n = 1000
	docs := benchDocs(n)
	ctx := cuecontext.New()
	pkg := ctx.CompileBytes(CUE())
	if err := pkg.Err(); err != nil {
		b.Fatal(err)
	}
	def := pkg.LookupPath(cue.ParsePath("#Connection"))
	parseCheck(b, docs, func(n *yaml.Node) {
		c := converter{}
		val := c.value(n, 0)
		if err := def.Unify(ctx.Encode(val)).Validate(cue.Concrete(true)); err != nil {
			b.Fatal(err)
		}
	})
}
