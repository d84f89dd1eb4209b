//go:build e2e

package cli

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestActionSteps runs the shell steps of the repository's action.yml as
// the runner runs a composite action's steps (bash -eo pipefail, the
// step's env, its working-directory, GITHUB_OUTPUT per step), in real git
// repositories (testdata/script-action), with the real gh CLI talking to
// a stand-in for GitHub's issue comments API, since GitHub itself cannot
// run here. Each step is steps/<id>.sh in the script's work directory;
// a script gives an input a value with env INPUT_<NAME>=...
func TestActionSteps(t *testing.T) {
	root, writeSteps := actionStepScripts(t, "git", "bash", "gh", "go")
	p := scriptParams(t, "testdata/script-action", func(env *testscript.Env) error {
		if err := writeSteps(env); err != nil {
			return err
		}
		api := newCommentsAPI()
		srv := httptest.NewTLSServer(api)
		env.Defer(srv.Close)
		cert := filepath.Join(env.WorkDir, ".github-api.pem")
		if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
			return err
		}
		env.Values["api"] = api
		// What a runner sets, and what go build needs from this machine.
		for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOPROXY", "GONOSUMDB", "GONOSUMCHECK", "GOSUMDB", "GOTOOLCHAIN"} {
			if v, ok := os.LookupEnv(k); ok {
				env.Setenv(k, v)
			}
		}
		if env.Getenv("GOCACHE") == "" {
			out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output()
			if err != nil {
				return err
			}
			vals := strings.Split(strings.TrimSpace(string(out)), "\n")
			env.Setenv("GOCACHE", vals[0])
			env.Setenv("GOMODCACHE", vals[1])
		}
		env.Setenv("GITHUB_ACTION_PATH", root)
		env.Setenv("GITHUB_SERVER_URL", srv.URL)
		env.Setenv("SSL_CERT_FILE", cert)
		env.Setenv("GH_CONFIG_DIR", filepath.Join(env.WorkDir, ".gh"))
		env.Setenv("GITHUB_REPOSITORY", "acme/agents")
		env.Setenv("RUNNER_TEMP", filepath.Join(env.WorkDir, "runner-temp"))
		env.Setenv("GITHUB_STEP_SUMMARY", filepath.Join(env.WorkDir, "summary.md"))
		env.Setenv("GITHUB_PATH", filepath.Join(env.WorkDir, "github-path"))
		return os.MkdirAll(filepath.Join(env.WorkDir, "runner-temp"), 0o755)
	})
	p.Cmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
		// comments prints the pull request comments the stand-in holds,
		// and the requests it served.
		"comments": func(ts *testscript.TestScript, neg bool, args []string) {
			api := ts.Value("api").(*commentsAPI)
			api.mu.Lock()
			defer api.mu.Unlock()
			for _, c := range api.comments {
				fmt.Fprintf(ts.Stdout(), "comment %d on #%d:\n%s\n", c.ID, c.Issue, c.Body)
			}
			for _, r := range api.requests {
				fmt.Fprintf(ts.Stdout(), "request %s\n", r)
			}
		},
	}
	testscript.Run(t, p)
}

// needTools fails t unless each of tools is on PATH.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH (make test installs it): %v", tool, err)
		}
	}
}

