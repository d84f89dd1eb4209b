// Package testpki makes throwaway certificate authorities and server
// certificates for tests and benchmarks: ECDSA P-256 keys, random serials,
// valid from an hour ago for two days. Nothing here is for production:
// the proxy's own CA handling is proxy.CA.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// CertPEM is the certificate, KeyPEM the key as an "EC PRIVATE KEY"
	// block, as cert-manager writes tls.crt and tls.key.
	CertPEM, KeyPEM []byte
}

// NewCA makes a CA whose subject is cn.
func NewCA(cn string) (*CA, error) {
	der, key, err := selfSigned(cn, true, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature|x509.KeyUsageCRLSign)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM(der), KeyPEM: keyPEM}, nil
}

// Pool is a pool holding only the CA.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

// Leaf issues a server certificate for names (the first is its subject):
// host names, and IP addresses written as such; valid for 127.0.0.1 too.
func (c *CA) Leaf(names ...string) (tls.Certificate, error) {
	der, key, err := c.leaf(names)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// LeafPEM is Leaf as PEM, for servers that read files.
func (c *CA) LeafPEM(names ...string) (cert, key []byte, err error) {
	der, k, err := c.leaf(names)
	if err != nil {
		return nil, nil, err
	}
	key, err = keyPEM(k)
	if err != nil {
		return nil, nil, err
	}
	return certPEM(der), key, nil
}

// WriteFiles writes the CA's certificate and key, readable by the owner
// only.
func (c *CA) WriteFiles(certFile, keyFile string) error {
	if err := os.WriteFile(certFile, c.CertPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, c.KeyPEM, 0o600)
}

// WriteLeaf issues a server certificate for names and writes it and its
// key as PEM files, readable by the owner only.
func (c *CA) WriteLeaf(certFile, keyFile string, names ...string) error {
	cert, key, err := c.LeafPEM(names...)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, key, 0o600)
}

// SelfSignedPEM is a self-signed certificate whose subject is cn, as PEM,
// its key thrown away: for tests of what reads certificates, not of what
// is signed with them. isCA marks it a CA in its basic constraints; a
// certificate that is not one is what a trust bundle must refuse as its
// CA.
func SelfSignedPEM(cn string, isCA bool) ([]byte, error) {
	der, _, err := selfSigned(cn, isCA, 0)
	if err != nil {
		return nil, err
	}
	return certPEM(der), nil
}

// selfSigned makes a key and a certificate of subject cn signed with it,
// a CA's when isCA, for usage.
func selfSigned(cn string, isCA bool, usage x509.KeyUsage) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := template(cn)
	if err != nil {
		return nil, nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = isCA, true, usage
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	return der, key, nil
}

// FileCA is a CA written to files, for a process a test starts to read.
type FileCA struct {
	*CA
	CertFile, KeyFile string
}

// NewFileCA makes a CA of common name name and writes it to
// <dir>/<name>.crt and <dir>/<name>.key.
func NewFileCA(dir, name string) (*FileCA, error) {
	c, err := NewCA(name)
	if err != nil {
		return nil, err
	}
	out := &FileCA{CA: c, CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	return out, c.WriteFiles(out.CertFile, out.KeyFile)
}

func (c *CA) leaf(names []string) ([]byte, *ecdsa.PrivateKey, error) {
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("testpki: a leaf needs a name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := template(names[0])
	if err != nil {
		return nil, nil, err
	}
	loopback := net.IPv4(127, 0, 0, 1)
	tmpl.IPAddresses = []net.IP{loopback}
	for _, n := range names {
		if ip := net.ParseIP(n); ip == nil {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		} else if !ip.Equal(loopback) {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		}
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.Key)
	if err != nil {
		return nil, nil, err
	}
	return der, key, nil
}

func template(cn string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(48 * time.Hour),
	}, nil
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}
