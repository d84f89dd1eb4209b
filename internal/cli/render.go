package cli

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/pipeline"
	"keyhole.dev/keyhole/render"
	"keyhole.dev/keyhole/source"
)

func runRender(e *env, args []string) int {
	fs := newFlags(e, "render", "[flags] (-o DIR | --stdout) [PATH...]\n       keyhole render --krm < resource-list.yaml")
	var f checkFlags
	f.register(fs)
	out := fs.String("o", "", "write the rendered files to `DIR` (replaced atomically; never written when the check finds errors); with several deploy units, each to DIR/<unit>")
	stdout := fs.Bool("stdout", false, "print the Kubernetes objects as one YAML stream, for an Argo CD config management plugin (every deploy unit's, unless two render the same object: see --unit)")
	krm := fs.Bool("krm", false, "run as a kustomize KRM function: a ResourceList in on stdin, the rendered ResourceList out")
	var opts render.Options
	registerRenderOptions(fs, &opts)
	unit := registerUnit(fs)
	target := fs.String("target", render.TargetKubernetes, "what to render: `kubernetes` (sandboxes as plain manifests) or omnia (the omnia.altairalabs.ai resources, for clusters that run the operator)")
	paths, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	opts.DefaultNamespace, opts.DefaultSandboxImage = f.namespace, f.sandboxImage
	renderer, err := render.ForTarget(*target)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole render: --target: %v\n", err)
		return exitUsage
	}
	f.objects = *target == render.TargetOmnia
	f.noImages = *target == render.TargetOmnia
	if n := count(*out != "", *stdout, *krm); n != 1 {
		fmt.Fprintln(e.stderr, "keyhole render: give exactly one of -o DIR, --stdout and --krm")
		return exitUsage
	}
	if err := f.validate(); err != nil {
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
	c, err := pipeline.Check(f.options(e, paths))
	if err != nil {
		return fail(e, "render", err)
	}
	units, code, ok := renderChecked(e, &c, &f, opts, renderer, unit)
	if !ok {
		return code
	}
	if *stdout {
		err := writeStream(e.stdout, units)
		if errors.Is(err, errUsage) {
			fmt.Fprintf(e.stderr, "keyhole render: --stdout: %v\n", err)
			return exitUsage
		}
		if err != nil {
			return fail(e, "render", err)
		}
		return exitOK
	}
	files := layout(units)
	if err := render.WriteDir(*out, files); err != nil {
		return fail(e, "render", err)
	}
	where := *out
	if len(units) > 1 {
		where = fmt.Sprintf("%s, one directory per deploy unit (%s)", *out, unitNames(units))
	}
	if *target == render.TargetOmnia {
		fmt.Fprintf(e.stderr, "keyhole render: wrote %d files (omnia target) to %s\n", len(files), where)
		return exitOK
	}
	sandboxes := 0
	for _, u := range units {
		sandboxes += len(u.plan.Sandboxes)
	}
	fmt.Fprintf(e.stderr, "keyhole render: wrote %d files for %s to %s\n", len(files), plural(sandboxes, "sandbox", "sandboxes"), where)
	return exitOK
}

// rendered is one deploy unit's render.
type rendered struct {
	name  string // the unit's name; "" for the files outside any kustomization
	dir   string // where -o writes the unit's files among several (source.Unit.Dir)
	plan  compiler.Plan
	files []render.File
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
func renderChecked(e *env, c *pipeline.Checked, f *checkFlags, opts render.Options, renderer render.Renderer, unit *string) ([]rendered, int, bool) {
	units, rerr := renderUnits(c, opts, renderer, unit)
	if err := report(&env{stdout: e.stderr, stderr: e.stderr}, *c, f.format, f.print); err != nil {
		return nil, fail(e, "render", err), false
	}
	if c.Result.Diagnostics.HasErrors() {
		fmt.Fprintln(e.stderr, "keyhole render: nothing written: the check found errors")
		return nil, exitFailed, false
	}
	if errors.Is(rerr, errUsage) {
		fmt.Fprintf(e.stderr, "keyhole render: %v\n", rerr)
		return nil, exitUsage, false
	}
	if rerr != nil {
		return nil, fail(e, "render", rerr), false
	}
	return units, exitOK, true
}

// renderUnits renders the units of a checked input that has no errors,
// adding the target's diagnostics to it. only, when it names a unit,
// keeps that one.
func renderUnits(c *pipeline.Checked, opts render.Options, renderer render.Renderer, only *string) ([]rendered, error) {
	if c.Result.Diagnostics.HasErrors() {
		return nil, nil
	}
	c.Rules = render.OmniaRules()
	var names []string
	var out []rendered
	found := false
	for _, u := range c.Result.Units {
		names = append(names, unitName(u.Name))
		if only != nil && *only != "" && u.Name != *only && !(u.Name == source.LooseUnit && *only == looseName) {
			continue
		}
		found = true
		uopts := opts
		uopts.DefaultNamespace = cmp.Or(u.Namespace, opts.DefaultNamespace)
		files, ds, err := renderer(u.Plan, uopts)
		c.Result.Diagnostics = append(c.Result.Diagnostics, ds...)
		if errors.Is(err, render.ErrEmpty) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rendered{name: u.Name, dir: u.Dir, plan: u.Plan, files: files})
	}
	c.Result.Diagnostics.Sort()
	if only != nil && *only != "" && !found {
		return nil, fmt.Errorf("%w: --unit %q: the input has no such deploy unit (it has: %s)", errUsage, *only, strings.Join(names, ", "))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no deploy unit has a sandbox", render.ErrEmpty)
	}
	return out, nil
}

