//go:build e2e

package cluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/e2ekube"
)

// certManagerHealth is where cert-manager's controller serves /livez, on
// the test's own loopback.
const certManagerHealth = "127.0.0.1:9793"

// certIssueTimeout bounds one issuance: a CertificateRequest created,
// approved and signed, and the Secret written.
const certIssueTimeout = 2 * time.Minute

// startCertManager installs cert-manager's CRDs and starts its controller
// (tools/cert-manager: the issuers, certificates and certificaterequests
// controllers a self-signed Issuer and a CA Certificate need) as the other
// control-plane pieces run: a process in the test's namespaces with the
// admin's kubeconfig and no leader election. Without a webhook: the CRDs'
// own schemas validate what is applied, and nothing keyhole renders needs
// the webhook's defaulting. Once per run; every test that deploys a render
// calls it.
func (c *cluster) startCertManager(ctx context.Context) error {
	if c.certManager != nil {
		select {
		case <-c.certManager.Exited():
			return fmt.Errorf("cert-manager's controller exited: %v", c.certManager.Err())
		default:
			return nil
		}
	}
	rendered, err := filepath.Glob(filepath.Join(c.tools[repoRoot], "render", "testdata", "cert-manager-crds", "*.yaml"))
	if err != nil {
		return err
	}
	others, err := filepath.Glob(filepath.Join(c.tools[repoRoot], "e2e", "cluster", "testdata", "cert-manager-crds", "*.yaml"))
	if err != nil {
		return err
	}
	if len(rendered) != 2 || len(others) != 2 {
		return fmt.Errorf("want cert-manager's Issuer and Certificate CRDs in render/testdata/cert-manager-crds and its CertificateRequest and ClusterIssuer CRDs in e2e/cluster/testdata/cert-manager-crds, found %d and %d", len(rendered), len(others))
	}
	if err := c.applyCRDs(ctx, append(rendered, others...)); err != nil {
		return err
	}
	p, err := c.run(toolCertMgr, c.tools[toolCertMgr],
		"--kubeconfig="+c.kubeconfig,
		"--healthz-addr="+certManagerHealth,
		"--v=2",
	)
	if err != nil {
		return err
	}
	if err := e2ekube.WaitReady(ctx, p, readyTimeout, 60, func(ctx context.Context) bool {
		return e2ekube.Get(ctx, http.DefaultClient, "http://"+certManagerHealth+"/livez", "") == http.StatusOK
	}); err != nil {
		return err
	}
	c.certManager = p
	return nil
}

