package main

import (
	"os"
	"path/filepath"

	"keyhole.dev/keyhole/internal/testpki"
)

// ca is a throwaway CA written to <dir>/<name>.crt and .key, for the
// processes the benchmark starts to read.
type ca struct {
	*testpki.CA
	certFile, keyFile string
}

func newCA(dir, name string) (*ca, error) {
	c, err := testpki.NewCA(name)
	if err != nil {
		return nil, err
	}
	out := &ca{CA: c, certFile: filepath.Join(dir, name+".crt"), keyFile: filepath.Join(dir, name+".key")}
	return out, c.WriteFiles(out.certFile, out.keyFile)
}

// writeLeaf issues a server certificate for names and writes it and its
// key as PEM files.
func (c *ca) writeLeaf(certFile, keyFile string, names ...string) error {
	cert, key, err := c.LeafPEM(names...)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, key, 0o600)
}
