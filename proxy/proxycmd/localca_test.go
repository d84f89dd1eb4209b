package proxycmd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/testpki"
)

// TestLocalCA runs the proxy as -h's workstation example does: the
// Secret's key as a file, a CA minted by --local-ca, a client that
// trusts only the certificate written, and an upstream that records
// what reaches it. The token arrives on an allowed request; the written
// file holds the certificate only; the key is gone after the run.
func TestLocalCA(t *testing.T) {
	const token = "canary-local-ca-token"
	upstreamCA, err := testpki.NewCA("upstream CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := upstreamCA.Leaf("api.github.com")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		io.WriteString(w, "ok")
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	up.StartTLS()
	defer up.Close()
	upstreamPEM := filepath.Join(t.TempDir(), "upstream.pem")
	if err := upstreamCA.WriteFiles(upstreamPEM, filepath.Join(t.TempDir(), "upstream.key")); err != nil {
		t.Fatal(err)
	}
	// The minted key's directory goes where os.MkdirTemp puts it.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.json")
	os.WriteFile(cfg, []byte(`{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig",
 "sandbox":{"name":"support-workspace","namespace":"agents"},
 "ca":{"certFile":"/var/run/keyhole/ca/tls.crt","keyFile":"/var/run/keyhole/ca/tls.key"},
 "secretsDir":"/var/run/keyhole/secrets",
 "hosts":[{"name":"api.github.com","connection":"github-acme",
   "inject":{"secret":"acme-github-token","header":{"name":"Authorization","value":"Bearer {{ .token }}"}},
   "rules":[{"methods":["GET","HEAD"],"pathPrefixes":["/repos/acme/widgets"]}]}]}`), 0o600)
	secrets := filepath.Join(dir, "secrets")
	os.MkdirAll(filepath.Join(secrets, "acme-github-token"), 0o700)
	os.WriteFile(filepath.Join(secrets, "acme-github-token", "token"), []byte(token), 0o600)
	caFile := filepath.Join(dir, "ca.pem")

	p := startRun(t, "--config", cfg, "--secrets-dir", secrets, "--local-ca", caFile, "--upstream-ca", upstreamPEM,
		"--resolve", "api.github.com:443:"+up.Listener.Addr().String(), "--log-flush-interval", "0")
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(caPEM), "PRIVATE KEY") {
		t.Fatalf("%s holds a private key", caFile)
	}
	if keys, _ := filepath.Glob(filepath.Join(tmp, "keyhole-local-ca-*", "tls.key")); len(keys) != 1 {
		t.Fatalf("minted keys in %s: %v, want one", tmp, keys)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s: no certificate", caFile)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: p.listen.String()}),
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}}
	resp, err := client.Get("https://api.github.com/repos/acme/widgets")
	if err != nil {
		t.Fatalf("%v\n%s", err, p.stderr.String())
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("allowed request: %s\n%s", resp.Status, p.stderr.String())
	}
	if a := <-got; a != "Bearer "+token {
		t.Fatalf("upstream saw Authorization %q, want the token", a)
	}
	resp, err = client.Get("https://api.github.com/orgs/acme/members")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("refused request: %s", resp.Status)
	}
	p.stop(t)
	if strings.Contains(p.stderr.String(), token) {
		t.Errorf("the token is in the proxy's log")
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "keyhole-local-ca-*")); len(left) != 0 {
		t.Errorf("the minted key outlived the run: %v", left)
	}
}

// TestLocalCAFlags: --local-ca replaces --ca-cert and --ca-key, so giving
// both is a usage error; an unwritable certificate path is one too.
func TestLocalCAFlags(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.json")
	os.WriteFile(cfg, []byte(`{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig","sandbox":{"name":"s"},"passthrough":["pypi.org"]}`), 0o600)
	for name, tc := range map[string]struct {
		args []string
		msg  string
	}{
		"with --ca-cert": {args: []string{"--local-ca", filepath.Join(dir, "ca.pem"), "--ca-cert", "x"}, msg: "give one or the other"},
		"unwritable":     {args: []string{"--local-ca", filepath.Join(dir, "no", "such", "ca.pem")}, msg: "--local-ca: "},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			code := run(context.Background(), append([]string{"--config", cfg, "--listen", "127.0.0.1:0", "--admin-listen", ""}, tc.args...), &stdout, &stderr, nil)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.msg) {
				t.Fatalf("exit %d, stderr %q; want %d with %q", code, stderr.String(), exitUsage, tc.msg)
			}
		})
	}
}