// prepareRenders readies the cluster for a test that applies a render of
// examples/github-acme: cert-manager to issue its CA, and the sandbox
// image under the name the example gives it.
func (c *cluster) prepareRenders(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := c.startCertManager(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ctr(ctx, "images", "tag", "--force", sandboxImage, acmeImage); err != nil {
		t.Fatal(err)
	}
}

// waitCertificate waits until cert-manager reports the rendered CA
// Certificate Ready at revision, and returns the CA certificate in its
// Secret.
func (c *cluster) waitCertificate(t *testing.T, ctx context.Context, revision int) *x509.Certificate {
	t.Helper()
	deadline := time.Now().Add(certIssueTimeout)
	var last string
	for {
		out, err := c.kubectl(ctx, nil, "get", "certificate", acmeCASecret, "-n", acmeNS,
			"-o", `jsonpath={.status.revision} {range .status.conditions[*]}{.type}={.status} {end}`)
		last = out
		if err == nil && strings.HasPrefix(out, fmt.Sprintf("%d ", revision)) && strings.Contains(out, " Ready=True") && !strings.Contains(out, "Issuing=True") {
			break
		}
		if time.Now().After(deadline) {
			crs, _ := c.kubectl(ctx, nil, "get", "certificaterequests", "-n", acmeNS, "-o", "yaml")
			events, _ := c.kubectl(ctx, nil, "get", "events", "-n", acmeNS, "--field-selector=involvedObject.kind!=Pod", "--sort-by=.lastTimestamp")
			t.Fatalf("cert-manager did not issue Certificate %s at revision %d within %s: revision and conditions %q\n%s\n%s",
				acmeCASecret, revision, certIssueTimeout, last, crs, events)
		}
		time.Sleep(time.Second)
	}
	ca, _, err := c.caSecretCert(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// caSecretCert parses ca.crt of <claim>-egress-ca, checking that tls.crt
// is the same certificate (a self-signed Issuer's CA is its own issuer),
// and returns it with its PEM as the Secret holds it.
func (c *cluster) caSecretCert(ctx context.Context) (*x509.Certificate, string, error) {
	out, err := c.kubectl(ctx, nil, "get", "secret", acmeCASecret, "-n", acmeNS, "-o", `jsonpath={.data.ca\.crt} {.data.tls\.crt}`)
	if err != nil {
		return nil, "", err
	}
	caB64, tlsB64, _ := strings.Cut(out, " ")
	caPEM, err1 := base64.StdEncoding.DecodeString(caB64)
	tlsPEM, err2 := base64.StdEncoding.DecodeString(tlsB64)
	if err1 != nil || err2 != nil || !bytes.Equal(caPEM, tlsPEM) {
		return nil, "", fmt.Errorf("secret %s: ca.crt and tls.crt are not the same certificate (%v, %v)", acmeCASecret, err1, err2)
	}
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, "", fmt.Errorf("secret %s: ca.crt holds no PEM certificate", acmeCASecret)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	return cert, string(caPEM), err
}

// checkIssuedCA checks that the CA in the Secret is what the rendered
// Certificate asks for: a self-signed ECDSA P-256 CA named for the claim,
// valid for 90 days.
func checkIssuedCA(t *testing.T, ca *x509.Certificate) {
	t.Helper()
	if !ca.IsCA || ca.Subject.CommonName != acmeCASecret || ca.PublicKeyAlgorithm != x509.ECDSA || ca.CheckSignatureFrom(ca) != nil {
		t.Errorf("the issued CA: isCA %v, CN %q, key %v, self-signed %v", ca.IsCA, ca.Subject.CommonName, ca.PublicKeyAlgorithm, ca.CheckSignatureFrom(ca) == nil)
	}
	if d := ca.NotAfter.Sub(ca.NotBefore); d < 89*24*time.Hour || d > 91*24*time.Hour {
		t.Errorf("the issued CA is valid for %v, not the rendered 90 days", d)
	}
}

// renewCertificate asks cert-manager to re-issue the CA Certificate now,
// as `cmctl renew` does (renewCertificate in cmctl's pkg/renew/renew.go):
// it sets the Issuing condition, reason ManuallyTriggered, in the
// Certificate's status, where the controllers take it up.
func (c *cluster) renewCertificate(t *testing.T, ctx context.Context) {
	t.Helper()
	gen, err := c.kubectl(ctx, nil, "get", "certificate", acmeCASecret, "-n", acmeNS, "-o", "jsonpath={.metadata.generation}")
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`[{"op":"add","path":"/status/conditions/-","value":{"type":"Issuing","status":"True","reason":"ManuallyTriggered","message":"Certificate re-issuance manually triggered","observedGeneration":%s,"lastTransitionTime":%q}}]`,
		gen, time.Now().UTC().Format(time.RFC3339))
	if _, err := c.kubectl(ctx, nil, "patch", "certificate", acmeCASecret, "-n", acmeNS, "--subresource=status", "--type=json", "-p", patch); err != nil {
		t.Fatal(err)
	}
}

// checkCertManagerLog requires cert-manager's log to hold neither the
// Secret's value (cert-manager reads Secrets, here with the admin's
// token) nor the private key it wrote into <claim>-egress-ca. The key is
// compared here, never printed.
func (c *cluster) checkCertManagerLog(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	logs, err := os.ReadFile(c.certManager.Log)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(logs, []byte("starting controller")) {
		t.Fatalf("cert-manager's log at %s holds no controller's start: not its log", c.certManager.Log)
	}
	if bytes.Contains(logs, []byte(token)) {
		t.Error("cert-manager's log holds the Secret's value")
	}
	b64, err := c.kubectl(ctx, nil, "get", "secret", acmeCASecret, "-n", acmeNS, "-o", `jsonpath={.data.tls\.key}`)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil || !strings.Contains(block.Type, "PRIVATE KEY") {
		t.Fatalf("secret %s: tls.key holds no PEM private key", acmeCASecret)
	}
	body := base64.StdEncoding.EncodeToString(block.Bytes)
	if bytes.Contains(logs, []byte(body[:64])) || bytes.Contains(logs, block.Bytes) {
		t.Error("cert-manager's log holds the CA's private key")
	}
}
