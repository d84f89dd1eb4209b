package proxy

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestServerEncodedSlash: over real sockets, a path with an encoded '/'
// inside a segment (npm's /@scope%2fname, GitLab's group%2Fproject)
// reaches the upstream exactly as sent, with the credential, where no
// rule can be confused by it: on a host without rules, by a bodiless GET
// (the pooled fast path) and by a PUT with a body (the transport), and
// under a prefix that holds the path read either way. Where a rule would
// read it one way and an upstream another, or it hides a dot segment,
// it is refused and the upstream gets nothing.
func TestServerEncodedSlash(t *testing.T) {
	var mu sync.Mutex
	var seen []string // request URIs as the upstream read them, with whether it got the credential
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Host+r.RequestURI+" "+r.Header.Get("Authorization"))
		mu.Unlock()
	})
	h := newHarness(t, withUpstream(t, echo, "api.github.com", "uploads.github.com"))
	tests := map[string]struct {
		host, raw string
		status    int
	}{
		"scoped package, no rules": {host: "uploads.github.com", status: 200,
			raw: "GET /@acme%2fwidgets HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Bearer omnia-injected-github\r\n\r\n"},
		"scoped publish, no rules": {host: "uploads.github.com", status: 200,
			raw: "PUT /@acme%2Fwidgets HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Bearer omnia-injected-github\r\nContent-Length: 2\r\n\r\n{}"},
		"under a prefix either way": {host: "api.github.com", status: 200,
			raw: "GET /repos/acme/widgets/contents/docs%2Freadme.md?ref=main HTTP/1.1\r\nHost: api.github.com\r\n\r\n"},
		"a prefix's segments spelled across": {host: "api.github.com", status: 403,
			raw: "GET /repos/acme%2Fwidgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n"},
		"out of the prefix by encoded dots": {host: "api.github.com", status: 403,
			raw: "GET /repos/acme/widgets%2F..%2F..%2Fother HTTP/1.1\r\nHost: api.github.com\r\n\r\n"},
		"an empty segment": {host: "uploads.github.com", status: 403,
			raw: "GET /%2F%2Fevil HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Bearer omnia-injected-github\r\n\r\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			before := len(seen)
			mu.Unlock()
			c, br := h.tlsTunnel(tc.host, tc.host, false)
			defer c.Close()
			io.WriteString(c, tc.raw)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if resp.StatusCode != tc.status {
				t.Fatalf("%s; want %d", resp.Status, tc.status)
			}
			mu.Lock()
			got := seen[before:]
			mu.Unlock()
			if tc.status != 200 {
				if len(got) != 0 || resp.Header.Get("X-Omnia-Egress-Refused") != "l7-not-allowed" {
					t.Fatalf("refused with %q, and the upstream got %q", resp.Header.Get("X-Omnia-Egress-Refused"), got)
				}
				return
			}
			line, _, _ := strings.Cut(tc.raw, " HTTP/1.1")
			method, target, _ := strings.Cut(line, " ")
			if want := method + " " + tc.host + target + " Bearer " + canary; len(got) != 1 || got[0] != want {
				t.Fatalf("the upstream got %q, want %q", redactCanary(got), redactCanary([]string{want}))
			}
		})
	}
}

// TestServerEncodedSlashGitLab: GitLab's API names a project by its
// path with the '/' encoded, and a file in it likewise. Under the gitlab
// connector's read-only rules (GET and HEAD under /, git's reads by
// pattern) the proxy forwards such a GET as sent with the credential, on
// real sockets, and refuses a POST to the project's issues.
func TestServerEncodedSlashGitLab(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.RequestURI+" "+r.Header.Get("Private-Token"))
		mu.Unlock()
	})
	cfg := configHead + `
  "hosts": [
    {"name": "gitlab.com", "connection": "gitlab",
     "inject": {"secret": "acme-github-token", "header": {"name": "PRIVATE-TOKEN", "value": "{{ .token }}"}},
     "rules": [{"methods": ["GET", "HEAD"], "pathPrefixes": ["/"]},
               {"methods": ["POST"], "pathPatterns": ["/*/*/git-upload-pack", "/*/*/*/git-upload-pack"]}]}
  ]
}`
	h := newHarnessConfig(t, cfg, withUpstream(t, echo, "gitlab.com"))
	c := h.client()
	const file = "/api/v4/projects/acme%2Fwidgets/repository/files/docs%2Freadme.md/raw?ref=main"
	resp, err := c.Get("https://gitlab.com" + file)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", file, resp.Status)
	}
	resp, err = c.Post("https://gitlab.com/api/v4/projects/acme%2Fwidgets/issues", "application/json", strings.NewReader(`{"title":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Omnia-Egress-Refused") != "l7-not-allowed" {
		t.Fatalf("POST to the project's issues: %s %q", resp.Status, resp.Header.Get("X-Omnia-Egress-Refused"))
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "GET " + file + " " + canary; len(seen) != 1 || seen[0] != want {
		t.Fatalf("the upstream got %q, want %q", redactCanary(seen), redactCanary([]string{want}))
	}
}

// redactCanary writes the credential as <credential>, for a failure
// message.
func redactCanary(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ReplaceAll(s, canary, "<credential>")
	}
	return out
}
