package trust

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"keyhole.dev/keyhole/internal/testpki"
	"software.sslmate.com/src/go-pkcs12"
)

// certPEM returns a self-signed certificate; isCA sets basic constraints.
func certPEM(t testing.TB, cn string, isCA bool) []byte {
	t.Helper()
	b, err := testpki.SelfSignedPEM(cn, isCA)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const canary = "keyhole-canary-7f3a9c"

func TestBundle(t *testing.T) {
	rootA, rootB := certPEM(t, "root a", true), certPEM(t, "root b", true)
	ca, leaf := certPEM(t, "sandbox-egress-ca", true), certPEM(t, "leaf", false)
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte(canary)})
	tests := map[string]struct {
		roots, ca []byte
		want      []byte // nil: an error wrapping ErrInvalidPEM
		errHas    string
	}{
		"roots then CA":            {roots: append(append([]byte{}, rootA...), rootB...), ca: ca, want: append(append(append([]byte{}, rootA...), rootB...), ca...)},
		"comments and blank lines": {roots: append([]byte("# Mozilla roots\n\n"), rootA...), ca: append([]byte("\n"), ca...), want: append(append([]byte{}, rootA...), ca...)},
		"no roots":                 {roots: nil, ca: ca, errHas: "roots: no PEM certificate"},
		"a key among the roots":    {roots: append(append([]byte{}, rootA...), key...), ca: ca, errHas: `roots: block 2 is a "PRIVATE KEY"`},
		"the CA file holds a key":  {roots: rootA, ca: append(append([]byte{}, ca...), key...), errHas: `CA certificate: block 2 is a "PRIVATE KEY"`},
		"two CA certificates":      {roots: rootA, ca: append(append([]byte{}, ca...), ca...), errHas: "holds 2 certificates"},
		"a leaf as CA":             {roots: rootA, ca: leaf, errHas: "is not a CA"},
		"garbage after the roots":  {roots: append(append([]byte{}, rootA...), []byte("not pem")...), ca: ca, errHas: "text after the last certificate"},
		"a corrupt certificate":    {roots: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(canary)}), ca: ca, errHas: "roots: block 1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Bundle(tc.roots, tc.ca)
			if tc.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, tc.want) {
					t.Errorf("bundle =\n%s\nwant\n%s", got, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrInvalidPEM) || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("err = %v, want ErrInvalidPEM with %q", err, tc.errHas)
			}
			if strings.Contains(err.Error(), canary) {
				t.Errorf("error holds the content of a block: %v", err)
			}
		})
	}
}

func FuzzBundle(f *testing.F) {
	ca := certPEM(f, "ca", true)
	f.Add(certPEM(f, "root", true), ca)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"), ca)
	f.Add([]byte(""), []byte(""))
	f.Fuzz(func(t *testing.T, roots, ca []byte) {
		out, err := Bundle(roots, ca)
		if err != nil {
			if !errors.Is(err, ErrInvalidPEM) {
				t.Fatalf("error %v does not wrap ErrInvalidPEM", err)
			}
			return
		}
		// A bundle is only certificates, the CA last.
		certs, err := certificates("bundle", out)
		if err != nil || len(certs) < 2 || !certs[len(certs)-1].IsCA {
			t.Fatalf("bundle does not parse back: %v", err)
		}
	})
}

// apiFake records the last request of an API server and answers status.
type apiFake struct {
	status int
	body   string
	req    *http.Request
	data   []byte
}

