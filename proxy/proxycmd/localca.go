package proxycmd

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
)

// localCALifetime is how long a CA minted by --local-ca is valid: long
// enough for a working day's runs, short enough that a certificate file
// left trusted somewhere stops mattering soon.
const localCALifetime = 7 * 24 * time.Hour

// localCA mints a sandbox CA for a run outside a cluster, where no
// cert-manager issues one. Its certificate goes to certPath, for the
// client to trust; its key goes to a file only this process can read, in
// a directory that cleanup removes. It returns the paths the proxy loads.
func localCA(certPath string, now time.Time) (certFile, keyFile string, cleanup func(), err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return "", "", nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "keyhole local sandbox CA"},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(localCALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		return "", "", nil, fmt.Errorf("--local-ca: %w", err)
	}
	dir, err := os.MkdirTemp("", "keyhole-local-ca-")
	if err != nil {
		return "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		cleanup()
		return "", "", nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		cleanup()
		return "", "", nil, err
	}
	return certFile, keyFile, cleanup, nil
}
