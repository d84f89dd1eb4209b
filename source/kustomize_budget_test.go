package source

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestKustomizeBudget checks that a build past one of the limits is
// refused before kustomize works on it, with a message that says which
// limit, and that a build under them is built.
func TestKustomizeBudget(t *testing.T) {
	configMaps := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\ndata:\n  a: b\n", i)
		}
		return b.String()
	}
	bigMapping := func(keys int) string {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n")
		for i := range keys {
			fmt.Fprintf(&b, "  k%d: v\n", i)
		}
		return b.String()
	}
	envLines := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "K%d=v\n", i)
		}
		return b.String()
	}
	half := MaxKustomizeObjects / 2
	tests := map[string]struct {
		files map[string]string
		msg   string // the refusal's message part; "" means it builds
	}{
		"objects over the limit in one file": {
			files: map[string]string{"k/kustomization.yaml": "resources: [r.yaml]\n", "k/r.yaml": configMaps(MaxKustomizeObjects + 1)},
			msg:   fmt.Sprintf("the build has read %d objects; keyhole builds at most %d objects", MaxKustomizeObjects+1, MaxKustomizeObjects),
		},
		"objects over the limit across a base": {
			files: map[string]string{
				"k/kustomization.yaml":    "resources: [r.yaml, ../base]\n",
				"k/r.yaml":                configMaps(half + 1),
				"base/kustomization.yaml": "resources: [r.yaml]\nnamePrefix: base-\n",
				"base/r.yaml":             configMaps(half),
			},
			msg: fmt.Sprintf("keyhole builds at most %d objects in one kustomization", MaxKustomizeObjects),
		},
		"a mapping over the key limit": {
			files: map[string]string{"k/kustomization.yaml": "resources: [r.yaml]\n", "k/r.yaml": bigMapping(MaxKustomizeMappingKeys + 1)},
			msg:   fmt.Sprintf("a mapping with %d keys; keyhole hands kustomize at most %d keys", MaxKustomizeMappingKeys+1, MaxKustomizeMappingKeys),
		},
		"an env file over the line limit": {
			files: map[string]string{"k/kustomization.yaml": "configMapGenerator:\n- name: env\n  envs: [e.env]\n", "k/e.env": envLines(MaxKustomizeTextLines + 1)},
			msg:   fmt.Sprintf("%d lines; keyhole hands kustomize at most %d lines", MaxKustomizeTextLines+1, MaxKustomizeTextLines),
		},
		"a generator reading one file past the byte limit": {
			files: map[string]string{"k/kustomization.yaml": bigGenerator(100), "k/big.txt": strings.Repeat("x", 1<<20)},
			msg:   fmt.Sprintf("; keyhole hands one kustomize build at most %d MiB, since what it generates is made of what it reads", MaxKustomizeReadBytes>>20),
		},
		"under every limit": {
			files: map[string]string{
				"k/kustomization.yaml": "resources: [r.yaml]\nconfigMapGenerator:\n- name: env\n  envs: [e.env]\n",
				"k/r.yaml":             configMaps(200) + "---\n" + bigMapping(500),
				"k/e.env":              envLines(500),
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			start := time.Now()
			docs, diags, err := testLoad([]string{"k"}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the build took %v", d)
			}
			if tc.msg == "" {
				if len(diags) != 0 || len(docs) != 202 {
					t.Fatalf("%d documents, diagnostics %v; want 202 and none", len(docs), diags)
				}
				return
			}
			if len(docs) != 0 || len(diags) != 1 || diags[0].Code != CodeKustomizeBuildFailed || !strings.Contains(diags[0].Message, tc.msg) {
				t.Fatalf("%d documents, diagnostics %v; want one %s saying %q", len(docs), diags, CodeKustomizeBuildFailed, tc.msg)
			}
		})
	}
}

// bigGenerator is a kustomization whose ConfigMapGenerator holds big.txt
// n times.
func bigGenerator(n int) string {
	var b strings.Builder
	b.WriteString("configMapGenerator:\n- name: big\n  files:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - f%d=big.txt\n", i)
	}
	return b.String()
}

// configMapFile is n ConfigMaps in one multi-document file.
func configMapFile(n int) string {
	var r strings.Builder
	for i := range n {
		fmt.Fprintf(&r, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\ndata:\n  a: b\n", i)
	}
	return r.String()
}

// BenchmarkKustomizeBuild measures one build of n ConfigMaps in one file,
// loaded as keyhole loads a kustomization, up to the object limit: the
// figures behind MaxKustomizeObjects (docs/inputs.md). Compare with
// BenchmarkKrustyAlone, the same builds by kustomize alone. Run with
// -benchtime 1x; the larger sizes take seconds.
func BenchmarkKustomizeBuild(b *testing.B) {
	for _, n := range []int{300, 1000, MaxKustomizeObjects} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			writeFiles(b, dir, map[string]string{"k/kustomization.yaml": "resources: [r.yaml]\n", "k/r.yaml": configMapFile(n)})
			for b.Loop() {
				docs, diags, err := testLoad([]string{"k"}, Options{Dir: dir})
				if err != nil || len(diags) != 0 || len(docs) != n {
					b.Fatalf("%d documents, %v, %v", len(docs), diags, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}

// BenchmarkKrustyAlone is BenchmarkKustomizeBuild's builds done by
// kustomize's krusty alone, from an in-memory file system, with nothing
// of keyhole's around them: it shows that the time growing with the
// square of the objects of one build is kustomize's own.
func BenchmarkKrustyAlone(b *testing.B) {
	for _, n := range []int{300, 1000, MaxKustomizeObjects} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			fs := filesys.MakeFsInMemory()
			if err := fs.WriteFile("/k/kustomization.yaml", []byte("resources: [r.yaml]\n")); err != nil {
				b.Fatal(err)
			}
			if err := fs.WriteFile("/k/r.yaml", []byte(configMapFile(n))); err != nil {
				b.Fatal(err)
			}
			opts := krusty.MakeDefaultOptions()
			opts.AddManagedbyLabel = false
			for b.Loop() {
				m, err := krusty.MakeKustomizer(opts).Run(fs, "/k")
				if err != nil || m.Size() != n {
					b.Fatalf("%v objects, %v", m, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}

// BenchmarkKustomizeRoots measures a walk that finds many kustomization
// roots, each a build of 300 Secrets: 300, 3,000 and 30,000 objects built
// in all. Each root stays far under the object limit, so the total grows
// with the number of roots, not its square.
func BenchmarkKustomizeRoots(b *testing.B) {
	const perRoot = 300
	for _, roots := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("objects=%d", roots*perRoot), func(b *testing.B) {
			dir := b.TempDir()
			files := map[string]string{}
			for r := range roots {
				var s strings.Builder
				for i := range perRoot {
					fmt.Fprintf(&s, "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s-%d\n  namespace: ns-%d\nstringData:\n  token: x\n", i, r)
				}
				files[fmt.Sprintf("repo/app-%03d/kustomization.yaml", r)] = "resources: [secrets.yaml]\n"
				files[fmt.Sprintf("repo/app-%03d/secrets.yaml", r)] = s.String()
			}
			writeFiles(b, dir, files)
			for b.Loop() {
				docs, diags, err := testLoad([]string{"repo"}, Options{Dir: dir})
				if err != nil || len(diags) != 0 || len(docs) != roots*perRoot {
					b.Fatalf("%d documents, %v, %v", len(docs), diags, err)
				}
			}
			b.ReportMetric(float64(roots*perRoot)*float64(b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}
