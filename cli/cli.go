// Package cli implements the keyhole command: its subcommands, flags and
// exit codes. It holds no policy: it wires source, schema, compiler,
// render and the proxy together and prints what they return, once.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/memlimit"
	"keyhole.dev/keyhole/internal/version"
	"keyhole.dev/keyhole/pipeline"
)

// Exit codes, the same for every command (README.md, Commands).
const (
	exitOK      = 0 // clean (warnings allowed); for diff: no change
	exitFailed  = 1 // errors found; for diff: changed
	exitUsage   = 2 // usage error or unreadable input
	exitGate    = 3 // for diff: the change trips --fail-on
	exitUnknown = exitUsage
)

// errUsage marks an error the user can fix by changing the command line:
// the pipeline's, so that the errors it returns are the CLI's alike.
var errUsage = pipeline.ErrUsage

// env is what a command runs with: its streams and its standard input.
// Commands never touch os.Stdout or os.Stderr directly, so every one runs
// in-process in tests.
type env struct {
	stdin io.Reader
	// stdout and stderr make each line safe for a CI log as it is
	// written (diag.LogWriter): a repository's file and object names, and
	// values quoted from it, can never print as a workflow command.
	stdout, stderr io.Writer
	// rawStdout is the standard output as given, for what keyhole writes
	// byte for byte: manifests, schemas, completion scripts, and the
	// github format, whose annotations are commands and which makes the
	// rest of its lines safe itself.
	rawStdout io.Writer
	// rawStderr is the standard error as given, for the github format's
	// annotations of diff's diagnostics.
	rawStderr io.Writer
	// diffAfresh makes diff load, check and render each side on its
	// own, reusing nothing of the other's: tests compare its output with
	// the output reuse gives.
	diffAfresh bool
	// diffReuse, when set, is what diff's sides share (a new one when
	// nil), for tests to see what was reused.
	diffReuse *pipeline.Reuse
	// terminal, when set, says which writers are terminals, and env
	// reads the environment, for tests of --color and --layout (nil: the
	// process's own; see isTerminal and getenv).
	terminal func(io.Writer) bool
	env      func(string) string
	// sizeMemory, when set, sets the collector's soft limit for a run
	// that reads the inputs at paths (memlimit.ForInput): the process's
	// own runs set it, tests leave the runtime as it is.
	sizeMemory func(paths []string)
}

// raw is the standard output to write byte for byte (see rawStdout).
func (e *env) raw() io.Writer { return unguarded(e.stdout, e.rawStdout) }

// rawErr is the standard error to write byte for byte (see rawStderr).
func (e *env) rawErr() io.Writer { return unguarded(e.stderr, e.rawStderr) }

// unguarded is raw, or guarded when there is no raw writer, once what
// was written through the guard has gone out.
func unguarded(guarded, raw io.Writer) io.Writer {
	if raw == nil {
		return guarded
	}
	if lw, ok := guarded.(*diag.LogWriter); ok {
		lw.Flush()
	}
	return raw
}

type command struct {
	name    string
	summary string
	run     func(e *env, args []string) int
}

func commands() []command {
	return []command{
		{"init", "scaffold a repository for an agent's connectors", runInit},
		{"check", "load, validate and print diagnostics", runCheck},
		{"render", "check, then write proxy config, manifests and env maps", runRender},
		{"diff", "render two git refs in-process and diff them per resource", runDiff},
		{"explain", "what a sandbox may reach, and the proxy's verdict on one request", runExplain},
		{"suggest", "from the proxy's refusals, the smallest rule edits that allow them", runSuggest},
		{"schema", "print the CUE schemas, JSON Schema or CRDs", runSchema},
		{"proxy", "run the egress proxy", runProxy},
		{"version", "print the version", runVersion},
		{"completion", "print a shell completion script: bash, zsh or fish", runCompletion},
	}
}

// Main runs keyhole with args (without the program name) and returns the
// exit code. It is the process's entry point: keyhole's output goes to
// stdout and stderr as given, and what libraries would write on their own
// to the process's standard error and standard logger is silenced (see
// quietLibraries).
func Main(args []string, stdout, stderr io.Writer) int {
	e := &env{stdin: os.Stdin, stdout: stdout, stderr: stderr}
	if len(args) > 0 && args[0] != "proxy" {
		// In a container, the collector keeps the heap under the
		// container's memory limit rather than be killed at it (the
		// proxy command sets it itself, and logs it).
		d := memlimit.Apply(os.Getenv)
		e.sizeMemory = func(paths []string) { memlimit.ForInput(d, paths, os.Getenv) }
		defer quietLibraries()()
	}
	return run(e, args)
}

