package proxy

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// ErrCA is wrapped when the sandbox CA cannot be used.
var ErrCA = errors.New("invalid sandbox CA")

// LeafValidity is how long a minted leaf is valid. Short, because leaves
// are cheap to mint and a leaked one should not outlive the day.
const LeafValidity = 24 * time.Hour

// CA is the sandbox's egress CA: it signs the leaves the proxy presents
// for injected hosts. Its key never leaves the process.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	// id is the SHA-256 of the certificate, so leaves signed by an older
	// CA are never served after a renewal.
	id [32]byte
}

// ParseCA parses a PEM certificate (the first CERTIFICATE block; any
// following ones are ignored) and its PEM private key (PKCS#8, SEC 1 or
// PKCS#1). Errors never quote key material.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	var certDER []byte
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			certDER = b.Bytes
			break
		}
	}
	if certDER == nil {
		return nil, fmt.Errorf("%w: no PEM CERTIFICATE block in the certificate file", ErrCA)
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate: %w", ErrCA, err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, fmt.Errorf("%w: certificate %q is not a CA", ErrCA, cert.Subject.CommonName)
	}
	var key crypto.Signer
	for rest := keyPEM; key == nil; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("%w: no PEM private key block in the key file", ErrCA)
		}
		key, err = parseKey(b)
		if err != nil {
			return nil, err
		}
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("%w: the key does not match certificate %q", ErrCA, cert.Subject.CommonName)
	}
	return &CA{cert: cert, key: key, id: sha256.Sum256(certDER)}, nil
}

func parseKey(b *pem.Block) (crypto.Signer, error) {
	var k any
	var err error
	switch b.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		return nil, nil // e.g. EC PARAMETERS; keep looking
	}
	if err != nil {
		// The parse errors of crypto/x509 describe structure, not bytes.
		return nil, fmt.Errorf("%w: private key: %w", ErrCA, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: unsupported private key type %T", ErrCA, k)
	}
	return s, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// Certificate returns the CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Mint signs a fresh leaf for host: ECDSA P-256, a random 128-bit serial,
// valid from a few minutes ago (clock skew) for LeafValidity or until the
// CA expires, whichever is first.
func (ca *CA) Mint(host string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("leaf key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("leaf serial: %w", err)
	}
	notAfter := now.Add(LeafValidity)
	if ca.cert.NotAfter.Before(notAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("%w: signing a leaf for %s: %w", ErrCA, host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("leaf for %s: %w", host, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// leafCache holds one leaf per (host, CA). Concurrent first connections
// to a host wait for a single mint instead of each signing their own.
type leafCache struct {
	mu      sync.Mutex
	entries map[leafKey]*leafEntry
	onMint  func() // counts mints
}

type leafKey struct {
	host string
	ca   [32]byte
}

type leafEntry struct {
	done chan struct{} // closed when cert/err are set
	cert *tls.Certificate
	err  error
}

// renewBefore re-mints a cached leaf this long before it expires.
const renewBefore = time.Hour

func newLeafCache(onMint func()) *leafCache {
	return &leafCache{entries: map[leafKey]*leafEntry{}, onMint: onMint}
}

// get returns the cached leaf for host under ca, minting it once.
func (c *leafCache) get(ca *CA, host string, now time.Time) (*tls.Certificate, error) {
	k := leafKey{host: host, ca: ca.id}
	c.mu.Lock()
	e := c.entries[k]
	if e != nil {
		select {
		case <-e.done:
			if e.err != nil || now.Add(renewBefore).After(e.cert.Leaf.NotAfter) {
				e = nil // failed or expiring: mint again
			}
		default: // a mint is in flight: wait for it below
		}
	}
	if e == nil {
		e = &leafEntry{done: make(chan struct{})}
		// Leaves of a replaced CA are dead weight: drop them.
		for old := range c.entries {
			if old.ca != ca.id {
				delete(c.entries, old)
			}
		}
		c.entries[k] = e
		c.mu.Unlock()
		e.cert, e.err = ca.Mint(host, now)
		if e.err == nil && c.onMint != nil {
			c.onMint()
		}
		close(e.done)
		return e.cert, e.err
	}
	c.mu.Unlock()
	<-e.done
	return e.cert, e.err
}
