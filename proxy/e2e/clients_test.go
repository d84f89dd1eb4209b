//go:build e2e

package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubstitute checks the promise of docs/spec.md §1 with curl: the
// placeholder is replaced only inside request headers; in the path, the
// query or the body it stays a placeholder and gets no access.
func TestSubstitute(t *testing.T) {
	w := newWorld(t, "substitute.json")
	const ph = "omnia-injected-company"
	tests := map[string]struct {
		url  string
		args []string
		// wantHeader is what the upstream must see in one header, with
		// {token} standing for the real token; "" means the header is absent.
		wantHeader [2]string
		wantURI    string
		wantNoReal bool // the real token must appear nowhere in the request
	}{
		"Bearer placeholder in Authorization": {
			url: "https://api.github.com/user", args: []string{"-H", "Authorization: Bearer " + ph},
			wantHeader: [2]string{"Authorization", "Bearer {token}"}, wantURI: "/user",
		},
		"gh-style token scheme": {
			url: "https://api.github.com/user", args: []string{"-H", "Authorization: token " + ph},
			wantHeader: [2]string{"Authorization", "token {token}"}, wantURI: "/user",
		},
		// Only Authorization carries the credential: an upstream that
		// echoes another header (X-Request-Id, Origin) must only ever
		// echo the placeholder.
		"placeholder in another header stays": {
			url: "https://api.github.com/user", args: []string{"-H", "X-Api-Key: " + ph, "-H", "X-Request-Id: " + ph, "-H", "Origin: https://" + ph},
			wantHeader: [2]string{"X-Request-Id", ph}, wantURI: "/user", wantNoReal: true,
		},
		"no placeholder, no credential": {
			url: "https://api.github.com/user", wantURI: "/user", wantNoReal: true,
		},
		"placeholder in the query stays": {
			url: "https://api.github.com/user?access_token=" + ph, wantURI: "/user?access_token=" + ph, wantNoReal: true,
		},
		"placeholder in the path stays": {
			url: "https://api.github.com/repos/" + ph, wantURI: "/repos/" + ph, wantNoReal: true,
		},
		"placeholder in the body stays": {
			url: "https://api.github.com/user", args: []string{"-X", "GET", "--data", "token=" + ph},
			wantURI: "/user", wantNoReal: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(w.api.requests())
			res := w.curl(t, tc.url, tc.args...)
			if got := res.header.Get(refusal); got != "" {
				t.Fatalf("refused with %q (status %d)", got, res.code)
			}
			seen := w.api.requests()[before:]
			if len(seen) != 1 {
				t.Fatalf("the upstream saw %d requests, want 1", len(seen))
			}
			r := seen[0]
			if r.URI != tc.wantURI {
				t.Errorf("the upstream saw %s, want %s", r.URI, tc.wantURI)
			}
			if tc.wantHeader[0] != "" {
				want := strings.ReplaceAll(tc.wantHeader[1], "{token}", w.token)
				if got := r.Header.Values(tc.wantHeader[0]); len(got) != 1 || got[0] != want {
					// Never print got: it may hold the token.
					t.Errorf("the upstream's %s is not %q with the placeholder replaced (%d values)", tc.wantHeader[0], tc.wantHeader[1], len(got))
				}
			}
			if tc.wantNoReal {
				for k, vs := range r.Header {
					for _, v := range vs {
						if strings.Contains(v, w.token) {
							t.Errorf("header %s carries the real token", k)
						}
					}
				}
				if strings.Contains(r.URI, w.token) {
					t.Errorf("the URI carries the real token")
				}
			}
		})
	}
}

