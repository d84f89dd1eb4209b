//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBadConfig runs the binary on configs it must refuse: it exits with
// the usage code 2 before listening, and says what is wrong.
func TestBadConfig(t *testing.T) {
	ca := newCA(t, t.TempDir(), "bad-config-ca")
	tests := map[string]struct {
		config string // file contents; "" means the file does not exist
		want   string // in stderr
	}{
		"missing file":          {want: "no such file"},
		"not JSON":              {config: "hosts: [api.github.com]\n", want: "cannot decode"},
		"unknown field":         {config: `{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig","sandbox":{"name":"s"},"rulez":[]}`, want: "rulez"},
		"wrong apiVersion":      {config: `{"apiVersion":"v0","kind":"ProxyConfig","sandbox":{"name":"s"}}`, want: "apiVersion"},
		"two injection forms":   {config: `{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig","sandbox":{"name":"s"},"hosts":[{"name":"api.github.com","connection":"c","inject":{"secret":"s","header":{"name":"Authorization","value":"x"},"basic":{"usernameKey":"u","passwordKey":"p"}}}]}`, want: "exactly one"},
		"template with a pipe":  {config: `{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig","sandbox":{"name":"s"},"hosts":[{"name":"api.github.com","connection":"c","inject":{"secret":"s","header":{"name":"Authorization","value":"Bearer {{ .token | printf }}"}}}]}`, want: "template"},
		"host with a wildcard":  {config: `{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig","sandbox":{"name":"s"},"passthrough":["*.github.com"]}`, want: "passthrough[0]"},
		"rule matching nothing": {config: `{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig","sandbox":{"name":"s"},"hosts":[{"name":"api.github.com","connection":"c","inject":{"secret":"s","header":{"name":"Authorization","value":"x"}},"rules":[{"methods":["GET"]}]}]}`, want: "matches nothing"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "proxy.json")
			if tc.config != "" {
				writeFile(t, cfg, []byte(tc.config))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, proxyBin, "--config", cfg,
				"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
				"--ca-cert", ca.CertFile, "--ca-key", ca.KeyFile, "--secrets-dir", t.TempDir())
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("keyhole-proxy kept running on a bad config")
			}
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Errorf("exit code %d (%v), want 2", code, err)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr does not mention %q:\n%s", tc.want, stderr.String())
			}
		})
	}
}
