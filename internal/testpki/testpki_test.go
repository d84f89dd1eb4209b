package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// TestLeafVerifies: a leaf verifies against the CA's pool for each of its
// names and for 127.0.0.1, as a server certificate, and not for another
// name; the PEM forms load as a key pair.
func TestLeafVerifies(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Leaf("api.example", "other.example", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(leaf.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"api.example": true, "other.example": true, "127.0.0.1": true, "10.0.0.1": true, "10.0.0.2": false, "evil.example": false} {
		_, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if (err == nil) != want {
			t.Errorf("verify for %s: %v, want ok=%v", name, err, want)
		}
	}
	certPEM, keyPEM, err := ca.LeafPEM("api.example")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Errorf("LeafPEM does not load: %v", err)
	}
	if _, err := tls.X509KeyPair(ca.CertPEM, ca.KeyPEM); err != nil {
		t.Errorf("the CA's PEM does not load: %v", err)
	}
	if _, err := ca.Leaf(); err == nil {
		t.Error("a leaf without a name was issued")
	}
}

// TestFiles: NewFileCA and WriteLeaf write key pairs that load, readable
// by the owner only, the CA's where NewFileCA says.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewFileCA(dir, "files-ca")
	if err != nil {
		t.Fatal(err)
	}
	if ca.CertFile != filepath.Join(dir, "files-ca.crt") || ca.KeyFile != filepath.Join(dir, "files-ca.key") {
		t.Errorf("CA files %s, %s", ca.CertFile, ca.KeyFile)
	}
	leafCert, leafKey := filepath.Join(dir, "leaf.crt"), filepath.Join(dir, "leaf.key")
	if err := ca.WriteLeaf(leafCert, leafKey, "api.example"); err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{ca.CertFile, ca.KeyFile}, {leafCert, leafKey}} {
		if _, err := tls.LoadX509KeyPair(pair[0], pair[1]); err != nil {
			t.Errorf("%s: %v", pair[0], err)
		}
		for _, f := range pair {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s is %v, want 0600", f, fi.Mode().Perm())
			}
		}
	}
}

// TestSelfSignedPEM: one PEM certificate, self-signed, of subject cn, a CA
// exactly when asked for one.
func TestSelfSignedPEM(t *testing.T) {
	for name, isCA := range map[string]bool{"a CA": true, "not a CA": false} {
		t.Run(name, func(t *testing.T) {
			b, err := SelfSignedPEM("self", isCA)
			if err != nil {
				t.Fatal(err)
			}
			block, rest := pem.Decode(b)
			if block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
				t.Fatalf("not one PEM certificate:\n%s", b)
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if cert.Subject.CommonName != "self" || cert.IsCA != isCA || !cert.BasicConstraintsValid {
				t.Errorf("subject %q, IsCA %v, basic constraints %v; want self, %v, true", cert.Subject.CommonName, cert.IsCA, cert.BasicConstraintsValid, isCA)
			}
			if err := cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature); err != nil {
				t.Errorf("not self-signed: %v", err)
			}
		})
	}
}
