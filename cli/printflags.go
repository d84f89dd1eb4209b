package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/version"
)

// repoURL is where keyhole's sources and docs are published; SARIF's
// helpUri links into it at the revision that wrote the log.
const repoURL = "https://github.com/keyhole-dev/keyhole"

// printFlags choose what the diagnostics printers leave out and how SARIF
// names its run, on the commands that print diagnostics in a chosen format.
type printFlags struct {
	verbose     bool
	minSeverity string // "" is the format's default
	category    string
	// color and layout choose the text format's colour and layout (see
	// human): auto, the default, decides by whether the output is a
	// terminal.
	color, layout string
}

func (pf *printFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&pf.verbose, "v", false, "list every diagnostic in the text format: also the info ones (what was skipped as not keyhole's business, what could not be checked) and the suppressed ones, which it otherwise only counts")
	fs.StringVar(&pf.minSeverity, "min-severity", "", "the least severe diagnostic to print: `info`, warning or error (default: warning for --format sarif, github, gitlab and junit, info otherwise); exit codes do not change")
	fs.StringVar(&pf.category, "sarif-category", "keyhole", "the SARIF run's `category` (automationDetails.id), one per upload that checks different paths")
	fs.StringVar(&pf.color, "color", "auto", "colour the text format: `when` is auto (on a terminal, unless NO_COLOR is set), always or never")
	fs.StringVar(&pf.layout, "layout", "auto", "the text format's `layout`: lines (one diagnostic a line, file:line:col: severity CODE: message, as editors and grep read it), grouped (under each file's name, each diagnostic with its source line, a caret at its column and 'keyhole help CODE'), or auto: grouped on a terminal, lines otherwise")
}

// validate checks the format and print flags before any input is read.
func (f *checkFlags) validate() error {
	if _, err := diag.NewPrinter(f.format); err != nil {
		return err
	}
	// render places objects without a namespace in it, and refuses one
	// that is no namespace: check refuses it alike.
	if err := compiler.CheckNamespace(f.namespace); err != nil {
		return fmt.Errorf("%w: --namespace %q: %v", errUsage, f.namespace, err)
	}
	_, err := f.print.options(f.format)
	return err
}

// options builds the printer options for format.
func (pf printFlags) options(format string) (diag.Options, error) {
	min := diag.DefaultMinSeverity(format)
	if pf.minSeverity != "" {
		s, err := diag.ParseSeverity(pf.minSeverity)
		if err != nil {
			return diag.Options{}, fmt.Errorf("%w: --min-severity: %v", errUsage, err)
		}
		min = s
	}
	if strings.Contains(pf.category, "/") {
		return diag.Options{}, fmt.Errorf("%w: --sarif-category %q: a category holds no /", errUsage, pf.category)
	}
	if pf.color != "" {
		if err := oneOf("color", pf.color, colorModes()...); err != nil {
			return diag.Options{}, err
		}
	}
	if pf.layout != "" {
		if err := oneOf("layout", pf.layout, layouts()...); err != nil {
			return diag.Options{}, err
		}
	}
	o := diag.Options{MinSeverity: min, Category: pf.category, Verbose: pf.verbose}
	if format != "sarif" && format != "github" && format != "gitlab" && format != "junit" {
		return o, nil
	}
	// Annotations and SARIF name files relative to the repository root,
	// whatever directory keyhole ran in.
	wd, err := os.Getwd()
	if err != nil {
		return diag.Options{}, err
	}
	o.WorkDir = filepath.ToSlash(wd)
	o.Root = filepath.ToSlash(repoRoot(wd))
	o.Source = func(file string) ([]byte, error) {
		if !filepath.IsAbs(file) {
			file = filepath.Join(wd, filepath.FromSlash(file))
		}
		return os.ReadFile(file)
	}
	info := version.Get()
	o.Version, o.SemanticVersion = info.Short(), info.Semantic()
	o.HelpURI = helpURI
	return o, nil
}

// helpURI is where code is documented: its row of docs/checks.md in
// keyhole's published repository, at the revision of this keyhole
// (main when that is not known). SARIF's helpUri and `keyhole help CODE`
// give the same.
func helpURI(code string) string {
	info := version.Get()
	ref := "main"
	switch {
	case info.Revision != "" && !info.Modified:
		ref = info.Revision
	case pseudoRevision(info.Version) != "":
		ref = pseudoRevision(info.Version)
	case info.Semantic() != "" && !strings.Contains(info.Version, "+"):
		ref = info.Version
	}
	return repoURL + "/blob/" + ref + "/docs/checks.md#" + compiler.CheckAnchor(code)
}

// repoRoot is the root of the git repository enclosing dir (the nearest
// directory holding .git, a directory or, in a worktree, a file), or dir
// itself outside any repository.
func repoRoot(dir string) string {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// pseudoRevision is the commit a pseudo-version
// (v0.0.0-20261130120000-5124f20c9e5e) names, or "".
func pseudoRevision(v string) string {
	parts := strings.Split(v, "-")
	if len(parts) < 3 {
		return ""
	}
	rev := parts[len(parts)-1]
	if len(rev) != 12 || strings.Trim(rev, "0123456789abcdef") != "" {
		return ""
	}
	return rev
}
