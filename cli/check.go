package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/pipeline"
	"keyhole.dev/keyhole/schema"
)

// checkFlags are shared by every command that checks its inputs first.
type checkFlags struct {
	format              string
	allowMissingSecrets bool
	allowRemoteBases    bool
	operatorVersion     string
	exclude             patterns
	namespace           string
	sandboxImage        string
	print               printFlags
	// objects is set by the commands whose target re-emits the input
	// objects (--target omnia): only they need the Plan to list them.
	// diagnosticsOnly is set by check, which needs no plan at all.
	// noImages is set by the commands whose target runs no sandbox
	// Deployment (--target omnia), which need no sandbox image.
	objects, diagnosticsOnly, noImages bool
}

// patterns is a repeatable flag of path patterns.
type patterns []string

func (p *patterns) String() string     { return strings.Join(*p, ",") }
func (p *patterns) Set(v string) error { *p = append(*p, v); return nil }

// allowRemoteBasesUsage is --allow-remote-bases' help, the same on every
// command that builds kustomizations.
const allowRemoteBasesUsage = "let kustomize fetch the remote bases kustomizations name (git repositories, HTTP URLs), as kubectl kustomize does; by default nothing is fetched and such a kustomization is an error"

func (f *checkFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.format, "format", "text", "diagnostics format: "+orList(diag.Formats()))
	f.print.register(fs)
	f.registerInputs(fs)
	f.registerImage(fs)
}

// registerInputs adds the flags that choose how inputs are read and
// checked, shared by every command that loads a repository (diff and
// explain have their own --format, or none).
func (f *checkFlags) registerInputs(fs *flag.FlagSet) {
	fs.BoolVar(&f.allowMissingSecrets, "allow-missing-secrets", false, "report a Connection's missing Secret as a warning, for repositories whose Secrets live elsewhere")
	fs.BoolVar(&f.allowRemoteBases, "allow-remote-bases", false, allowRemoteBasesUsage)
	fs.StringVar(&f.operatorVersion, "operator-version", "", "the omnia operator release the cluster runs ("+strings.Join(schema.OperatorVersions(), ", ")+"); overrides keyhole.yaml's operator.version")
	fs.Var(&f.exclude, "exclude", "do not read what a walk finds at paths matching `PATTERN` (.gitignore syntax, relative to the working directory; repeatable; keyhole.yaml's exclude adds its own)")
	fs.StringVar(&f.namespace, "namespace", "default", "`namespace` of an object whose source names none, where render places it and where its references resolve")
}

// registerImage adds --sandbox-image, shared by check, render and diff:
// check reports a sandbox without an image as render would refuse it, so
// it takes the same default. (explain judges access, not images.)
func (f *checkFlags) registerImage(fs *flag.FlagSet) {
	fs.StringVar(&f.sandboxImage, "sandbox-image", "", "container `image` for a sandbox whose SandboxClass (for an agent.yaml agent, keyhole.yaml's sandboxImage) names none; check, render and diff take the same")
}

// options are the pipeline's options the flags choose, for paths read
// with e's standard input.
func (f *checkFlags) options(e *env, paths []string) pipeline.Options {
	return pipeline.Options{
		Paths:               paths,
		Stdin:               e.stdin,
		Exclude:             f.exclude,
		AllowRemoteBases:    f.allowRemoteBases,
		AllowMissingSecrets: f.allowMissingSecrets,
		DefaultNamespace:    f.namespace,
		OperatorVersion:     f.operatorVersion,
		SandboxImage:        f.sandboxImage,
		Objects:             f.objects,
		DiagnosticsOnly:     f.diagnosticsOnly,
		NoImages:            f.noImages,
	}
}

// countingSuppressed is opts for a command whose only printing of the
// diagnostics is report's, in f's format: what that format only counts,
// the check need not keep (pipeline.Options.CountSuppressed).
func (f *checkFlags) countingSuppressed(opts pipeline.Options) pipeline.Options {
	po, err := f.print.options(f.format)
	opts.CountSuppressed = err == nil && diag.CountsSuppressed(f.format, po)
	return opts
}

// report prints the diagnostics in the chosen format.
func report(e *env, c pipeline.Checked, format string, pf printFlags) error {
	o, err := pf.options(format)
	if err != nil {
		return err
	}
	if format == "text" {
		pf.human(e, e.rawStdout, &o)
	}
	p, err := diag.NewPrinterWith(format, o)
	if err != nil {
		return err
	}
	sum := diag.Summary{Documents: c.Documents, Objects: c.Result.Objects, Skipped: compiler.SkippedOf(c.Result.Diagnostics)}
	for _, u := range c.Result.Units {
		sum.Units = append(sum.Units, u.Name)
		sum.Built = append(sum.Built, diag.BuiltUnit{Name: u.Name, Source: string(u.Source), Documents: c.UnitDocs[u.ID]})
	}
	w := e.stdout
	if format == "github" {
		w = e.raw()
	}
	return p.Print(w, c.Result.Diagnostics, sum, c.AllRules())
}

func runCheck(e *env, args []string) int {
	fs := newFlags(e, "check", "[flags] [PATH...]")
	var f checkFlags
	f.register(fs)
	f.diagnosticsOnly = true
	strict := fs.Bool("strict", false, "fail the check (exit 1) on warnings too, not only on errors; suppressed ones do not count")
	paths, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if err := f.validate(); err != nil {
		fmt.Fprintf(e.stderr, "keyhole check: %s\n", errText(err))
		return exitUsage
	}
	e.limitMemory(paths)
	c, err := pipeline.Check(f.countingSuppressed(f.options(e, paths)))
	if err != nil {
		return fail(e, "check", err)
	}
	if err := report(e, c, f.format, f.print); err != nil {
		return fail(e, "check", err)
	}
	noteEmpty(e, "check", paths, c)
	if c.Result.Diagnostics.HasErrors() || *strict && c.Result.Diagnostics.Count(diag.Warning) > 0 {
		return exitFailed
	}
	return exitOK
}

// noteEmpty says on stderr, where no format's output is disturbed, that
// the inputs held no document at all: an empty file or an empty standard
// input (a generator upstream that wrote nothing) is checked clean, which
// is true, and would otherwise say nothing of why.
func noteEmpty(e *env, cmd string, paths []string, c pipeline.Checked) {
	if c.Documents > 0 || len(c.Result.Diagnostics) > 0 {
		return
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	named := make([]string, len(paths))
	for i, p := range paths {
		named[i] = p
		if p == "-" {
			named[i] = "standard input"
		}
	}
	fmt.Fprintf(e.stderr, "keyhole %s: note: no document in %s: nothing was checked\n", cmd, strings.Join(named, ", "))
}

// fail prints err and returns the exit code it maps to.
func fail(e *env, cmd string, err error) int {
	var list diag.List
	if errors.As(err, &list) {
		for _, d := range list {
			fmt.Fprintf(e.stderr, "%s\n", diag.EscapeControl(d.String()))
		}
	}
	fmt.Fprintf(e.stderr, "keyhole %s: %s\n", cmd, errText(err))
	return exitUsage
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// errText is err's message on one line, its control characters escaped:
// an error quotes file names and values, and keyhole's own messages are
// one line each.
func errText(err error) string { return diag.EscapeControl(err.Error()) }

// limitMemory sets the collector's soft limit for a run that reads the
// inputs at paths, where e's process does (see env.sizeMemory).
func (e *env) limitMemory(paths []string) {
	if e.sizeMemory != nil {
		e.sizeMemory(paths)
	}
}
