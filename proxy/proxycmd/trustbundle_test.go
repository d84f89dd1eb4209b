package proxycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/testpki"
)

// selfSigned returns a self-signed certificate; isCA sets basic
// constraints.
func selfSigned(t *testing.T, cn string, isCA bool) []byte {
	t.Helper()
	b, err := testpki.SelfSignedPEM(cn, isCA)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTrustBundle runs `keyhole-proxy trust-bundle` against a fake API
// server: it writes roots plus the CA to --out and applies the same bytes
// to the ConfigMap, in the namespace $POD_NAMESPACE names.
func TestTrustBundle(t *testing.T) {
	var mu sync.Mutex
	var applied []string // "PATH?QUERY BODY"
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		applied = append(applied, r.Method+" "+r.URL.String()+" "+string(b))
		mu.Unlock()
		w.Write([]byte(`{}`))
	}))
	defer api.Close()
	u, _ := url.Parse(api.URL)
	host, port, _ := net.SplitHostPort(u.Host)

	dir := t.TempDir()
	sa := filepath.Join(dir, "sa")
	os.Mkdir(sa, 0o700)
	apiCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})
	roots, ca, leaf := selfSigned(t, "root", true), selfSigned(t, "egress-ca", true), selfSigned(t, "leaf", false)
	files := map[string][]byte{"sa/ca.crt": apiCA, "sa/token": []byte("tok"), "roots.pem": roots, "ca.crt": ca, "leaf.crt": leaf}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port, "POD_NAMESPACE": "agents"}
	p := func(name string) string { return filepath.Join(dir, name) }
	tests := map[string]struct {
		args      []string
		code      int
		stderrHas string
		applies   int
	}{
		"file and ConfigMap": {
			args: []string{"--ca", p("ca.crt"), "--roots", p("roots.pem"), "--truststore", p("ts.p12"), "--wgetrc", p("wgetrc"), "--php-ini", p("php.ini"), "--out", p("out.pem"), "--configmap", "support-egress-trust"},
			code: exitOK, stderrHas: "applied ConfigMap agents/support-egress-trust keys bundle.pem, wgetrc, php-keyhole.ini, truststore.p12", applies: 1,
		},
		"file only": {
			args: []string{"--ca", p("ca.crt"), "--roots", p("roots.pem"), "--out", p("only.pem")},
			code: exitOK, stderrHas: "wrote " + p("only.pem"),
		},
		"no destination": {args: []string{"--ca", p("ca.crt")}, code: exitUsage, stderrHas: "at least one of --out and --configmap"},
		"a leaf as CA":   {args: []string{"--ca", p("leaf.crt"), "--roots", p("roots.pem"), "--out", p("x.pem")}, code: exitUsage, stderrHas: "is not a CA"},
		"missing roots":  {args: []string{"--ca", p("ca.crt"), "--roots", p("nope.pem"), "--out", p("x.pem")}, code: exitUsage, stderrHas: "--roots"},
		"extra argument": {args: []string{"--ca", p("ca.crt"), "--out", p("x.pem"), "more"}, code: exitUsage, stderrHas: `unexpected argument "more"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			applied = nil
			mu.Unlock()
			var stderr bytes.Buffer
			code := runTrustBundle(context.Background(), tc.args, &stderr, func(k string) string { return env[k] }, sa)
			if code != tc.code || !strings.Contains(stderr.String(), tc.stderrHas) {
				t.Fatalf("exit %d, stderr %q; want %d with %q", code, stderr.String(), tc.code, tc.stderrHas)
			}
			if strings.Contains(stderr.String(), "tok") {
				t.Errorf("stderr holds the token: %q", stderr.String())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(applied) != tc.applies {
				t.Fatalf("%d applies, want %d: %q", len(applied), tc.applies, applied)
			}
			if code != exitOK {
				return
			}
			out := tc.args[len(tc.args)-1]
			for i, a := range tc.args {
				if a == "--out" {
					out = tc.args[i+1]
				}
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if want := string(roots) + string(ca); string(got) != want {
				t.Errorf("bundle =\n%s\nwant roots then CA", got)
			}
			if tc.applies == 0 {
				return
			}
			path, body, _ := strings.Cut(strings.TrimPrefix(applied[0], "PATCH "), " ")
			if path != "/api/v1/namespaces/agents/configmaps/support-egress-trust?fieldManager=keyhole-egress-trust&force=true" {
				t.Errorf("applied to %s", path)
			}
			var cm struct {
				Data       map[string]string `json:"data"`
				BinaryData map[string][]byte `json:"binaryData"`
			}
			if err := json.Unmarshal([]byte(body), &cm); err != nil || cm.Data["bundle.pem"] != string(got) {
				t.Errorf("applied data %v (%v) is not the bundle written", cm.Data, err)
			}
			ts, _ := os.ReadFile(p("ts.p12"))
			rc, _ := os.ReadFile(p("wgetrc"))
			if len(ts) == 0 || !bytes.Equal(cm.BinaryData["truststore.p12"], ts) {
				t.Errorf("applied truststore.p12 (%d bytes) is not the one written (%d bytes)", len(cm.BinaryData["truststore.p12"]), len(ts))
			}
			if cm.Data["wgetrc"] != string(rc) || string(rc) != "# Written by keyhole-proxy trust-bundle: wget reads no CA variable.\nca_certificate = /etc/keyhole/trust/bundle.pem\n" {
				t.Errorf("wgetrc %q, applied %q", rc, cm.Data["wgetrc"])
			}
			ini, _ := os.ReadFile(p("php.ini"))
			if cm.Data["php-keyhole.ini"] != string(ini) || !strings.Contains(string(ini), `curl.cainfo = "/etc/keyhole/trust/bundle.pem"`) {
				t.Errorf("php ini %q, applied %q", ini, cm.Data["php-keyhole.ini"])
			}
		})
	}
}

// TestTrustBundleWatch follows a CA through two renewals, a broken file
// and the end of the predecessor's time: the bundle holds the new CA
// beside the old one at once, drops the old one when its time is up, and
// never changes for a file that is not a CA.
func TestTrustBundleWatch(t *testing.T) {
	dir := t.TempDir()
	roots := selfSigned(t, "root", true)
	a, b, c := selfSigned(t, "ca-a", true), selfSigned(t, "ca-b", true), selfSigned(t, "ca-c", true)
	caFile, out := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "bundle.pem")
	write := func(data []byte) {
		t.Helper()
		if err := writeFileAtomic(caFile, data); err != nil {
			t.Fatal(err)
		}
	}
	write(a)
	var mu sync.Mutex
	clock := time.Unix(1e9, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	var stderr syncBuffer
	p := &publisher{stderr: &stderr, roots: roots, out: out, bundlePath: "/etc/keyhole/trust/bundle.pem"}
	files, err := p.build([]heldCA{{pem: a}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.publish(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- p.watch(ctx, caFile, []heldCA{{pem: a}}, 5*time.Millisecond, time.Hour, now) }()
	waitFor := func(what string, want ...[]byte) {
		t.Helper()
		w := string(roots) + string(bytes.Join(want, nil))
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, _ := os.ReadFile(out)
			if string(got) == w {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the bundle holds %d certificates, not the ones wanted\n%s", what, strings.Count(string(got), "BEGIN"), stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	write(b)
	waitFor("renewed", a, b)
	write([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "keeping the bundle as published") {
		if time.Now().After(deadline) {
			t.Fatalf("a key in the CA file was not refused:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitFor("a broken CA file", a, b)
	write(b)
	mu.Lock()
	clock = clock.Add(time.Hour)
	mu.Unlock()
	waitFor("the predecessor's time up", b)
	write(c)
	waitFor("renewed again", b, c)
	write(b)
	waitFor("back to the predecessor", c, b)
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("watch ended with %d, want %d", code, exitOK)
	}
	if s := stderr.String(); strings.Contains(s, "AAAA") {
		t.Errorf("stderr quotes the CA file: %q", s)
	}
}