func (a *apiFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.req = r
	a.data, _ = io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

func TestApplyConfigMap(t *testing.T) {
	tests := map[string]struct {
		status int
		body   string
		errHas string // "" for success
	}{
		"applied":   {status: http.StatusOK, body: `{"kind":"ConfigMap"}`},
		"created":   {status: http.StatusCreated, body: `{"kind":"ConfigMap"}`},
		"forbidden": {status: http.StatusForbidden, body: `{"kind":"Status","reason":"Forbidden","message":"configmaps \"x\" is forbidden"}`, errHas: `403 Forbidden (Forbidden): configmaps "x" is forbidden`},
		"not json":  {status: http.StatusBadGateway, body: `<html>`, errHas: "502 Bad Gateway"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := &apiFake{status: tc.status, body: tc.body}
			srv := httptest.NewTLSServer(fake)
			defer srv.Close()
			dir := t.TempDir()
			token := filepath.Join(dir, "token")
			if err := os.WriteFile(token, []byte("sa-token-1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			pool.AddCert(srv.Certificate())
			c := NewClient(srv.URL, token, pool)
			err := c.ApplyConfigMap(context.Background(), "agents", "support-egress-trust", "keyhole-egress-trust", map[string]string{"bundle.pem": "PEM"}, nil)
			if tc.errHas == "" && err != nil {
				t.Fatal(err)
			}
			if tc.errHas != "" && (!errors.Is(err, ErrAPI) || !strings.Contains(err.Error(), tc.errHas)) {
				t.Fatalf("err = %v, want ErrAPI with %q", err, tc.errHas)
			}
			r := fake.req
			if r.Method != http.MethodPatch || r.URL.Path != "/api/v1/namespaces/agents/configmaps/support-egress-trust" {
				t.Errorf("request %s %s", r.Method, r.URL.Path)
			}
			if q := r.URL.Query(); q.Get("fieldManager") != "keyhole-egress-trust" || q.Get("force") != "true" {
				t.Errorf("query %v", q)
			}
			if r.Header.Get("Content-Type") != "application/apply-patch+yaml" || r.Header.Get("Authorization") != "Bearer sa-token-1" {
				t.Errorf("headers %v", r.Header)
			}
			var body map[string]any
			if err := json.Unmarshal(fake.data, &body); err != nil {
				t.Fatal(err)
			}
			want := `map[apiVersion:v1 data:map[bundle.pem:PEM] kind:ConfigMap metadata:map[name:support-egress-trust namespace:agents]]`
			if got := fmt.Sprint(body); got != want {
				t.Errorf("body %s\nwant %s", got, want)
			}
			if strings.Contains(errString(err), "sa-token-1") {
				t.Errorf("error holds the token: %v", err)
			}
		})
	}
}

func TestInCluster(t *testing.T) {
	dir := t.TempDir()
	ca := certPEM(t, "cluster ca", true)
	tests := map[string]struct {
		env    map[string]string
		files  map[string][]byte
		errHas string
		server string
	}{
		"complete": {
			env:    map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
			files:  map[string][]byte{"ca.crt": ca, "token": []byte("t")},
			server: "https://10.96.0.1:443",
		},
		"IPv6 host": {
			env:    map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"},
			files:  map[string][]byte{"ca.crt": ca, "token": []byte("t")},
			server: "https://[fd00::1]:443",
		},
		"no service env": {files: map[string][]byte{"ca.crt": ca, "token": []byte("t")}, errHas: "KUBERNETES_SERVICE_HOST"},
		"no CA":          {env: map[string]string{"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}, files: map[string][]byte{"token": []byte("t")}, errHas: "ca.crt"},
		"CA not PEM":     {env: map[string]string{"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}, files: map[string][]byte{"ca.crt": []byte("x"), "token": []byte("t")}, errHas: "no PEM certificate"},
		"no token":       {env: map[string]string{"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}, files: map[string][]byte{"ca.crt": ca}, errHas: "token"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sa := filepath.Join(dir, url.PathEscape(name))
			if err := os.MkdirAll(sa, 0o700); err != nil {
				t.Fatal(err)
			}
			for f, b := range tc.files {
				if err := os.WriteFile(filepath.Join(sa, f), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := InCluster(func(k string) string { return tc.env[k] }, sa)
			if tc.errHas != "" {
				if !errors.Is(err, ErrNotInCluster) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want ErrNotInCluster with %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.server != tc.server {
				t.Errorf("server = %s, want %s", c.server, tc.server)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestTrustStore: the PKCS#12 trust store holds every certificate of the
// bundle, in order, marked trusted, and is the same bytes for the same
// bundle.
func TestTrustStore(t *testing.T) {
	roots := append(append(certPEM(t, "root one", true), certPEM(t, "root two", true)...), certPEM(t, "root three", true)...)
	ca := certPEM(t, "egress-ca", true)
	bundle, err := Bundle(roots, ca)
	if err != nil {
		t.Fatal(err)
	}
	p12, err := TrustStore(bundle)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := TrustStore(bundle)
	if !bytes.Equal(p12, again) {
		t.Error("two trust stores of one bundle differ")
	}
	certs, err := pkcs12.DecodeTrustStore(p12, "")
	if err != nil {
		t.Fatalf("decoding with no password: %v", err)
	}
	want, _ := certificates("bundle", bundle)
	if len(certs) != len(want) {
		t.Fatalf("%d certificates, want %d", len(certs), len(want))
	}
	for i := range want {
		if !certs[i].Equal(want[i]) {
			t.Errorf("certificate %d differs", i)
		}
	}
	if _, err := TrustStore([]byte("not PEM")); !errors.Is(err, ErrInvalidPEM) {
		t.Errorf("TrustStore(not PEM) = %v, want ErrInvalidPEM", err)
	}
}
