//go:build e2e

package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// The job's secrets in the hostile suites: the token the comment step is
// given, and a value in the job's environment. Neither may be in anything
// a step writes or prints.
const (
	canaryToken = "ghs_CANARYtokenNeverPrinted0123456789"
	canaryEnv   = "CANARYjobEnvNeverPrinted9876543210"
)

// TestActionHostile runs the Action's shell steps against hostile pull
// requests (testdata/script-action-hostile): the steps run as the runner
// runs them (stepWrapper), and the runner's reading of their logs is
// played too: "runner ID" takes the last step's stdout and stderr, applies
// the workflow commands in them as the runner would (set-output sets the
// step's output, error, warning and notice become annotations) and prints
// what it applied. Comments go through a stand-in gh on PATH (ghStandIn).
func TestActionHostile(t *testing.T) {
	root, writeSteps := actionStepScripts(t, "git", "bash", "jq")
	p := scriptParams(t, "testdata/script-action-hostile", func(env *testscript.Env) error {
		if err := writeSteps(env); err != nil {
			return err
		}
		env.Setenv("GITHUB_ACTION_PATH", root)
		env.Setenv("GITHUB_SERVER_URL", "https://github.com")
		env.Setenv("GITHUB_REPOSITORY", "acme/agents")
		env.Setenv("GITHUB_STEP_SUMMARY", filepath.Join(env.WorkDir, "summary.md"))
		env.Setenv("GITHUB_PATH", filepath.Join(env.WorkDir, "github-path"))
		env.Setenv("INPUT_GITHUB_TOKEN", canaryToken)
		env.Setenv("KEYHOLE_JOB_SECRET", canaryEnv)
		return setupRunner(env)
	})
	p.Cmds["runner"] = cmdRunner
	p.Cmds["nocanary"] = cmdNoCanary
	testscript.Run(t, p)
}

// setupRunner gives a script the runner's temporary directory, the
// stand-in gh first on PATH with its state under $WORK/gh, and a place
// for the steps' logs.
func setupRunner(env *testscript.Env) error {
	for _, d := range []string{"runner-temp", "gh", "bin", "log", "outputs"} {
		if err := os.MkdirAll(filepath.Join(env.WorkDir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(env.WorkDir, "bin", "gh"), []byte(ghStandIn), 0o755); err != nil {
		return err
	}
	env.Setenv("RUNNER_TEMP", filepath.Join(env.WorkDir, "runner-temp"))
	env.Setenv("GH_STANDIN", filepath.Join(env.WorkDir, "gh"))
	env.Setenv("PATH", filepath.Join(env.WorkDir, "bin")+string(os.PathListSeparator)+env.Getenv("PATH"))
	return nil
}

// workflowCommand is a line the runner takes for a command: "::name
// props::data" once leading white space is trimmed, or "##[name props]data"
// anywhere in the line.
var (
	commandV2 = regexp.MustCompile(`^\s*::([A-Za-z-]+)(?: ([^:]*))?::(.*)$`)
	commandV1 = regexp.MustCompile(`##\[([A-Za-z-]+)(?: ([^\]]*))?\](.*)$`)
)

// cmdRunner plays the runner reading a step's log: "runner ID" takes the
// last command's stdout and stderr (the step's), keeps them in
// $WORK/log/ID, and applies their workflow commands: set-output adds to
// the step's outputs (before what the step wrote to GITHUB_OUTPUT, which
// the runner reads after the step and so wins), the others are printed,
// one "command NAME PROPS: DATA" line each.
func cmdRunner(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: runner STEP-ID")
	}
	id := args[0]
	work := ts.Getenv("WORK")
	var log strings.Builder
	var set []string
	for _, stream := range []string{"stdout", "stderr"} {
		out := ts.ReadFile(stream)
		log.WriteString(out)
		for _, line := range strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
			name, props, data, ok := parseCommand(line)
			if !ok {
				continue
			}
			if name == "set-output" {
				key := ""
				for _, p := range strings.FieldsFunc(props, func(r rune) bool { return r == ',' || r == ';' }) {
					if k, v, _ := strings.Cut(p, "="); strings.TrimSpace(k) == "name" {
						key = v
					}
				}
				set = append(set, key+"="+data)
			}
			fmt.Fprintf(ts.Stdout(), "command %s %s: %s\n", name, props, data)
		}
	}
	f := filepath.Join(work, "log", id)
	prev, _ := os.ReadFile(f)
	ts.Check(os.WriteFile(f, append(prev, log.String()...), 0o644))
	outputs := filepath.Join(work, "outputs", id)
	written, err := os.ReadFile(outputs)
	if err != nil && !os.IsNotExist(err) {
		ts.Fatalf("%v", err)
	}
	var b bytes.Buffer
	for _, s := range set {
		b.WriteString(s + "\n")
	}
	b.Write(written)
	ts.Check(os.WriteFile(outputs, b.Bytes(), 0o644))
}

