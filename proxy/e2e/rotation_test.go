//go:build e2e

package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecretRotation swaps the mounted Secret the way the kubelet does
// (a new timestamped directory, then one rename of ..data) while the proxy
// runs: the next request uses the new value, a removed or unusable key
// gives credential-unavailable, and a restored one works again, with no
// restart. The steps run in order on one proxy.
func TestSecretRotation(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	rotated, rotatedAgain := canary(t), canary(t)
	steps := []struct {
		name string
		// token, when set, becomes the real token the upstreams accept.
		token string
		data  map[string]string
		// age backdates the values before the request, so a proxy that
		// caches settled files serves this one from its cache.
		age  bool
		code int
		// reason is the refusal expected, "" when forwarded.
		reason string
	}{
		{name: "initial token", code: 200},
		{name: "settled files, served again", age: true, code: 200},
		{name: "rotated token is used by the next request", token: rotated,
			data: map[string]string{"user": "x-access-token", "token": rotated}, code: 200},
		{name: "rotated again to settled files", token: rotatedAgain,
			data: map[string]string{"user": "x-access-token", "token": rotatedAgain}, age: true, code: 200},
		{name: "removed key", data: map[string]string{"user": "x-access-token"},
			code: 502, reason: "credential-unavailable"},
		{name: "empty value", data: map[string]string{"user": "x-access-token", "token": ""},
			code: 502, reason: "credential-unavailable"},
		{name: "value with a line break inside", data: map[string]string{"user": "x-access-token", "token": rotated + "\r\nX-Injected: 1"},
			code: 502, reason: "credential-unavailable"},
		{name: "value with NUL", data: map[string]string{"user": "x-access-token", "token": rotated + "\x00"},
			code: 502, reason: "credential-unavailable"},
		{name: "restored key works again", data: map[string]string{"user": "x-access-token", "token": rotatedAgain + "\n"},
			code: 200},
	}
	for _, st := range steps {
		ok := t.Run(st.name, func(t *testing.T) {
			if st.token != "" {
				w.setToken(t, st.token)
				w.apiState.setToken(st.token)
				w.gitState.setToken(st.token)
			}
			if st.data != nil {
				w.secret.update(t, st.data)
			}
			if st.age {
				w.secret.age(t)
				// One request to fill a cache, then the checked one.
				w.curl(t, "https://api.github.com/repos/acme/widgets")
			}
			before := len(w.api.requests())
			res := w.curl(t, "https://api.github.com/repos/acme/widgets")
			if res.code != st.code {
				t.Fatalf("status %d, want %d (%s %q)", res.code, st.code, refusal, res.header.Get(refusal))
			}
			seen := w.api.requests()[before:]
			if st.reason != "" {
				wantRefused(t, "api.github.com", res.code, res.header, st.code, st.reason)
				if len(seen) != 0 {
					t.Errorf("the upstream saw a request the proxy could not inject")
				}
				// The basic form reads the same key.
				g := w.curl(t, "https://github.com/acme/widgets.git/info/refs?service=git-upload-pack")
				wantRefused(t, "github.com", g.code, g.header, st.code, st.reason)
				return
			}
			if len(seen) != 1 || seen[0].Header.Get("Authorization") != "Bearer "+w.token {
				t.Errorf("the upstream did not see the current token")
			}
		})
		if !ok {
			break
		}
	}
}

// TestConfigReload rewrites the config file while the proxy runs, turning
// the github.com entry off; new requests lose access within a minute
// (docs/spec.md §4), with no restart.
func TestConfigReload(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "proxy.json")
	data, err := os.ReadFile(filepath.Join("testdata", "github-acme.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfg, data)
	w := newWorld(t, cfg)

	if res := w.curl(t, "https://github.com/acme/widgets.git/info/refs?service=git-upload-pack"); res.code != 200 {
		t.Fatalf("before the change: status %d, want 200", res.code)
	}
	// Drop the github.com entry: the api.github.com entry ends at the
	// first host's closing brace.
	s := string(data)
	i := strings.Index(s, `    {
      "name": "github.com"`)
	if i < 0 {
		t.Fatal("testdata/github-acme.json changed shape")
	}
	off := strings.TrimRight(s[:i], " \n,") + "\n  ]\n}\n"
	tmp := cfg + ".tmp"
	writeFile(t, tmp, []byte(off))
	if err := os.Rename(tmp, cfg); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	for {
		res := w.curl(t, "https://github.com/acme/widgets.git/info/refs?service=git-upload-pack")
		if res.connect == http.StatusForbidden && res.header.Get(refusal) == "host-not-allowed" {
			t.Logf("refused %s after the change", time.Since(changed).Round(time.Second))
			break
		}
		if time.Since(changed) > 65*time.Second {
			t.Fatalf("github.com still reachable %s after its entry was removed", time.Since(changed).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
	if res := w.curl(t, "https://api.github.com/repos/acme/widgets"); res.code != 200 {
		t.Errorf("api.github.com after the change: status %d, want 200", res.code)
	}
}
