// Package trust builds a sandbox's trust bundle, the system roots plus the
// public certificate of the sandbox's CA, and publishes it to the
// <claim>-egress-trust ConfigMap through the Kubernetes API. It is what
// the proxy image's `trust-bundle` command runs in the init container of
// the rendered proxy pod (docs/render.md): the proxy's image holds one
// binary and no kubectl, shell or keytool. Beside bundle.pem it makes what
// the runtimes that cannot read a PEM bundle need: a PKCS#12 trust store
// for Java and a wgetrc for wget. It never reads the CA's private key.
package trust

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// Errors wrap one of these.
var (
	// ErrInvalidPEM: the roots or the CA certificate are not what they
	// must be (no certificate, a block that is not one, a CA that is not).
	ErrInvalidPEM = errors.New("invalid certificate input")
	// ErrNotInCluster: the service account files or the API server's
	// address the kubelet provides are missing.
	ErrNotInCluster = errors.New("no in-cluster API access")
	// ErrAPI: the API server refused or failed the request.
	ErrAPI = errors.New("kubernetes API request failed")
)

// Bundle returns roots followed by each of cas, each certificate
// re-encoded as PEM. roots must hold at least one certificate and only
// certificates; each of cas (at least one) must hold exactly one, a CA
// certificate. Anything else in either (a private key above all) is an
// error that names the block type only.
func Bundle(roots []byte, cas ...[]byte) ([]byte, error) {
	certs, err := certificates("roots", roots)
	if err != nil {
		return nil, err
	}
	if len(cas) == 0 {
		return nil, fmt.Errorf("%w: no CA certificate", ErrInvalidPEM)
	}
	for _, ca := range cas {
		caCerts, err := certificates("CA certificate", ca)
		if err != nil {
			return nil, err
		}
		if len(caCerts) != 1 {
			return nil, fmt.Errorf("%w: the CA certificate file holds %d certificates, want 1", ErrInvalidPEM, len(caCerts))
		}
		if !caCerts[0].IsCA {
			return nil, fmt.Errorf("%w: the CA certificate (subject %q) is not a CA", ErrInvalidPEM, caCerts[0].Subject.String())
		}
		certs = append(certs, caCerts[0])
	}
	var b bytes.Buffer
	for _, c := range certs {
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

func certificates(what string, data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := data
	for i := 1; ; i++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%w: %s: block %d is a %q, not a CERTIFICATE", ErrInvalidPEM, what, i, block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: block %d: %w", ErrInvalidPEM, what, i, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: no PEM certificate", ErrInvalidPEM, what)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("%w: %s: text after the last certificate is not PEM", ErrInvalidPEM, what)
	}
	return out, nil
}

// Keys of the trust ConfigMap beside bundle.pem.
const (
	TrustStoreKey = "truststore.p12"
	WgetRCKey     = "wgetrc"
	PHPIniKey     = "php-keyhole.ini"
)

// TrustStore returns every certificate of bundle (as Bundle returns it)
// as a PKCS#12 trust store without password, encryption or MAC, each
// certificate marked trusted for Java (JDK 8 and later read it with
// -Djavax.net.ssl.trustStoreType=PKCS12 and no password). Nothing in it
// is secret: it holds public certificates only.
func TrustStore(bundle []byte) ([]byte, error) {
	certs, err := certificates("bundle", bundle)
	if err != nil {
		return nil, err
	}
	entries := make([]pkcs12.TrustStoreEntry, 0, len(certs))
	for i, c := range certs {
		// Stable aliases keep the bytes the same for the same bundle.
		entries = append(entries, pkcs12.TrustStoreEntry{Cert: c, FriendlyName: fmt.Sprintf("keyhole-%03d", i)})
	}
	p12, err := pkcs12.Passwordless.EncodeTrustStoreEntries(entries, "")
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the trust store: %w", ErrInvalidPEM, err)
	}
	return p12, nil
}

