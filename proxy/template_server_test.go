package proxy

import (
	"net/http"
	"testing"

	"keyhole.dev/keyhole/proxy/policy"
)

// dottedKeyConfig reads a key that is not a Go identifier with the index
// form, as `keyhole render` writes it from a Connection.
const dottedKeyConfig = configHead + `
  "hosts": [
    {"name": "api.github.com", "connection": "github-acme",
     "inject": {"secret": "acme-github-token", "header": {"name": "Authorization", "value": "Bearer {{ index . \"tls.crt\" }}/{{ .user }}"}}}
  ]
}`

// TestServerDottedKey injects a dotted Secret key, mounted as the kubelet
// mounts it, through the proxy over real sockets.
func TestServerDottedKey(t *testing.T) {
	h := newHarnessConfig(t, dottedKeyConfig)
	h.secrets.write(map[string]string{"tls.crt": canary + "\n", "user": "x-access-token", "token": "unused"})
	resp, _ := h.fetch(t, "https://api.github.com/repos/acme/widgets")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d (%s)", resp.StatusCode, resp.Header.Get(policy.RefusedHeader))
	}
	seen := h.api.seen()
	if len(seen) != 1 {
		t.Fatalf("upstream saw %d requests", len(seen))
	}
	if got, want := seen[0].Header.Get("Authorization"), "Bearer "+canary+"/x-access-token"; got != want {
		t.Fatalf("Authorization = %q, want %q", got, want)
	}
}