// stream is every unit's objects as one YAML stream, which --krm prints
// and --stdout writes (writeStream). One stream is what one cluster applies: several units'
// objects go in it when no two units render the same object; when they do
// (two overlays of one base), a stream of both would apply one over the
// other, and --unit chooses.
func stream(units []rendered) ([]byte, error) {
	all, err := streamed(units)
	if err != nil {
		return nil, err
	}
	return render.Stream(all)
}

// writeStream writes the stream of stream to w as it goes, rather than
// building it first: nothing is written when it is refused.
func writeStream(w io.Writer, units []rendered) error {
	all, err := streamed(units)
	if err != nil {
		return err
	}
	return render.WriteStream(w, all)
}

// streamed is every unit's files, for one stream; an error when two units
// render the same object.
func streamed(units []rendered) ([]render.File, error) {
	if a, b, clash := clashing(units); clash != "" {
		return nil, fmt.Errorf("%w: one stream holds each object once, and deploy units %s and %s both render %s: choose one with --unit, as each Argo CD application renders one", errUsage, unitName(a), unitName(b), clash)
	}
	if len(units) == 1 {
		return units[0].files, nil
	}
	n := 0
	for _, u := range units {
		n += len(u.files)
	}
	all := make([]render.File, 0, n)
	for _, u := range units {
		all = append(all, u.files...)
	}
	return all, nil
}

// clashing returns two units that render a file of the same path (so the
// same object: paths derive from namespaces and names), and that path;
// "" when none do. Kustomizations are not streamed, and do not count.
func clashing(units []rendered) (a, b, path string) {
	if len(units) < 2 {
		// A unit renders each path once.
		return "", "", ""
	}
	seen := map[string]string{}
	for _, u := range units {
		for _, f := range u.files {
			if strings.HasSuffix(f.Path, "kustomization.yaml") {
				continue
			}
			if prev, ok := seen[f.Path]; ok && prev != u.name {
				return prev, u.name, f.Path
			}
			seen[f.Path] = u.name
		}
	}
	return "", "", ""
}

// looseName is how the files outside any kustomization are named to the
// user, and to --unit.
const looseName = "(loose files)"

func unitName(u string) string {
	if u == source.LooseUnit {
		return looseName
	}
	return u
}

func unitNames(us []rendered) string {
	var names []string
	for _, u := range us {
		names = append(names, unitName(u.name))
	}
	return strings.Join(names, ", ")
}

// layout places the units' files in one output directory: one unit's at
// its top, as they are; several units' each under the unit's directory
// (the loose files' at the top), so that each is a kustomization of its
// own for a Flux Kustomization or an Argo CD application to point at.
func layout(units []rendered) []render.File {
	if len(units) == 1 {
		return units[0].files
	}
	var files []render.File
	for _, u := range units {
		files = append(files, placed(u)...)
	}
	slices.SortFunc(files, func(a, b render.File) int { return strings.Compare(a.Path, b.Path) })
	return files
}

// placed is a unit's files where a render of several units writes them.
func placed(u rendered) []render.File {
	if u.dir == "" {
		return u.files
	}
	out := make([]render.File, len(u.files))
	for i, f := range u.files {
		out[i] = render.File{Path: path.Join(u.dir, f.Path), Data: f.Data}
	}
	return out
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
// diagnostics to stderr; ok is false when the check found errors.
func plan(e *env, paths []string, f *checkFlags) ([]compiler.Unit, int, bool) {
	c, err := pipeline.Check(f.options(e, paths))
	if err != nil {
		return nil, fail(e, "explain", err), false
	}
	if c.Result.Diagnostics.HasErrors() {
		if err := report(&env{stdout: e.stderr, stderr: e.stderr}, c, "text", printFlags{}); err != nil {
			return nil, fail(e, "explain", err), false
		}
		fmt.Fprintln(e.stderr, "keyhole explain: the check found errors; fix them first")
		return nil, exitFailed, false
	}
	return c.Result.Units, exitOK, true
}
