package cli

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/pipeline"
	"keyhole.dev/keyhole/render"
)

func runRender(e *env, args []string) int {
	fs := newFlags(e, "render", "[flags] (-o DIR | --stdout) [PATH...]\n       keyhole render --krm < resource-list.yaml")
	var f checkFlags
	f.register(fs)
	out := fs.String("o", "", "write the rendered files to `DIR` (replaced atomically; never written when the check finds errors); with several deploy units, each to DIR/<unit>")
	stdout := fs.Bool("stdout", false, "print the Kubernetes objects as one YAML stream, for an Argo CD config management plugin (every deploy unit's, unless two render the same object: see --unit)")
	argocd := fs.Bool("argocd", false, "with --stdout, run as Argo CD's config management plugin: read the repository whose root is the working directory less $ARGOCD_APP_SOURCE_PATH, and print the deploy unit of the Application $ARGOCD_APP_NAME (examples/argocd)")
	krm := fs.Bool("krm", false, "run as a kustomize KRM function: a ResourceList in on stdin, the rendered ResourceList out")
	var opts render.Options
	registerRenderOptions(fs, &opts)
	unit := registerUnit(fs)
	target := fs.String("target", render.TargetKubernetes, "what to render: `kubernetes` (sandboxes as plain manifests), omnia (the omnia.altairalabs.ai resources, for clusters that run the operator) or agent-sandbox (the proxy in the repository's agent-sandbox SandboxTemplates)")
	paths, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	opts.DefaultNamespace, opts.DefaultSandboxImage = f.namespace, f.sandboxImage
	renderer, err := render.ForTarget(*target)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole render: --target: %s\n", errText(err))
		return exitUsage
	}
	f.objects = *target == render.TargetOmnia || *target == render.TargetAgentSandbox
	f.noImages = *target == render.TargetOmnia
	if err := omniaTakesNoProxyFlags(fs, *target); err != nil {
		fmt.Fprintf(e.stderr, "keyhole render: %s\n", errText(err))
		return exitUsage
	}
	if n := count(*out != "", *stdout, *krm); n != 1 {
		fmt.Fprintln(e.stderr, "keyhole render: give exactly one of -o DIR, --stdout and --krm")
		return exitUsage
	}
	if err := f.validate(); err != nil {
		fmt.Fprintf(e.stderr, "keyhole render: %s\n", errText(err))
		return exitUsage
	}
	if *krm {
		if len(paths) > 0 {
			fmt.Fprintln(e.stderr, "keyhole render --krm: reads its inputs from the ResourceList on stdin, not from paths")
			return exitUsage
		}
		return runKRM(e, &f, opts, renderer, *target)
	}
	var app *argoApp
	if !*argocd {
		// Argo CD's plugin reads the repository above the working
		// directory, whose size the paths do not give.
		e.limitMemory(paths)
	}
	popts := f.countingSuppressed(f.options(e, paths))
	if *argocd {
		if !*stdout || len(paths) > 0 || *unit != "" {
			fmt.Fprintln(e.stderr, "keyhole render: --argocd takes --stdout, and no paths or --unit: Argo CD's environment names the Application;", argoByHand)
			return exitUsage
		}
		a, err := argoPluginApp(e)
		if err != nil {
			fmt.Fprintf(e.stderr, "keyhole render: --argocd: %s\n", errText(err))
			return exitUsage
		}
		app = &a
		// Paths are reported relative to the root, as check in CI
		// reports them.
		popts.Paths, popts.Root, popts.Dir = []string{a.root}, a.root, a.root
	}
	c, err := pipeline.Check(popts)
	if err != nil {
		return fail(e, "render", err)
	}
	if app != nil {
		name, ok, err := app.unit(c.Result.Units)
		if err != nil {
			fmt.Fprintf(e.stderr, "keyhole render: --argocd: %s\n", errText(err))
			return exitUsage
		}
		if ok {
			*unit = name
		} else {
			// No Application of the repository renders this path with
			// keyhole's plugin: the Application was given to Argo CD
			// from elsewhere, and its path is what there is to render.
			popts.Paths = []string{app.dir}
			if c, err = pipeline.Check(popts); err != nil {
				return fail(e, "render", err)
			}
		}
	}
	// -o writes each file as it is rendered, into a directory staged
	// beside DIR that replaces it once every unit is rendered and the
	// check found no errors: the files are never all held at once.
	var w *render.DirWriter
	if *out != "" {
		w = render.NewDirWriter(*out)
	}
	units, code, ok := renderChecked(e, &c, &f, opts, renderer, unit, w)
	if !ok {
		return code
	}
	if *stdout {
		err := pipeline.WriteStream(e.raw(), units)
		if errors.Is(err, errUsage) {
			fmt.Fprintf(e.stderr, "keyhole render: --stdout: %s\n", errText(err))
			return exitUsage
		}
		if err != nil {
			return fail(e, "render", err)
		}
		return exitOK
	}
	written, err := w.Commit()
	if err != nil {
		return fail(e, "render", err)
	}
	where := *out
	if len(units) > 1 || units[0].DirFixed && units[0].Dir != "" {
		where = fmt.Sprintf("%s, one directory per deploy unit (%s)", *out, unitNames(units))
	}
	if *target == render.TargetOmnia {
		fmt.Fprintf(e.stderr, "keyhole render: wrote %d files (omnia target) to %s\n", written, where)
		return exitOK
	}
	sandboxes := 0
	for _, u := range units {
		sandboxes += len(u.Plan.Sandboxes)
	}
	fmt.Fprintf(e.stderr, "keyhole render: wrote %d files for %s to %s\n", written, plural(sandboxes, "sandbox", "sandboxes"), where)
	return exitOK
}

