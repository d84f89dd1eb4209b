package cli

import (
	"fmt"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/render"
)

func runRender(e *env, args []string) int {
	fs := newFlags(e, "render", "[flags] (-o DIR | --stdout) [PATH...]")
	var f checkFlags
	f.register(fs)
	out := fs.String("o", "", "write the rendered files to `DIR` (replaced atomically; never written when the check finds errors)")
	stdout := fs.Bool("stdout", false, "print the Kubernetes objects as one YAML stream, for an Argo CD config management plugin")
	krm := fs.Bool("krm", false, "run as a kustomize KRM function: a ResourceList in on stdin, the rendered ResourceList out")
	var opts render.Options
	registerRenderOptions(fs, &opts)
	target := fs.String("target", render.TargetKubernetes, "what to render: `kubernetes` (sandboxes as plain manifests) or omnia (the omnia.altairalabs.ai resources, for clusters that run the operator)")
	paths, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	renderer, err := render.ForTarget(*target)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole render: --target: %v\n", err)
		return exitUsage
	}
	if n := count(*out != "", *stdout, *krm); n != 1 {
		fmt.Fprintln(e.stderr, "keyhole render: give exactly one of -o DIR, --stdout and --krm")
		return exitUsage
	}
	if _, err := diag.NewPrinter(f.format); err != nil {
		fmt.Fprintf(e.stderr, "keyhole render: %v\n", err)
		return exitUsage
	}
	if *krm {
		if len(paths) > 0 {
			fmt.Fprintln(e.stderr, "keyhole render --krm: reads its inputs from the ResourceList on stdin, not from paths")
			return exitUsage
		}
		return runKRM(e, &f, opts, renderer)
	}
	c, err := load(e, paths, &f)
	if err != nil {
		return fail(e, "render", err)
	}
	files, code, ok := renderChecked(e, &c, f.format, opts, renderer)
	if !ok {
		return code
	}
	if *stdout {
		b, err := render.Stream(files)
		if err != nil {
			return fail(e, "render", err)
		}
		_, err = e.stdout.Write(b)
		if err != nil {
			return fail(e, "render", err)
		}
		return exitOK
	}
	if err := render.WriteDir(*out, files); err != nil {
		return fail(e, "render", err)
	}
	if *target == render.TargetOmnia {
		fmt.Fprintf(e.stderr, "keyhole render: wrote %d files (omnia target) to %s\n", len(files), *out)
		return exitOK
	}
	fmt.Fprintf(e.stderr, "keyhole render: wrote %d files for %s to %s\n", len(files), plural(len(c.result.Plan.Sandboxes), "sandbox", "sandboxes"), *out)
	return exitOK
}

// renderChecked renders a checked input with the target's renderer and
// prints every diagnostic, the compiler's and the target's, once, to
// stderr (the rendered stream may be on stdout). ok is false when nothing
// may be written, with the exit code to return.
func renderChecked(e *env, c *checked, format string, opts render.Options, renderer render.Renderer) ([]render.File, int, bool) {
	var files []render.File
	var rerr error
	if !c.result.Diagnostics.HasErrors() {
		var ds diag.List
		files, ds, rerr = renderer(c.result.Plan, opts)
		c.result.Diagnostics = append(c.result.Diagnostics, ds...)
		c.result.Diagnostics.Sort()
		c.rules = render.OmniaRules()
	}
	if err := report(&env{stdout: e.stderr, stderr: e.stderr}, *c, format); err != nil {
		return nil, fail(e, "render", err), false
	}
	if c.result.Diagnostics.HasErrors() {
		fmt.Fprintln(e.stderr, "keyhole render: nothing written: the check found errors")
		return nil, exitFailed, false
	}
	if rerr != nil {
		return nil, fail(e, "render", rerr), false
	}
	return files, exitOK, true
}

// registerRenderOptions adds the flags that choose what the plan does not
// say, shared by render and diff (whose two sides render alike).
func registerRenderOptions(fs interface {
	StringVar(*string, string, string, string)
	Func(string, string, func(string) error)
}, opts *render.Options) {
	fs.StringVar(&opts.ProxyMode, "proxy-mode", render.ModeSidecar, "run the proxy as a `sidecar` of the sandbox or as its own deployment")
	fs.StringVar(&opts.ProxyImage, "proxy-image", render.DefaultProxyImage, "the egress proxy's container `image`")
	fs.StringVar(&opts.NetInitImage, "netinit-image", render.DefaultNetInitImage, "the `image` of the sidecar pod's transparent-mode init container (iptables and keyhole-proxy)")
	fs.StringVar(&opts.DefaultSandboxImage, "sandbox-image", "", "container `image` for a sandbox whose SandboxClass names none")
	fs.StringVar(&opts.DefaultNamespace, "namespace", "default", "`namespace` of a sandbox whose source names none")
	fs.Func("proxy-resolve", "HOST:PORT:ADDR the proxy connects to ADDR for, as curl --resolve (repeatable)", func(v string) error {
		opts.ProxyResolve = append(opts.ProxyResolve, v)
		return nil
	})
	fs.StringVar(&opts.UpstreamCAConfigMap, "upstream-ca-configmap", "", "ConfigMap `name` whose ca.crt the proxy verifies upstreams with instead of the system roots")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// plan loads, checks and returns the plan, printing diagnostics to
// stderr; ok is false when the check found errors.
func plan(e *env, paths []string, f *checkFlags) (compiler.Plan, int, bool) {
	c, err := load(e, paths, f)
	if err != nil {
		return compiler.Plan{}, fail(e, "explain", err), false
	}
	if c.result.Diagnostics.HasErrors() {
		if err := report(&env{stdout: e.stderr, stderr: e.stderr}, c, "text"); err != nil {
			return compiler.Plan{}, fail(e, "explain", err), false
		}
		fmt.Fprintln(e.stderr, "keyhole explain: the check found errors; fix them first")
		return compiler.Plan{}, exitFailed, false
	}
	return c.result.Plan, exitOK, true
}
