//go:build e2e

package e2ekube

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// WriteKey writes key to path as a PKCS #8 PEM file.
func WriteKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// WriteServiceAccountKey generates the key that signs service account
// tokens, writing it to keyFile and its public half to pubFile.
func WriteServiceAccountKey(keyFile, pubFile string) error {
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := WriteKey(keyFile, saKey); err != nil {
		return err
	}
	// --service-account-key-file reads public keys, which a PKCS #8
	// private key is not to it.
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600)
}

// RandomToken is a fresh bearer token for the API server's token file.
func RandomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// WriteKubeconfig writes to path a kubeconfig for server, trusting caPEM,
// that authenticates as user with token.
func WriteKubeconfig(path, server, user, token string, caPEM []byte) error {
	cfg := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"current-context": "keyhole-e2e",
		"clusters": []any{map[string]any{
			"name": "keyhole-e2e",
			"cluster": map[string]any{
				"server":                     server,
				"certificate-authority-data": base64.StdEncoding.EncodeToString(caPEM),
			},
		}},
		"users":    []any{map[string]any{"name": user, "user": map[string]any{"token": token}}},
		"contexts": []any{map[string]any{"name": "keyhole-e2e", "context": map[string]any{"cluster": "keyhole-e2e", "user": user}}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// Kubectl is how a test runs kubectl: the binary, the kubeconfig, and the
// HOME it runs with (its own, so its discovery cache is fresh per run and
// never the user's).
type Kubectl struct {
	Bin, Kubeconfig, Home string
	// Dir is the working directory; empty, the test's.
	Dir string
	// DropEnv are prefixes of further variables dropped from its
	// environment (see WithoutKubeEnv).
	DropEnv []string
}

// Run runs kubectl with args, stdin when it is not nil, against the
// cluster. Its error names the command and holds what kubectl printed on
// standard error.
func (k Kubectl) Run(ctx context.Context, stdin []byte, args ...string) (stdout, stderr string, err error) {
	full := append([]string{"--kubeconfig=" + k.Kubeconfig, "--request-timeout=60s"}, args...)
	cmd := exec.CommandContext(ctx, k.Bin, full...)
	cmd.Dir = k.Dir
	cmd.Env = append(WithoutKubeEnv(os.Environ(), k.DropEnv...), "HOME="+k.Home)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err = cmd.Run()
	if err != nil {
		shown := args
		if len(shown) > 8 { // a long list of -f FILE says nothing the error does not
			shown = append(slices.Clone(shown[:6]), "...")
		}
		err = fmt.Errorf("kubectl %s: %w\n%s", strings.Join(shown, " "), err, errb.String())
	}
	return out.String(), errb.String(), err
}

// WithoutKubeEnv drops the variables that would point kubectl at another
// cluster or home directory, and those starting with any of drop.
func WithoutKubeEnv(env []string, drop ...string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "HOME=") ||
			slices.ContainsFunc(drop, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			continue
		}
		out = append(out, kv)
	}
	return out
}