// registerUnit adds --unit, shared by the commands that render or explain.
func registerUnit(fs *flag.FlagSet) *string {
	return fs.String("unit", "", "the deploy `unit` to render or explain, as check names it: a kustomization root's directory (e.g. apps/production), a Flux Kustomization as flux:NAMESPACE/NAME, or \"(loose files)\" for the files outside any kustomization; every unit when empty")
}

// renderChecked renders each deploy unit of a checked input with the
// target's renderer (only the one --unit names, when it names one) and
// prints every diagnostic, the compiler's and the target's, once, to
// stderr (the rendered stream may be on stdout). A unit with nothing to
// render is left out; when none has anything, render.ErrEmpty is the
// error. ok is false when nothing may be written, with the exit code to
// return.
func renderChecked(e *env, c *pipeline.Checked, f *checkFlags, opts render.Options, renderer render.Renderer, unit *string, w *render.DirWriter) ([]pipeline.Rendered, int, bool) {
	var units []pipeline.Rendered
	var rerr error
	if w != nil {
		units, rerr = pipeline.RenderTo(c, opts, renderer, *unit, w)
	} else {
		units, rerr = pipeline.Render(c, opts, renderer, *unit)
	}
	units, code, ok := reportRendered(e, c, f, units, rerr)
	if !ok && w != nil {
		w.Abort()
	}
	return units, code, ok
}

// reportRendered prints the diagnostics of a render and says whether
// its files may be written.
func reportRendered(e *env, c *pipeline.Checked, f *checkFlags, units []pipeline.Rendered, rerr error) ([]pipeline.Rendered, int, bool) {
	if err := report(&env{stdout: e.stderr, stderr: e.stderr, rawStdout: e.rawErr(), terminal: e.terminal, env: e.env}, *c, f.format, f.print); err != nil {
		return nil, fail(e, "render", err), false
	}
	if c.Result.Diagnostics.HasErrors() {
		fmt.Fprintln(e.stderr, "keyhole render: nothing written: the check found errors")
		return nil, exitFailed, false
	}
	if errors.Is(rerr, errUsage) {
		fmt.Fprintf(e.stderr, "keyhole render: %s\n", errText(rerr))
		return nil, exitUsage, false
	}
	if rerr != nil {
		return nil, fail(e, "render", rerr), false
	}
	return units, exitOK, true
}

