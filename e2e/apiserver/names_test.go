//go:build e2e

package apiserver

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// TestSecretNameAndKeyRule holds the rule `keyhole check`, `render` and
// the proxy share (config.CheckSecretName, config.CheckSecretKey) to the
// real API server: each name and key below is sent in a Secret, and in a
// Connection through keyhole's CRD, by a server dry run, and the server
// must accept exactly those the rule accepts.
func TestSecretNameAndKeyRule(t *testing.T) {
	keys := []string{
		"token", "tls.crt", ".dockerconfigjson", ".-", "a..b", "a.", "-", "_", "API_KEY",
		strings.Repeat("k", 253), strings.Repeat("k", 254),
		".", "..", "..data", "..data_tmp", "..2024_01_01_00_00_00.1", "...", "a/b", "../x", "a b", "a:b", "tökén",
	}
	names := []string{
		"acme-github-token", "acme.github.token", "0", strings.Repeat("a", 64), strings.Repeat("a", 253),
		strings.Repeat("a", 254), "Acme", "acme_token", "-acme", "acme-", "acme-.token", "acme..token", ".acme", "acme.",
	}
	check := func(t *testing.T, what, manifest string, want bool) {
		t.Helper()
		_, stderr, err := the.kubectl(t.Context(), []byte(manifest), append(slices.Clone(applyArgs), "--dry-run=server", "-f", "-")...)
		if got := err == nil; got != want {
			t.Errorf("%s: the API server accepts it: %v; keyhole's rule accepts it: %v\n%s", what, got, want, stderr)
		}
	}
	for _, k := range keys {
		t.Run(fmt.Sprintf("key %.40q", k), func(t *testing.T) {
			want := config.CheckSecretKey(k) == nil
			check(t, "Secret data key", fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"rule-check","namespace":"default"},"data":{%q:%q}}`,
				k, base64.StdEncoding.EncodeToString([]byte("x"))), want)
			check(t, "Connection basic key", fmt.Sprintf(`{"apiVersion":"omnia.altairalabs.ai/v1alpha1","kind":"Connection","metadata":{"name":"rule-check","namespace":"default"},
"spec":{"hosts":["api.example.com"],"credential":{"kind":"secret","secretRef":{"name":"rule-check"}},
"placement":{"inject":[{"hosts":["api.example.com"],"basic":{"usernameKey":%q,"passwordKey":"token"}}]}}}`, k), want)
		})
	}
	for _, n := range names {
		t.Run(fmt.Sprintf("name %.40q", n), func(t *testing.T) {
			check(t, "Secret name", fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":%q,"namespace":"default"}}`, n),
				config.CheckSecretName(n) == nil)
		})
	}
}
