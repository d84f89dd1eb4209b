//go:build e2e

package apiserver

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/render"
	"keyhole.dev/keyhole/schema"
)

// TestRenderedAgentSandboxApply renders every example with --target
// agent-sandbox and applies the rendered directory to a server serving
// agent-sandbox's published CRDs, with strict field validation and no
// warnings, then reads every object back unchanged: a cluster running
// agent-sandbox must accept the SandboxTemplates keyhole writes (its pod
// spec is checked there against the CRD's copy of the Pod schema) and
// the warm pools it carries, beside the proxy's own objects.
func TestRenderedAgentSandboxApply(t *testing.T) {
	for _, ex := range examples(t) {
		t.Run(filepath.Base(ex), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			keyhole(t, "render", "--target", render.TargetAgentSandbox, "-o", out, ex)
			objs, live := applyRendered(t, ex, out, "agent-sandbox")
			templates := 0
			for _, o := range objs {
				if o.apiVersion() == schema.AgentSandboxExtensionsAPIVersion && o.kind() == string(schema.KindSandboxTemplate) {
					templates++
					got := live[o.key()]
					inits, _ := dig(got, "spec", "podTemplate", "spec", "initContainers").([]any)
					var names []string
					for _, c := range inits {
						if m, ok := c.(map[string]any); ok {
							names = append(names, m["name"].(string))
						}
					}
					// The template's own are what follows keyhole's first
					// container of another name.
					own := names[len(names):]
					if i := slices.IndexFunc(names, func(n string) bool { return !strings.HasPrefix(n, "egress-") }); i >= 0 {
						own = names[i:]
					}
					if !keyholeInitsFirst(names, own...) {
						t.Errorf("%s: the server holds init containers %v", o.key(), names)
					}
				}
				if o.kind() == "Deployment" || o.kind() == "NetworkPolicy" {
					t.Errorf("%s: the agent-sandbox target renders no %s", o.key(), o.kind())
				}
			}
			if templates == 0 {
				t.Errorf("%s rendered no SandboxTemplate", ex)
			}
			noSecretValues(t, ex, out, live)
		})
	}
}

// TestExampleAgentSandboxInputsApply applies the agent-sandbox objects
// an example is written in, as written: what keyhole checks against
// agent-sandbox's CRDs, its API server must accept too.
func TestExampleAgentSandboxInputsApply(t *testing.T) {
	ex := filepath.Join(the.repo, "examples", "sigs-agent-sandbox")
	var files []string
	for _, name := range []string{"sandboxtemplate.yaml", "warmpool.yaml"} {
		files = append(files, filepath.Join(ex, name))
	}
	objs := readObjects(t, files...)
	for _, o := range objs {
		if !strings.Contains(o.apiVersion(), "agents.x-k8s.io") {
			t.Fatalf("%s is not an agent-sandbox object", o.key())
		}
	}
	ensureNamespaces(t, objs)
	args := append(slices.Clone(applyArgs), "--dry-run=server")
	for _, f := range files {
		args = append(args, "-f", f)
	}
	_, stderr := mustKubectl(t, nil, args...)
	noWarnings(t, stderr)
}

// keyholeInitsFirst reports whether a pod's init containers are keyhole's
// first (the transparent-mode rules, then the trust bundle's publisher,
// then, after any other of keyhole's egress- containers, the proxy), and
// then exactly the template's own, in order.
func keyholeInitsFirst(names []string, own ...string) bool {
	if len(names) < len(own)+3 || !slices.Equal(names[len(names)-len(own):], own) {
		return false
	}
	ours := names[:len(names)-len(own)]
	for _, n := range ours {
		if !strings.HasPrefix(n, "egress-") {
			return false
		}
	}
	publish, proxy := slices.Index(ours, "egress-trust-publish"), slices.Index(ours, "egress-proxy")
	return ours[0] == "egress-transparent-init" && publish > 0 && proxy > publish
}

// dig walks nested maps.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
