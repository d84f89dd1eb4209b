//go:build e2e

package render

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestKubectlKustomize builds every rendered directory, of both targets, with the machine's
// `kubectl kustomize` and checks it yields exactly the rendered objects.
// Run with: go test -tags e2e ./render/
func TestKubectlKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is not on PATH (%v): install kubectl 1.27 or newer (it embeds kustomize v5), e.g. the `kubectl` package from the Kubernetes apt repository; Debian's kubernetes-client is too old", err)
	}
	renders := map[string][]File{}
	for _, mode := range modes {
		renders["plan-"+mode] = mustRender(t, twoSandboxPlan(), Options{ProxyMode: mode, DefaultSandboxImage: "ghcr.io/acme/sandbox:1.0"})
	}
	for _, ex := range examples(t) {
		for _, mode := range modes {
			renders[ex+"-"+mode] = mustRender(t, compileDir(t, filepath.Join(examplesDir, ex)), Options{ProxyMode: mode})
		}
		renders[ex+"-"+TargetOmnia], _ = mustRenderTarget(t, RenderOmnia, compileDir(t, filepath.Join(examplesDir, ex)))
	}
	for name, files := range renders {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			if err := WriteDir(dir, files); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, kubectl, "kustomize", dir)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("kubectl kustomize: %v\n%s", err, stderr.Bytes())
			}
			got := objectKeys(t, stdout.Bytes())
			var want []string
			for _, o := range objects(t, files) {
				want = append(want, key(o))
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("kustomize built\n%v\nwant\n%v", got, want)
			}
		})
	}
}

func key(o obj) string {
	md := o["metadata"].(obj)
	ns, _ := md["namespace"].(string)
	return o["kind"].(string) + "/" + ns + "/" + md["name"].(string)
}

func objectKeys(t *testing.T, stream []byte) []string {
	t.Helper()
	var keys []string
	for _, o := range streamObjects(t, stream) {
		keys = append(keys, key(o))
	}
	slices.Sort(keys)
	return keys
}
