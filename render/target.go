package render

import (
	"fmt"
	"slices"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
)

// Targets: what a render produces. The kubernetes target renders each
// sandbox into the proxy config, env maps and plain manifests; the omnia
// target emits the omnia.altairalabs.ai resources for clusters that run
// the operator, which renders the sandboxes itself; the agent-sandbox
// target (TargetAgentSandbox) writes the sandbox pod into agent-sandbox's
// SandboxTemplate.
const (
	TargetKubernetes = "kubernetes"
	TargetOmnia      = "omnia"
)

// Renderer renders a Plan for one target. Diagnostics are the target's
// own findings, printed like the compiler's; when they hold an error the
// files are nil and nothing must be written.
type Renderer func(p compiler.Plan, opts Options) ([]File, diag.List, error)

// targets maps each target name to its renderer.
func targets() map[string]Renderer {
	return map[string]Renderer{
		TargetKubernetes: func(p compiler.Plan, opts Options) ([]File, diag.List, error) {
			files, err := Render(p, opts)
			return files, nil, err
		},
		TargetOmnia:        putting(RenderOmnia),
		TargetAgentSandbox: putting(RenderAgentSandbox),
	}
}

// Targets lists the target names, sorted, for usage messages.
func Targets() []string {
	names := make([]string, 0, 3)
	for n := range targets() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// putting is r, which makes its files all at once, giving them to
// Options.Put when it is set.
func putting(r Renderer) Renderer {
	return func(p compiler.Plan, opts Options) ([]File, diag.List, error) {
		put := opts.Put
		opts.Put = nil
		files, ds, err := r(p, opts)
		if err == nil {
			files, err = putAll(files, put)
		}
		return files, ds, err
	}
}

// ForTarget returns the renderer of a target; an unknown name is an
// ErrInvalidOptions error listing the valid ones.
func ForTarget(name string) (Renderer, error) {
	r, ok := targets()[name]
	if !ok {
		return nil, fmt.Errorf("%w: target %q (want one of: %s)", ErrInvalidOptions, name, strings.Join(Targets(), ", "))
	}
	return r, nil
}
