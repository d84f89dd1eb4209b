package cli

import (
	"errors"
	"fmt"

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
	print               printFlags
}

// allowRemoteBasesUsage is --allow-remote-bases' help, the same on every
// command that builds kustomizations.
const allowRemoteBasesUsage = "let kustomize fetch the remote bases kustomizations name (git repositories, HTTP URLs), as kubectl kustomize does; by default nothing is fetched and such a kustomization is an error"

func (f *checkFlags) register(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&f.format, "format", "text", "diagnostics format: text, json, github or sarif")
	f.print.register(fs)
	f.registerInputs(fs)
}

// registerInputs adds the flags that choose how inputs are read and
// checked, shared by every command that loads a repository (diff and
// explain have their own --format, or none).
func (f *checkFlags) registerInputs(fs interface {
	BoolVar(*bool, string, bool, string)
}) {
	fs.BoolVar(&f.allowMissingSecrets, "allow-missing-secrets", false, "report a Connection's missing Secret as a warning, for repositories whose Secrets live elsewhere")
	fs.BoolVar(&f.allowRemoteBases, "allow-remote-bases", false, allowRemoteBasesUsage)
}

// checked is the outcome of loading and compiling the inputs.
type checked struct {
	result    compiler.Result
	documents int
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
	docs, loadDiags, err := source.Load(paths, source.Options{Stdin: e.stdin, AllowRemoteBases: f.allowRemoteBases})
	if err != nil {
		return checked{}, err
	}
	return compileDocs(docs, loadDiags, f)
}

// compileDocs checks loaded documents, with the loader's diagnostics.
func compileDocs(docs []source.Document, loadDiags diag.List, f *checkFlags) (checked, error) {
	v, err := schema.NewValidator()
	if err != nil {
		return checked{}, fmt.Errorf("loading the schemas: %w", err)
	}
	res := compiler.Compile(docs, v, compiler.Options{AllowMissingSecrets: f.allowMissingSecrets})
	res.Diagnostics = append(loadDiags, res.Diagnostics...)
	res.Diagnostics.Sort()
	return checked{result: res, documents: countDocs(docs)}, nil
}

func countDocs(docs []source.Document) int {
	n := 0
	for _, d := range docs {
		if d.Node != nil {
			n++
		}
	}
	return n
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
	return p.Print(e.stdout, c.result.Diagnostics, diag.Summary{Documents: c.documents, Objects: c.result.Objects}, c.allRules())
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
	if c.result.Diagnostics.HasErrors() {
		return exitFailed
	}
	return exitOK
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
