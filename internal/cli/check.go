package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
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
	fs.StringVar(&f.format, "format", "text", "diagnostics format: text, json, github or sarif")
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

// checked is the outcome of loading and compiling the inputs.
type checked struct {
	result    compiler.Result
	documents int
	// unitDocs counts the documents of each deploy unit, by its ID.
	unitDocs map[string]int
	// rules describes codes beyond the compiler's table that the
	// diagnostics may hold (a render target's own), for SARIF.
	rules []diag.Rule
}

// load reads and compiles paths. An error means the inputs could not be
// read at all (exit 2); diagnostics are in the result.
func load(e *env, paths []string, f *checkFlags) (checked, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	v, err := validator(f)
	if err != nil {
		return checked{}, err
	}
	opts := f.sourceOptions(e.stdin)
	opts.Digest = f.digest(v)
	docs, loadDiags, err := source.Load(paths, opts)
	if err != nil {
		return checked{}, err
	}
	return compileDocs(docs, loadDiags, f, v)
}

// sourceOptions are the loader's options the flags choose.
func (f *checkFlags) sourceOptions(stdin io.Reader) source.Options {
	return source.Options{Stdin: stdin, AllowRemoteBases: f.allowRemoteBases, Exclude: f.exclude}
}

// digest is the loader's Digest: what the compiler needs of each document,
// taken as it is parsed so that its node tree can be dropped. The
// keyhole.yaml the loader reads before it walks names the operator the
// digest checks against, unless --operator-version does.
func (f *checkFlags) digest(v *schema.Validator) source.Digest {
	return compiler.Digest(v, compiler.Options{OperatorVersion: f.operatorVersion})
}

// validator checks the flags that choose the schemas and returns the
// validator the loader's Digest and the compiler share.
func validator(f *checkFlags) (*schema.Validator, error) {
	if f.operatorVersion != "" {
		if _, err := schema.LookupOperator(f.operatorVersion); err != nil {
			return nil, fmt.Errorf("--operator-version: %w", err)
		}
	}
	v, err := schema.NewValidator()
	if err != nil {
		return nil, fmt.Errorf("loading the schemas: %w", err)
	}
	return v, nil
}

// compileDocs checks loaded documents, with the loader's diagnostics,
// against v (a new validator when nil).
func compileDocs(docs []*source.Document, loadDiags diag.List, f *checkFlags, v *schema.Validator) (checked, error) {
	if v == nil {
		var err error
		if v, err = validator(f); err != nil {
			return checked{}, err
		}
	}
	res := compiler.Compile(docs, v, compiler.Options{
		AllowMissingSecrets: f.allowMissingSecrets,
		DefaultNamespace:    f.namespace,
		DefaultSandboxImage: f.sandboxImage,
		NoSandboxImages:     f.noImages,
		Loaded:              loadDiags,
		OperatorVersion:     f.operatorVersion,
		OmitObjects:         !f.objects,
		OmitPlans:           f.diagnosticsOnly,
	})
	unitDocs := map[string]int{}
	for _, d := range docs {
		if d.Node != nil || d.Released() {
			unitDocs[d.Unit().ID]++
		}
	}
	return checked{result: res, documents: countDocs(docs), unitDocs: unitDocs}, nil
}

// countDocs counts the documents read, once each however many deploy
// units build them.
func countDocs(docs []*source.Document) int {
	seen := diag.NewPosSet()
	for _, d := range docs {
		if d.Node != nil || d.Released() {
			seen.Add(d.Pos)
		}
	}
	return seen.Len()
}

// report prints the diagnostics in the chosen format.
func report(e *env, c checked, format string, pf printFlags) error {
	o, err := pf.options(format)
	if err != nil {
		return err
	}
	p, err := diag.NewPrinterWith(format, o)
	if err != nil {
		return err
	}
	sum := diag.Summary{Documents: c.documents, Objects: c.result.Objects, Skipped: compiler.SkippedOf(c.result.Diagnostics)}
	for _, u := range c.result.Units {
		sum.Units = append(sum.Units, u.Name)
		sum.Built = append(sum.Built, diag.BuiltUnit{Name: u.Name, Source: string(u.Source), Documents: c.unitDocs[u.ID]})
	}
	return p.Print(e.stdout, c.result.Diagnostics, sum, c.allRules())
}

// allRules is the compiler's table plus c's extra rules, by code.
func (c checked) allRules() map[string]diag.Rule {
	rules := compiler.Rules()
	for _, r := range c.rules {
		rules[r.Code] = r
	}
	return rules
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
		fmt.Fprintf(e.stderr, "keyhole check: %v\n", err)
		return exitUsage
	}
	c, err := load(e, paths, &f)
	if err != nil {
		return fail(e, "check", err)
	}
	if err := report(e, c, f.format, f.print); err != nil {
		return fail(e, "check", err)
	}
	noteEmpty(e, "check", paths, c)
	if c.result.Diagnostics.HasErrors() || *strict && c.result.Diagnostics.Count(diag.Warning) > 0 {
		return exitFailed
	}
	return exitOK
}

// noteEmpty says on stderr, where no format's output is disturbed, that
// the inputs held no document at all: an empty file or an empty standard
// input (a generator upstream that wrote nothing) is checked clean, which
// is true, and would otherwise say nothing of why.
func noteEmpty(e *env, cmd string, paths []string, c checked) {
	if c.documents > 0 || len(c.result.Diagnostics) > 0 {
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
			fmt.Fprintf(e.stderr, "%s\n", d)
		}
	}
	fmt.Fprintf(e.stderr, "keyhole %s: %v\n", cmd, err)
	return exitUsage
}
