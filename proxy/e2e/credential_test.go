//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestCredentialEcho: an upstream that echoes request headers back (in a
// 103, the final header, trailers) hands curl [REDACTED], never the
// credential, whichever form it was injected in; with the substitute
// form, a placeholder in X-Request-Id or Origin goes out, and comes back,
// as the placeholder. w.curl fails the test if the credential appears
// anywhere in what curl received or printed.
func TestCredentialEcho(t *testing.T) {
	tests := map[string]struct {
		config string
		args   []string
		// wantRequestID is the X-Request-Id the upstream must see.
		wantRequestID string
	}{
		"header form": {
			config: "github-acme.json", args: []string{"-H", "X-Request-Id: r-1"}, wantRequestID: "r-1",
		},
		"substitute form": {
			config: "substitute.json",
			args: []string{"-H", "Authorization: Bearer omnia-injected-company", "-H", "X-Request-Id: omnia-injected-company",
				"-H", "Origin: https://omnia-injected-company.example"},
			wantRequestID: "omnia-injected-company",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.config)
			res := w.curl(t, "https://api.github.com/repos/acme/widgets/echo", tc.args...)
			if res.code != 200 {
				t.Fatalf("status %d (%s %q): the upstream did not get the credential", res.code, refusal, res.header.Get(refusal))
			}
			if got := res.header.Get("X-Echo-Authorization"); got != "Bearer [REDACTED]" {
				t.Errorf("X-Echo-Authorization came back as %q, want Bearer [REDACTED]", got)
			}
			if got := res.header.Get(refusal); got != "" {
				t.Errorf("the upstream's own %s reached curl: %q", refusal, got)
			}
			if got := res.header.Get("X-Request-Id"); got != tc.wantRequestID {
				t.Errorf("X-Request-Id came back as %q, want %q", got, tc.wantRequestID)
			}
			seen := w.api.find("GET", "/repos/acme/widgets/echo")
			if len(seen) != 1 || seen[0].Header.Get("X-Request-Id") != tc.wantRequestID {
				t.Fatalf("the upstream saw %d requests, X-Request-Id not %q", len(seen), tc.wantRequestID)
			}
			w.wantLog(t, logQuery{host: "api.github.com", method: "GET", path: "/repos/acme/widgets/echo", decision: "inject", reason: "allowed"})
			if n := strings.Count(w.proxy.stderr.String(), `"msg":"upstream response held the credential; redacted"`); n < 2 {
				t.Errorf("%d redaction lines, want one for the 103 and one for the final header at least", n)
			}
		})
	}
}

