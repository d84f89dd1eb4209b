// Package pipeline is keyhole's pipeline, the part of the keyhole command
// a program can embed: it loads the inputs (source.Load), digests and
// compiles them (compiler.Digest, compiler.Compile), renders each deploy
// unit with a target's renderer (render), and opens, loads and renders the
// two sides of a diff, each a git ref or the working tree. It returns
// values and errors; it never prints and never exits.
package pipeline

import (
	"errors"
	"fmt"
	"io"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/engines"
)

// ErrUsage marks an error the user can fix by changing how the pipeline
// is called: a deploy unit that does not exist, a stream that would hold
// an object twice.
var ErrUsage = errors.New("usage")

// Options are the pipeline's inputs and how they are read and checked.
type Options struct {
	// Paths are the files and directories read; none means ".".
	Paths []string
	// Stdin is read when a path is "-".
	Stdin io.Reader
	// Root, when set, is the repository's root (source.Options.Root),
	// and Dir the directory reported paths are relative to
	// (source.Options.Dir; empty means the working directory).
	Root, Dir string
	// Exclude lists patterns, in .gitignore's syntax, of paths a walk
	// does not read (source.Options.Exclude).
	Exclude []string
	// AllowRemoteBases lets kustomize fetch the remote bases a
	// kustomization names.
	AllowRemoteBases bool
	// AllowMissingSecrets reports a Connection's missing Secret as a
	// warning.
	AllowMissingSecrets bool
	// DefaultNamespace is the namespace of an object whose source names
	// none.
	DefaultNamespace string
	// OperatorVersion, when set, is the omnia operator release checked
	// against, over keyhole.yaml's operator.version.
	OperatorVersion string
	// SandboxImage is the image of a sandbox whose SandboxClass names
	// none.
	SandboxImage string
	// Parallelism is how many files are read and parsed at once; zero
	// means runtime.GOMAXPROCS(0) (source.Options.Parallelism).
	Parallelism int
	// Objects keeps the input objects in the plans, for a target that
	// re-emits them (omnia). DiagnosticsOnly builds no plan at all.
	// NoImages needs no sandbox image, for a target that runs no sandbox
	// Deployment (omnia).
	Objects, DiagnosticsOnly, NoImages bool
	// CountSuppressed is set by a caller that prints suppressed
	// diagnostics only as a count: their messages are not kept
	// (compiler.Options.OmitSuppressedMessages).
	CountSuppressed bool
}

// Checked is the outcome of loading and compiling the inputs.
type Checked struct {
	// Result holds the diagnostics, the objects' count and the deploy
	// units with their plans.
	Result compiler.Result
	// Documents counts the documents read, once each however many deploy
	// units build them.
	Documents int
	// UnitDocs counts the documents of each deploy unit, by its ID.
	UnitDocs map[string]int
	// Rules describes codes beyond the compiler's table that the
	// diagnostics may hold (a render target's own), for SARIF.
	Rules []diag.Rule
}

// Check reads and compiles opts.Paths. An error means the inputs could
// not be read at all; diagnostics are in the result.
func Check(opts Options) (Checked, error) {
	paths := opts.Paths
	if len(paths) == 0 {
		paths = []string{"."}
	}
	v, err := Validator(opts)
	if err != nil {
		return Checked{}, err
	}
	sopts := opts.sourceOptions()
	sopts.Digest = opts.Digest(v)
	docs, loadDiags, err := source.Load(paths, sopts)
	if err != nil {
		return Checked{}, err
	}
	return Compile(docs, loadDiags, opts, v)
}

// sourceOptions are the loader's options opts choose.
func (o Options) sourceOptions() source.Options {
	return source.Options{Engines: engines.All(), Stdin: o.Stdin, Root: o.Root, Dir: o.Dir, AllowRemoteBases: o.AllowRemoteBases, Exclude: o.Exclude, Parallelism: o.Parallelism}
}

// Digest is the loader's Digest: what the compiler needs of each document,
// taken as it is parsed so that its node tree can be dropped. The
// keyhole.yaml the loader reads before it walks names the operator the
// digest checks against, unless OperatorVersion does.
func (o Options) Digest(v *schema.Validator) source.Digest {
	return compiler.Digest(v, compiler.Options{OperatorVersion: o.OperatorVersion})
}

// Validator checks the options that choose the schemas and returns the
// validator the loader's Digest and the compiler share.
func Validator(opts Options) (*schema.Validator, error) {
	if opts.OperatorVersion != "" {
		if _, err := schema.LookupOperator(opts.OperatorVersion); err != nil {
			return nil, fmt.Errorf("--operator-version: %w", err)
		}
	}
	v, err := schema.NewValidator()
	if err != nil {
		return nil, fmt.Errorf("loading the schemas: %w", err)
	}
	return v, nil
}

// Compile checks loaded documents, with the loader's diagnostics,
// against v (a new validator when nil).
func Compile(docs []*source.Document, loadDiags diag.List, opts Options, v *schema.Validator) (Checked, error) {
	if v == nil {
		var err error
		if v, err = Validator(opts); err != nil {
			return Checked{}, err
		}
	}
	res := compiler.Compile(docs, v, compiler.Options{
		AllowMissingSecrets:    opts.AllowMissingSecrets,
		DefaultNamespace:       opts.DefaultNamespace,
		DefaultSandboxImage:    opts.SandboxImage,
		NoSandboxImages:        opts.NoImages,
		Loaded:                 loadDiags,
		OperatorVersion:        opts.OperatorVersion,
		OmitObjects:            !opts.Objects,
		OmitPlans:              opts.DiagnosticsOnly,
		OmitSuppressedMessages: opts.CountSuppressed,
	})
	unitDocs := map[string]int{}
	for _, d := range docs {
		if d.Node != nil || d.Released() {
			unitDocs[d.Unit().ID]++
		}
	}
	return Checked{Result: res, Documents: countDocs(docs), UnitDocs: unitDocs}, nil
}

// countDocs counts the documents read, once each however many deploy
// units build them.
func countDocs(docs []*source.Document) int {
	seen := diag.NewPosSet()
	for _, d := range docs {
		if d.Node != nil || d.Released() {
			seen.Add(d.Identity())
		}
	}
	return seen.Len()
}

// AllRules is the compiler's table plus c's extra rules, by code.
func (c Checked) AllRules() map[string]diag.Rule {
	rules := compiler.Rules()
	for _, r := range c.Rules {
		rules[r.Code] = r
	}
	return rules
}