// wantGHRefused runs gh with args (its --include showing the answer's
// headers), which a read-only connector must refuse with the proxy's
// l7-not-allowed before api.github.com sees a request.
func (w *world) wantGHRefused(t *testing.T, env []string, gh string, args ...string) {
	t.Helper()
	before := len(w.api.requests())
	res := w.runClient(t, t.TempDir(), env, gh, args...)
	if res.err == nil {
		t.Fatalf("gh %s succeeded through a read-only connector\n%s", strings.Join(args, " "), res.stdout)
	}
	if !strings.Contains(res.stdout, "X-Omnia-Egress-Refused: l7-not-allowed") {
		t.Errorf("gh did not get the proxy's refusal:\nstdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	}
	if n := len(w.api.requests()) - before; n != 0 {
		t.Errorf("api.github.com saw %d requests", n)
	}
}

// pythonWithRequests is a python3 that can import requests. The python3
// on PATH may be another installation than Debian's (pyenv here), which
// python3-requests does not reach: the first of it and /usr/bin/python3
// that can is taken.
func pythonWithRequests(t *testing.T) string {
	t.Helper()
	for _, p := range []string{requireTool(t, "python3"), "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import requests").Run() == nil {
			return p
		}
	}
	t.Fatal("neither python3 on PATH nor /usr/bin/python3 can import requests: run apt-get install -y python3-requests")
	return ""
}

// TestPythonRequests runs Python requests in the sandbox's environment:
// REQUESTS_CA_BUNDLE trusts the sandbox CA and HTTPS_PROXY finds the proxy.
func TestPythonRequests(t *testing.T) {
	python := pythonWithRequests(t)
	w := newWorld(t, "github-acme.json")
	const script = `
import json, os, requests
h = {"Authorization": "Bearer " + os.environ["GH_TOKEN"], "User-Agent": "support-agent"}
ok = requests.get("https://api.github.com/repos/acme/widgets", headers=h, timeout=20)
no = requests.get("https://api.github.com/user", headers=h, timeout=20)
s = requests.Session()
again = [s.get("https://api.github.com/repos/acme/widgets/pulls", headers=h, timeout=20).status_code for _ in range(3)]
print(json.dumps({"ok": ok.status_code, "name": ok.json()["full_name"], "no": no.status_code,
                  "reason": no.headers.get("X-Omnia-Egress-Refused"), "again": again}))
`
	res := w.runClient(t, t.TempDir(), w.sandboxEnv(t), python, "-c", script)
	if res.err != nil {
		t.Fatalf("python: %v\n%s", res.err, res.stderr)
	}
	var got struct {
		OK     int    `json:"ok"`
		Name   string `json:"name"`
		No     int    `json:"no"`
		Reason string `json:"reason"`
		Again  []int  `json:"again"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatalf("python printed %q: %v", res.stdout, err)
	}
	if got.OK != 200 || got.Name != "acme/widgets" {
		t.Errorf("allowed GET: %d %q, want 200 acme/widgets", got.OK, got.Name)
	}
	if got.No != 403 || got.Reason != "l7-not-allowed" {
		t.Errorf("GET /user: %d %q, want 403 l7-not-allowed", got.No, got.Reason)
	}
	if len(got.Again) != 3 || got.Again[0] != 200 || got.Again[1] != 200 || got.Again[2] != 200 {
		t.Errorf("keep-alive session: %v, want three 200s", got.Again)
	}
}

// TestGhAPI runs the real gh CLI with GH_TOKEN set to the placeholder; gh
// talks to api.github.com, which the proxy resolves to the local upstream.
func TestGhAPI(t *testing.T) {
	gh := requireTool(t, "gh")
	w := newWorld(t, "github-acme.json")
	env := w.ghEnv(t)
	before := len(w.api.requests())
	res := w.runClient(t, t.TempDir(), env, gh, "api", "/repos/acme/widgets")
	if res.err != nil {
		t.Fatalf("gh api /repos/acme/widgets: %v\n%s", res.err, res.stderr)
	}
	var repo struct {
		FullName string `json:"full_name"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &repo); err != nil || repo.FullName != "acme/widgets" {
		t.Errorf("gh printed %q (%v), want the repository", res.stdout, err)
	}
	seen := w.api.requests()[before:]
	if len(seen) == 0 || seen[len(seen)-1].Header.Get("Authorization") != "Bearer "+w.token {
		t.Errorf("the upstream did not see the injected Bearer token from gh's request")
	}

	res = w.runClient(t, t.TempDir(), env, gh, "api", "--include", "/user")
	if res.err == nil {
		t.Errorf("gh api /user succeeded, want a refusal")
	}
	if !strings.Contains(res.stdout, "X-Omnia-Egress-Refused: l7-not-allowed") {
		t.Errorf("gh api --include /user did not show the refusal:\n%s\n%s", res.stdout, res.stderr)
	}
}

// TestGhAPIWrites runs the real gh CLI's writes through the read-only
// agent connector (GH_TOKEN is its placeholder): each is refused by the
// proxy before api.github.com sees it, whichever way gh is told the
// method or the write: -X, --method, a GraphQL mutation, an override
// header, fields sent as a body, --input.
func TestGhAPIWrites(t *testing.T) {
	gh := requireTool(t, "gh")
	w := newWorld(t, "substitute.json")
	env := w.ghEnv(t, "GH_TOKEN=omnia-injected-company")
	input := filepath.Join(t.TempDir(), "issue.json")
	writeFile(t, input, []byte(`{"title":"from the sandbox"}`))
	tests := map[string][]string{
		"-X POST":                     {"-X", "POST", "/repos/acme/widgets/issues", "-f", "title=t"},
		"--method PATCH":              {"--method", "PATCH", "/repos/acme/widgets", "-f", "name=gadgets"},
		"--method DELETE":             {"--method", "DELETE", "/repos/acme/widgets"},
		"-X PUT":                      {"-X", "PUT", "/repos/acme/widgets/subscription", "-F", "subscribed=true"},
		"fields without a method":     {"/repos/acme/widgets/issues", "-f", "title=t"},
		"--input":                     {"/repos/acme/widgets/issues", "--input", input},
		"a GraphQL mutation":          {"graphql", "-f", "query=mutation { addStar(input: {starrableId: \"1\"}) { clientMutationId } }"},
		"GET with an override header": {"-H", "X-HTTP-Method-Override: DELETE", "/repos/acme/widgets"},
		"GET with _method":            {"/repos/acme/widgets?_method=DELETE"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			w.wantGHRefused(t, env, gh, append([]string{"api", "--include"}, args...)...)
		})
	}
}