// parseCommand reads line as the runner does: the "::" form first, then
// "##[". Characters the runner's comparison passes over are taken out
// first.
func parseCommand(line string) (name, props, data string, ok bool) {
	if !ciCommand(line) {
		return "", "", "", false
	}
	line = strings.Map(func(r rune) rune {
		if ignorableRune(r) {
			return -1
		}
		return r
	}, line)
	if m := commandV2.FindStringSubmatch(line); m != nil {
		return m[1], m[2], m[3], true
	}
	if m := commandV1.FindStringSubmatch(line); m != nil {
		return m[1], m[2], m[3], true
	}
	return "", "", "", false
}

// cmdNoCanary fails when a canary of the job's secrets is in anything the
// steps wrote or printed: their logs, outputs, the step summary, the
// runner's temporary directory, the comments the stand-in holds, and the
// files named as arguments.
func cmdNoCanary(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("nocanary takes no !")
	}
	work := ts.Getenv("WORK")
	roots := []string{filepath.Join(work, "log"), filepath.Join(work, "outputs"), filepath.Join(work, "gh"), ts.Getenv("RUNNER_TEMP"), ts.Getenv("GITHUB_STEP_SUMMARY")}
	for _, a := range args {
		roots = append(roots, ts.MkAbs(a))
	}
	for _, root := range roots {
		filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			ts.Check(err)
			for _, c := range []string{canaryToken, canaryEnv} {
				if bytes.Contains(b, []byte(c)) {
					ts.Fatalf("a secret of the job's is in %s", p)
				}
			}
			return nil
		})
	}
}

// ghStandIn stands in for gh: the calls the comment steps make (who am I,
// list an issue's comments, create one, update one), on comments kept in
// $GH_STANDIN/comments.json, each with the login of its author. The
// token's own login is $GH_STANDIN_LOGIN; empty, /user is refused as it
// is for GITHUB_TOKEN, whose comments are github-actions[bot]'s. Every
// call is logged to $GH_STANDIN/requests.
const ghStandIn = `#!/usr/bin/env bash
set -euo pipefail
store="$GH_STANDIN/comments.json"
[ -f "$store" ] || echo '[]' > "$store"
[ "${1:-}" = api ] || { echo "gh stand-in: gh ${1:-} is not supported" >&2; exit 2; }
shift
method=GET expr= field= path=
while [ $# -gt 0 ]; do
  case $1 in
    -X) method=$2; shift 2 ;;
    --jq) expr=$2; shift 2 ;;
    -F|-f) field=$2; shift 2 ;;
    --paginate) shift ;;
    *) path=$1; shift ;;
  esac
done
echo "$method $path" >> "$GH_STANDIN/requests"
out() { if [ -n "$expr" ]; then jq -r "$expr"; else cat; fi; }
me=${GH_STANDIN_LOGIN:-github-actions[bot]}
case $method:$path in
  GET:user)
    if [ -z "${GH_STANDIN_LOGIN:-}" ]; then
      echo 'gh: Resource not accessible by integration (HTTP 403)' >&2
      exit 1
    fi
    jq -n --arg l "$me" '{login: $l}' | out ;;
  GET:repos/*/issues/*/comments)
    issue=${path%/comments}; issue=${issue##*/}
    jq --argjson i "$issue" '[.[] | select(.issue == $i) | {id, user, body}]' "$store" | out ;;
  POST:repos/*/issues/*/comments)
    issue=${path%/comments}; issue=${issue##*/}
    jq --argjson i "$issue" --rawfile b "${field#body=@}" --arg u "$me" \
      '. + [{id: (101 + length), issue: $i, user: {login: $u}, body: $b}]' "$store" > "$store.new"
    mv "$store.new" "$store" ;;
  PATCH:repos/*/issues/comments/*)
    id=${path##*/}
    jq --argjson id "$id" --rawfile b "${field#body=@}" 'map(if .id == $id then .body = $b else . end)' "$store" > "$store.new"
    mv "$store.new" "$store" ;;
  *)
    echo "gh stand-in: $method $path is not supported" >&2
    exit 2 ;;
esac
`
