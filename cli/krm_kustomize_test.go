//go:build e2e

package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestKRMThroughKustomize runs `keyhole render --krm` as an exec KRM
// function inside a real kustomize build (krusty, with exec functions
// enabled, as `kustomize build --enable-alpha-plugins --enable-exec`
// does), and checks it yields the same objects as `keyhole render -o`
// built by the machine's `kubectl kustomize`, plus the Secret it passes
// through.
func TestKRMThroughKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is not on PATH: make test-deps explains how to install it")
	}
	bin := filepath.Join(t.TempDir(), "keyhole")
	build := exec.Command("go", "build", "-o", bin, "../cmd/keyhole")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// A kustomization over the example's inputs, with keyhole as a
	// transformer.
	dir := t.TempDir()
	var resources []string
	inputs, _ := filepath.Glob("../examples/github-acme/*.yaml")
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(in)
		resources = append(resources, name)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fn := `apiVersion: keyhole.dev/v1alpha1
kind: Render
metadata:
  name: keyhole
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: ` + bin + `
        args: [render, --krm]
`
	k := "resources:\n  - " + strings.Join(resources, "\n  - ") + "\ntransformers:\n  - keyhole-fn.yaml\n"
	write(t, filepath.Join(dir, "keyhole-fn.yaml"), fn)
	write(t, filepath.Join(dir, "kustomization.yaml"), k)

	opts := krusty.MakeDefaultOptions()
	opts.PluginConfig = types.EnabledPluginConfig(types.BploUseStaticallyLinked)
	opts.PluginConfig.FnpLoadingOptions.EnableExec = true
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build through the KRM function: %v", err)
	}
	viaKRM, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}

	// The same example rendered to a directory and built by kubectl.
	out := filepath.Join(t.TempDir(), "out")
	var stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stderr, stderr: &stderr}
	if code := run(e, []string{"render", "-o", out, "../examples/github-acme"}); code != exitOK {
		t.Fatalf("render -o: exit %d\n%s", code, stderr.String())
	}
	viaDir, err := exec.Command(kubectl, "kustomize", out).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}

	got, want := objects(t, viaKRM), objects(t, viaDir)
	if _, ok := got["Secret/agents/acme-github-token"]; !ok {
		t.Error("the KRM function dropped the Secret the cluster still needs")
	}
	delete(got, "Secret/agents/acme-github-token")
	if !slices.Equal(keys(got), keys(want)) {
		t.Fatalf("objects through the KRM function:\n%s\nobjects from render -o and kubectl kustomize:\n%s", strings.Join(keys(got), "\n"), strings.Join(keys(want), "\n"))
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s differs:\nthrough the KRM function:\n%s\nfrom render -o:\n%s", id, got[id], w)
		}
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// objects maps Kind/namespace/name of every object in a YAML stream to
// the object re-encoded with sorted keys, so layout does not matter.
func objects(t *testing.T, stream []byte) map[string]string {
	t.Helper()
	m := map[string]string{}
	dec := yaml.NewDecoder(bytes.NewReader(stream))
	for {
		var o map[string]any
		if err := dec.Decode(&o); err != nil {
			break
		}
		md, _ := o["metadata"].(map[string]any)
		kind, _ := o["kind"].(string)
		name, _ := md["name"].(string)
		ns, _ := md["namespace"].(string)
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		m[kind+"/"+ns+"/"+name] = string(b)
	}
	return m
}