// actionStepScripts fails t unless the tools a suite needs are on PATH,
// and returns the repository's root and a setup that writes each shell
// step of its action.yml as steps/<id>.sh in a script's work directory.
func actionStepScripts(t *testing.T, tools ...string) (root string, writeSteps func(env *testscript.Env) error) {
	t.Helper()
	needTools(t, tools...)
	root, wrappers := actionStepWrappers(t)
	return root, func(env *testscript.Env) error {
		dir := filepath.Join(env.WorkDir, "steps")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for id, w := range wrappers {
			if err := os.WriteFile(filepath.Join(dir, id+".sh"), []byte(w), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

// actionStepWrappers returns the repository's root and, by step id, a
// script that runs each shell step of its action.yml as the runner would
// (stepWrapper).
func actionStepWrappers(t *testing.T) (root string, wrappers map[string]string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	a := readAction(t, filepath.Join(root, "action.yml"))
	var inputs []string
	for name := range a.Inputs {
		inputs = append(inputs, name)
	}
	wrappers = map[string]string{}
	for _, s := range a.Runs.Steps {
		if s.Run == "" {
			continue
		}
		w, err := stepWrapper(a, s, inputs)
		if err != nil {
			t.Fatalf("step %q: %v", s.Name, err)
		}
		wrappers[s.ID] = w
	}
	return root, wrappers
}

// stepWrapper is a script that runs step s as the runner would.
func stepWrapper(a action, s actionStep, inputs []string) (string, error) {
	var b strings.Builder
	b.WriteString("#!/usr/bin/env bash\nset -eu\n")
	fmt.Fprintf(&b, "# The step %q of action.yml, as the runner runs it.\n", s.Name)
	for name, in := range a.Inputs {
		def := in.Default
		if def == "${{ github.token }}" {
			def = "test-token"
		}
		v := inputVar(name)
		fmt.Fprintf(&b, "if [ -z \"${%s+set}\" ]; then %s=%s; fi\n", v, v, shellQuote(def))
	}
	fmt.Fprintf(&b, "mkdir -p \"$WORK/outputs\"\nexport GITHUB_OUTPUT=\"$WORK/outputs/%s\"\n: > \"$GITHUB_OUTPUT\"\n", s.ID)
	for k, v := range s.Env {
		sh, err := translateExpr(v, inputs)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, sh)
	}
	if s.WorkingDirectory != "" {
		sh, err := translateExpr(s.WorkingDirectory, inputs)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "cd %s\n", sh)
	}
	b.WriteString("exec bash --noprofile --norc -eo pipefail -c " + shellQuote(s.Run) + "\n")
	return b.String(), nil
}

// commentsAPI stands in for the calls of GitHub's REST API that the
// comment step makes through gh: who the token is (refused, as it is for
// GITHUB_TOKEN), list, create and update an issue's comments. Comments
// are created as github-actions[bot]'s.
type commentsAPI struct {
	mu       sync.Mutex
	next     int
	comments []apiComment
	requests []string
}

type apiComment struct {
	ID    int     `json:"id"`
	Issue int     `json:"-"`
	User  apiUser `json:"user"`
	Body  string  `json:"body"`
}

type apiUser struct {
	Login string `json:"login"`
}

func newCommentsAPI() *commentsAPI { return &commentsAPI{next: 100} }

var (
	issueComments = regexp.MustCompile(`^/api/v3/repos/acme/agents/issues/(\d+)/comments$`)
	oneComment    = regexp.MustCompile(`^/api/v3/repos/acme/agents/issues/comments/(\d+)$`)
)

func (a *commentsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests = append(a.requests, r.Method+" "+r.URL.Path)
	if r.Header.Get("Authorization") != "token test-token" {
		http.Error(w, `{"message": "Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/api/v3/user" {
		http.Error(w, `{"message": "Resource not accessible by integration"}`, http.StatusForbidden)
		return
	}
	var in struct {
		Body string `json:"body"`
	}
	if r.Method != http.MethodGet {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
			http.Error(w, `{"message": "no body"}`, http.StatusUnprocessableEntity)
			return
		}
	}
	if m := issueComments.FindStringSubmatch(r.URL.Path); m != nil {
		issue, _ := strconv.Atoi(m[1])
		switch r.Method {
		case http.MethodGet:
			list := []apiComment{}
			for _, c := range a.comments {
				if c.Issue == issue {
					list = append(list, c)
				}
			}
			json.NewEncoder(w).Encode(list)
			return
		case http.MethodPost:
			a.next++
			c := apiComment{ID: a.next, Issue: issue, User: apiUser{Login: "github-actions[bot]"}, Body: in.Body}
			a.comments = append(a.comments, c)
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(c)
			return
		}
	}
	if m := oneComment.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPatch {
		id, _ := strconv.Atoi(m[1])
		for i := range a.comments {
			if a.comments[i].ID == id {
				a.comments[i].Body = in.Body
				json.NewEncoder(w).Encode(a.comments[i])
				return
			}
		}
	}
	http.Error(w, `{"message": "Not Found"}`, http.StatusNotFound)
}

// shellQuote quotes s for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