// quietLibraries points the process's os.Stderr and the standard logger
// away from the terminal until the returned function restores them.
// kustomize writes its deprecation notices ("# Warning: 'bases' is
// deprecated") to os.Stderr and some log lines to the standard logger,
// which would interleave with keyhole's own diagnostics and say nothing
// about keyhole's objects. The writer Main was given is unaffected: it
// holds the terminal's file itself. The proxy command, which logs through
// its own writers, keeps them as they are.
func quietLibraries() func() {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return func() {}
	}
	prevStderr, prevLog := os.Stderr, log.Writer()
	os.Stderr = devNull
	log.SetOutput(io.Discard)
	return func() {
		os.Stderr = prevStderr
		log.SetOutput(prevLog)
		devNull.Close()
	}
}

func run(e *env, args []string) int {
	if len(args) == 0 || args[0] != "proxy" {
		// The proxy logs JSON lines of its own from many goroutines; it
		// is not run in CI on a repository's names.
		c := *e
		out, errOut := diag.NewLogWriter(e.stdout), diag.NewLogWriter(e.stderr)
		c.stdout, c.stderr, c.rawStdout, c.rawStderr = out, errOut, e.stdout, e.stderr
		defer errOut.Flush()
		defer out.Flush()
		e = &c
	}
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	if args[0] == "help" && len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		return runHelp(e, args[1:])
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		// Asked for, help is the output: stdout, exit 0.
		usage(e.stdout)
		return exitOK
	}
	if args[0] == "--version" {
		return runVersion(e, nil)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(e, args[1:])
		}
	}
	fmt.Fprintf(e.stderr, "keyhole: %s; run 'keyhole help' for the commands\n", commandProblem(args[0]))
	return exitUnknown
}

// commandProblem names an unknown command and the nearest command there is.
func commandProblem(name string) string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	if near := diag.Suggest(name, names); near != "" {
		return fmt.Sprintf("unknown command %q (did you mean %q?)", name, near)
	}
	return fmt.Sprintf("unknown command %q", name)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "keyhole: compile and enforce the outbound credentials of sandboxed agents")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: keyhole <command> [flags] [PATH...]")
	fmt.Fprintln(w)
	// The summaries start in one column, after the longest name.
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s %s\n", width, c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'keyhole help <command>' for a command's flags and examples, and")
	fmt.Fprintln(w, "'keyhole help <CODE>' for what a diagnostic's code catches and how to fix it.")
}

// parse parses flags that may come before, between or after the
// positional arguments, as users type them (`keyhole check dir --format
// json`). A "--" ends the flags. It returns the positional arguments.
//
// Help asked for (-h, --help) goes to stdout. A bad flag is one line on
// the flag set's output (stderr), with a did-you-mean for an unknown flag
// and a pointer to -h, rather than the whole help.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	help, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	defer func() { fs.Usage = help; fs.SetOutput(out) }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				help()
			} else {
				fmt.Fprintf(out, "%s: %s\nRun '%s -h' for its flags and examples.\n", fs.Name(), flagProblem(fs, err), fs.Name())
			}
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagProblem says what is wrong with a command line the flag package
// refused: for an unknown flag, its name and the nearest flag there is.
func flagProblem(fs *flag.FlagSet, err error) string {
	const unknown = "flag provided but not defined: -"
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, unknown)
	if !ok {
		return msg
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if near := diag.Suggest(name, names); near != "" {
		return fmt.Sprintf("unknown flag %s (did you mean %s?)", dashed(name), dashed(near))
	}
	return "unknown flag " + dashed(name)
}

// dashed writes a flag's name as users type it: -v, --format.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// newFlags returns a flag set that never exits: its help (-h) goes to
// e.stdout, its errors to e.stderr (see parse).
func newFlags(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("keyhole "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stdout, "usage: keyhole %s %s\n", name, synopsis)
		printExamples(e.stdout, name)
		fmt.Fprintln(e.stdout, "\nflags:")
		fs.SetOutput(e.stdout)
		fs.PrintDefaults()
		fs.SetOutput(e.stderr)
	}
	return fs
}

// helpAfterUsage has fs's -h print help to w after the usage and flags.
func helpAfterUsage(fs *flag.FlagSet, w io.Writer, help string) {
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintf(w, "\n%s", help)
	}
}

// flagExit maps a flag parse error to an exit code: -h is not a failure.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// oneOf validates a flag value against its allowed values.
func oneOf(flagName, v string, allowed ...string) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	return fmt.Errorf("%w: --%s %q: want one of %s", errUsage, flagName, v, strings.Join(allowed, ", "))
}

func runVersion(e *env, args []string) int {
	fs := newFlags(e, "version", "")
	if _, err := parse(fs, args); err != nil {
		return flagExit(err)
	}
	fmt.Fprintf(e.stdout, "keyhole %s\n", version.Get())
	return exitOK
}