// unitNames names the rendered units to the user.
func unitNames(us []pipeline.Rendered) string {
	var names []string
	for _, u := range us {
		names = append(names, pipeline.UnitName(u.Name))
	}
	return strings.Join(names, ", ")
}

// registerRenderOptions adds the flags that choose what the plan does not
// say, shared by render and diff (whose two sides render alike).
// (The default namespace and the default sandbox image are input flags,
// --namespace and --sandbox-image: check resolves references in the one
// as render places objects in it, and reports a sandbox without the other
// as render would refuse it.)
func registerRenderOptions(fs *flag.FlagSet, opts *render.Options) {
	fs.StringVar(&opts.ProxyMode, "proxy-mode", render.ModeSidecar, "run the proxy as a `sidecar` of the sandbox or as its own deployment")
	fs.StringVar(&opts.ProxyImage, "proxy-image", render.DefaultProxyImage, "the egress proxy's container `image`")
	fs.StringVar(&opts.NetInitImage, "netinit-image", render.DefaultNetInitImage, "the `image` of the sidecar pod's transparent-mode init container (iptables and keyhole-proxy)")
	fs.Func("proxy-resolve", "HOST:PORT:ADDR the proxy connects to ADDR for, as curl --resolve (repeatable)", func(v string) error {
		opts.ProxyResolve = append(opts.ProxyResolve, v)
		return nil
	})
	fs.StringVar(&opts.UpstreamCAConfigMap, "upstream-ca-configmap", "", "ConfigMap `name` whose ca.crt the proxy verifies upstreams with instead of the system roots")
	fs.StringVar(&opts.UpstreamProxy, "upstream-proxy", "", "the forward proxy `URL` (http://host:port) the cluster reaches the internet through")
	fs.StringVar(&opts.OTLPEndpoint, "otlp-endpoint", "", "the OpenTelemetry collector's base `URL` the proxy exports its request log to")
}

// proxyFlags are registerRenderOptions' flags: each configures keyhole's
// own proxy, which the omnia target does not render.
var proxyFlags = []string{"proxy-mode", "proxy-image", "netinit-image", "proxy-resolve", "upstream-ca-configmap", "upstream-proxy", "otlp-endpoint"}

// omniaTakesNoProxyFlags refuses, for the omnia target, the flags that
// configure keyhole's own proxy: the operator runs its own, so they would
// change nothing, and a user would believe the cluster's traffic went
// through the forward proxy or its log to the collector where neither
// does.
func omniaTakesNoProxyFlags(fs *flag.FlagSet, target string) error {
	if target != render.TargetOmnia {
		return nil
	}
	var set []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(proxyFlags, f.Name) {
			set = append(set, "--"+f.Name)
		}
	})
	if len(set) == 0 {
		return nil
	}
	verb, them := "configure", "them"
	if len(set) == 1 {
		verb, them = "configures", "it"
	}
	return fmt.Errorf("%s %s keyhole's own proxy, which --target %s does not render (the operator runs its own proxy, which keyhole configures only through the Connections): drop %s, or keep the kubernetes or agent-sandbox target",
		strings.Join(set, ", "), verb, render.TargetOmnia, them)
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

// plan loads, checks and returns each deploy unit's plan, printing
// diagnostics to stderr; ok is false, with the exit code, when the inputs
// cannot be read or the check found errors. Either is a usage error (2)
// for the commands that plan, since their 1 means refused, as a ref that
// does not resolve is for diff.
func plan(e *env, cmd string, paths []string, f *checkFlags) ([]compiler.Unit, int, bool) {
	c, err := pipeline.Check(f.options(e, paths))
	if err != nil {
		return nil, fail(e, cmd, err), false
	}
	if c.Result.Diagnostics.HasErrors() {
		if err := report(&env{stdout: e.stderr, stderr: e.stderr, rawStdout: e.rawErr(), terminal: e.terminal, env: e.env}, c, "text", printFlags{}); err != nil {
			return nil, fail(e, cmd, err), false
		}
		fmt.Fprintf(e.stderr, "keyhole %s: the check found errors; fix them first\n", cmd)
		return nil, exitUsage, false
	}
	return c.Result.Units, exitOK, true
}
