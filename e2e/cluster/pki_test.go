//go:build e2e

package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"keyhole.dev/keyhole/internal/e2ekube"
	"keyhole.dev/keyhole/internal/testpki"
)

// pki is what the API server is started with and its clients trust.
type pki struct {
	caPEM        []byte
	caFile       string
	certFile     string // serving certificate for loopback, the node and the kubernetes Service
	keyFile      string
	saKeyFile    string
	saPubFile    string
	tokenFile    string
	adminToken   string // system:masters
	kubeletToken string // system:node:<node> in system:nodes, for the Node authorizer
	// The API server's client certificate for the kubelet (exec, logs),
	// in system:masters: the kubelet authenticates every caller, as a
	// real cluster's does.
	kubeletClientCert, kubeletClientKey string
}

func writePKI(dir string) (pki, error) {
	p := pki{
		caFile:    filepath.Join(dir, "ca.crt"),
		certFile:  filepath.Join(dir, "serving.crt"),
		keyFile:   filepath.Join(dir, "serving.key"),
		saKeyFile: filepath.Join(dir, "service-account.key"),
		saPubFile: filepath.Join(dir, "service-account.pub"),
		tokenFile: filepath.Join(dir, "tokens.csv"),

		kubeletClientCert: filepath.Join(dir, "apiserver-kubelet-client.crt"),
		kubeletClientKey:  filepath.Join(dir, "apiserver-kubelet-client.key"),
	}
	ca, err := testpki.NewCA("keyhole-e2e-cluster-ca")
	if err != nil {
		return p, err
	}
	p.caPEM = ca.CertPEM
	if err := os.WriteFile(p.caFile, p.caPEM, 0o644); err != nil {
		return p, err
	}
	certPEM, keyPEM, err := ca.LeafPEM("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc."+dnsDomain, nodeIP, apiService)
	if err != nil {
		return p, err
	}
	if err := os.WriteFile(p.certFile, certPEM, 0o600); err != nil {
		return p, err
	}
	if err := os.WriteFile(p.keyFile, keyPEM, 0o600); err != nil {
		return p, err
	}
	if err := writeClientCert(ca, "kube-apiserver-kubelet-client", "system:masters", p.kubeletClientCert, p.kubeletClientKey); err != nil {
		return p, err
	}
	if err := e2ekube.WriteServiceAccountKey(p.saKeyFile, p.saPubFile); err != nil {
		return p, err
	}
	if p.adminToken, err = e2ekube.RandomToken(); err != nil {
		return p, err
	}
	if p.kubeletToken, err = e2ekube.RandomToken(); err != nil {
		return p, err
	}
	// token,user,uid,"groups"
	lines := fmt.Sprintf("%s,keyhole-e2e-admin,keyhole-e2e-admin,\"system:masters\"\n%s,system:node:%s,system:node:%s,\"system:nodes\"\n",
		p.adminToken, p.kubeletToken, nodeName, nodeName)
	return p, os.WriteFile(p.tokenFile, []byte(lines), 0o600)
}

// writeClientCert issues a client certificate for user in group, signed
// by the cluster's CA, which the API server and the kubelet both trust.
func writeClientCert(ca *testpki.CA, user, group, certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: []string{group}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return e2ekube.WriteKey(keyFile, key)
}
