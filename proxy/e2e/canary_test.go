//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCanary drives the proxy through its success and failure paths with a
// unique token planted in the Secret, then checks that the token (and the
// Basic credential built from it) is in no response a client saw, no admin
// endpoint, and no line of the proxy's stdout or stderr. newWorld's cleanup
// checks the proxy's output once it has shut down.
func TestCanary(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	requests := map[string]struct {
		url  string
		args []string
	}{
		"forwarded":           {url: "https://api.github.com/repos/acme/widgets"},
		"forwarded, basic":    {url: "https://github.com/acme/widgets.git/info/refs?service=git-upload-pack"},
		"verbose client":      {url: "https://api.github.com/repos/acme/widgets", args: []string{"-v"}},
		"refused by rules":    {url: "https://api.github.com/user"},
		"host mismatch":       {url: "https://api.github.com/repos/acme/widgets", args: []string{"-H", "Host: evil.example"}},
		"host not allowed":    {url: "https://evil.example/"},
		"proxy authorization": {url: "https://api.github.com/repos/acme/widgets", args: []string{"--proxy-user", "u:p"}},
		"Connection names the injected header": {
			url: "https://api.github.com/repos/acme/widgets", args: []string{"-H", "Connection: Authorization"},
		},
		"redirect": {url: "https://api.github.com/repos/acme/widgets/redirect"},
		// Go's HTTP client reports bytes it finds on an idle
		// connection through the standard logger, quoting them.
		"bytes beyond the response, echoing the credential": {
			url: "https://api.github.com/repos/acme/widgets/pulls/overrun", args: []string{"--data", "{}"},
		},
	}
	for name, tc := range requests {
		t.Run(name, func(t *testing.T) {
			before := len(w.api.requests())
			// w.curl checks the response headers and body, and curl's
			// own output, for the canary.
			w.curl(t, tc.url, tc.args...)
			for _, r := range w.api.requests()[before:] {
				if r.Header.Get("Proxy-Authorization") != "" {
					t.Errorf("the upstream saw Proxy-Authorization")
				}
				if name == "Connection names the injected header" && r.Header.Get("Authorization") != "Bearer "+w.token {
					t.Errorf("Connection: Authorization removed the injected header")
				}
			}
		})
	}

	t.Run("unreadable key", func(t *testing.T) {
		w.secret.update(t, map[string]string{"user": "x-access-token", "token": "line1\nline2-" + w.token})
		w.curl(t, "https://api.github.com/repos/acme/widgets")
		w.secret.update(t, map[string]string{"user": "x-access-token", "token": w.token})
	})

	t.Run("admin endpoints", func(t *testing.T) {
		client := &http.Client{Timeout: 5 * time.Second}
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			resp, err := client.Get(fmt.Sprintf("http://%s%s", w.proxy.admin, path))
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("GET %s: %s", path, resp.Status)
			}
			w.assertNoSecret(t, path, string(body))
			if path == "/metrics" && !strings.Contains(string(body), "# TYPE") {
				t.Errorf("/metrics is not in the Prometheus text format")
			}
		}
	})
}