// WgetRC is a wgetrc that points wget, which reads no CA variable, at the
// bundle: WGETRC names it in the sandbox's environment.
func WgetRC(bundlePath string) []byte {
	return []byte("# Written by keyhole-proxy trust-bundle: wget reads no CA variable.\nca_certificate = " + bundlePath + "\n")
}

// PHPIni is an ini file that points PHP's curl extension (curl.cainfo:
// libcurl reads no CA variable) and its openssl streams (openssl.cafile:
// file_get_contents and friends) at the bundle. PHP_INI_SCAN_DIR, in the
// sandbox's environment, adds the directory that holds it to the ones
// PHP scans.
func PHPIni(bundlePath string) []byte {
	return []byte("; Written by keyhole-proxy trust-bundle: PHP's curl and openssl read no CA variable.\ncurl.cainfo = \"" + bundlePath + "\"\nopenssl.cafile = \"" + bundlePath + "\"\n")
}

// ServiceAccountDir is where the kubelet mounts a pod's API credentials.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Client talks to the API server the way an in-cluster client does: the
// server from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, its CA
// and the pod's token from the service account directory. The token is
// re-read for every request, since the kubelet rotates it.
type Client struct {
	server    string
	tokenFile string
	http      *http.Client
}

// InCluster returns the Client of the pod it runs in; getenv is
// os.Getenv outside tests, saDir usually ServiceAccountDir.
func InCluster(getenv func(string) string, saDir string) (*Client, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("%w: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set", ErrNotInCluster)
	}
	caPEM, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotInCluster, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrNotInCluster, filepath.Join(saDir, "ca.crt"))
	}
	tokenFile := filepath.Join(saDir, "token")
	if _, err := os.Stat(tokenFile); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotInCluster, err)
	}
	return NewClient("https://"+net.JoinHostPort(host, port), tokenFile, pool), nil
}

// NewClient returns a Client for server (an https URL), authenticating
// with the bearer token in tokenFile and trusting roots.
func NewClient(server, tokenFile string, roots *x509.CertPool) *Client {
	return &Client{
		server:    strings.TrimSuffix(server, "/"),
		tokenFile: tokenFile,
		http: &http.Client{
			Timeout: 30 * time.Second,
			Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
				Proxy:           nil, // the API server is never reached through a proxy
			},
		},
	}
}

// ApplyConfigMap server-side applies data and binaryData as the only data of the
// ConfigMap namespace/name, as fieldManager, taking over the fields from
// any other manager (force): the ConfigMap's declaration belongs to the
// GitOps tool, the key's value to this manager.
func (c *Client) ApplyConfigMap(ctx context.Context, namespace, name, fieldManager string, data map[string]string, binaryData map[string][]byte) error {
	if namespace == "" || name == "" || fieldManager == "" {
		return fmt.Errorf("%w: a ConfigMap apply needs a namespace, a name and a field manager", ErrAPI)
	}
	cm := map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"data":       data,
	}
	if len(binaryData) > 0 {
		cm["binaryData"] = binaryData // []byte marshals as base64, as the API wants
	}
	body, err := json.Marshal(cm)
	if err != nil {
		return err
	}
	u := c.server + "/api/v1/namespaces/" + url.PathEscape(namespace) + "/configmaps/" + url.PathEscape(name) +
		"?" + url.Values{"fieldManager": {fieldManager}, "force": {"true"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	token, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return fmt.Errorf("%w: reading the service account token: %w", ErrNotInCluster, err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/apply-patch+yaml")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAPI, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	var status struct {
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
	if json.Unmarshal(msg, &status) == nil && status.Message != "" {
		return fmt.Errorf("%w: apply ConfigMap %s/%s: %s (%s): %s", ErrAPI, namespace, name, resp.Status, status.Reason, status.Message)
	}
	return fmt.Errorf("%w: apply ConfigMap %s/%s: %s", ErrAPI, namespace, name, resp.Status)
}