// TestNeverWithCredential drives curl as a hostile sandbox would: methods
// that never carry a credential, override headers and the _method
// parameter are refused with l7-not-allowed before any upstream sees
// them, on hosts with rules and without, each with its one log line.
func TestNeverWithCredential(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	tests := map[string]struct {
		url  string
		args []string
		log  logQuery
	}{
		"TRACE on a host without rules": {
			url: "https://github.com/acme/widgets.git/info/refs", args: []string{"-X", "TRACE"},
			log: logQuery{host: "github.com", method: "TRACE", path: "/acme/widgets.git/info/refs"},
		},
		"TRACE on a host with rules": {
			url: "https://api.github.com/repos/acme/widgets", args: []string{"-X", "TRACE"},
			log: logQuery{host: "api.github.com", method: "TRACE", path: "/repos/acme/widgets"},
		},
		"an extension method on a host without rules": {
			url: "https://github.com/acme/widgets.git", args: []string{"-X", "PROPFIND"},
			log: logQuery{host: "github.com", method: "PROPFIND"},
		},
		"OPTIONS *": {
			url: "https://github.com/", args: []string{"-X", "OPTIONS", "--request-target", "*"},
			log: logQuery{host: "github.com", method: "OPTIONS", path: "*"},
		},
		"X-HTTP-Method-Override on an allowed POST": {
			url:  "https://api.github.com/repos/acme/widgets/pulls",
			args: []string{"-X", "POST", "-H", "X-HTTP-Method-Override: DELETE", "--data", "{}"},
			log:  logQuery{host: "api.github.com", method: "POST", path: "/repos/acme/widgets/pulls"},
		},
		"X-HTTP-Method on an allowed POST": {
			url:  "https://api.github.com/repos/acme/widgets/pulls",
			args: []string{"-X", "POST", "-H", "X-HTTP-Method: DELETE", "--data", "{}"},
			log:  logQuery{host: "api.github.com", method: "POST", path: "/repos/acme/widgets/pulls"},
		},
		"X-Method-Override on an allowed POST": {
			url:  "https://api.github.com/repos/acme/widgets/pulls",
			args: []string{"-X", "POST", "-H", "X-Method-Override: DELETE", "--data", "{}"},
			log:  logQuery{host: "api.github.com", method: "POST", path: "/repos/acme/widgets/pulls"},
		},
		"X-Original-URL on an allowed GET": {
			url: "https://api.github.com/repos/acme/widgets", args: []string{"-H", "X-Original-URL: /user"},
			log: logQuery{host: "api.github.com", method: "GET", path: "/repos/acme/widgets"},
		},
		"X-Rewrite-URL on an allowed GET": {
			url: "https://api.github.com/repos/acme/widgets", args: []string{"-H", "X-Rewrite-URL: /user"},
			log: logQuery{host: "api.github.com", method: "GET", path: "/repos/acme/widgets"},
		},
		"X-Override-URL on an allowed GET": {
			url: "https://api.github.com/repos/acme/widgets", args: []string{"-H", "X-Override-URL: /user"},
			log: logQuery{host: "api.github.com", method: "GET", path: "/repos/acme/widgets"},
		},
		"_method on an allowed POST": {
			url:  "https://api.github.com/repos/acme/widgets/pulls?_method=DELETE",
			args: []string{"-X", "POST", "--data", "{}"},
			log:  logQuery{host: "api.github.com", method: "POST", path: "/repos/acme/widgets/pulls"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(w.api.requests()) + len(w.git.requests())
			res := w.curl(t, tc.url, tc.args...)
			wantRefused(t, name, res.code, res.header, 403, "l7-not-allowed")
			if n := len(w.api.requests()) + len(w.git.requests()) - before; n != 0 {
				t.Errorf("the upstreams saw %d requests", n)
			}
			q := tc.log
			q.decision, q.reason = "refuse", "l7-not-allowed"
			w.wantLog(t, q)
		})
	}

	t.Run("CONNECT inside the tunnel", func(t *testing.T) {
		before := len(w.git.requests())
		c, br := w.mustTunnel(t, "github.com")
		resp := roundTrip(t, c, br, "CONNECT", "CONNECT github.com:443 HTTP/1.1\r\nHost: github.com:443\r\n\r\n")
		wantRefused(t, "CONNECT in a tunnel", resp.StatusCode, resp.Header, 403, "l7-not-allowed")
		if n := len(w.git.requests()) - before; n != 0 {
			t.Errorf("the upstream saw %d requests", n)
		}
		w.wantLog(t, logQuery{host: "github.com", method: "CONNECT", decision: "refuse", reason: "l7-not-allowed"})
	})

	t.Run("OPTIONS * on the proxy port", func(t *testing.T) {
		curlBin := requireTool(t, "curl")
		out, _ := exec.Command(curlBin, "-sS", "--max-time", "10", "-o", "/dev/null", "-D", "-",
			"-X", "OPTIONS", "--request-target", "*", "http://"+w.proxy.addr+"/").CombinedOutput()
		h := lastHeaderBlock(string(out))
		var code int
		fmt.Sscanf(string(out), "HTTP/1.1 %d", &code)
		wantRefused(t, "OPTIONS * on the proxy port", code, h, 403, "host-not-allowed")
		w.wantLog(t, logQuery{method: "OPTIONS", path: "*", decision: "refuse", reason: "host-not-allowed"})
	})
}
