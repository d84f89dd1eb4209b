package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// The rules for a Secret's name and keys are the Kubernetes API server's,
// and they live here alone: `keyhole check` reports with them, `render`
// validates the proxy config with them, and the proxy refuses to read a
// file whose name breaks them. The CUE schema, which the CRDs and the
// JSON Schema are generated from, spells the same patterns; a test in
// package schema holds it to these constants.

// SecretKeyPattern is what the API server accepts as a key of a Secret's
// data (IsConfigMapKey): letters, digits, '-', '_' and '.', and not ".",
// ".." or anything starting with "..". The kubelet reserves names starting
// with ".." in the mounted volume for its own files (..data and the
// timestamped directories it swaps), so such a key could never be a file
// of its own. At most MaxSecretKeyLen bytes.
const SecretKeyPattern = `^\.?[-_a-zA-Z0-9][-._a-zA-Z0-9]*$`

// MaxSecretKeyLen is the longest Secret key the API server accepts.
const MaxSecretKeyLen = 253

// SecretNamePattern is a DNS subdomain (RFC 1123) as Kubernetes names a
// Secret: lowercase letters, digits, '-' and '.', each dot-separated part
// starting and ending with a letter or digit. At most MaxSecretNameLen
// bytes. Kubernetes does not bound the length of each part.
const SecretNamePattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`

// MaxSecretNameLen is the longest object name the API server accepts.
const MaxSecretNameLen = 253

// ErrName is wrapped by CheckSecretName and CheckSecretKey.
var ErrName = errors.New("not a valid Kubernetes name")

var (
	secretKeyRE  = regexp.MustCompile(SecretKeyPattern)
	secretNameRE = regexp.MustCompile(SecretNamePattern)
)

// CheckSecretKey reports whether key is a key the API server accepts in a
// Secret's data, so SecretsDir/<secret>/<key> is a file the kubelet wrote
// and never leaves the Secret's directory. The error says what is wrong
// and what is allowed; it quotes the key, which is a name, not a value.
func CheckSecretKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: a Secret key is empty", ErrName)
	case len(key) > MaxSecretKeyLen:
		return fmt.Errorf("%w: Secret key %q is %d characters long; Kubernetes allows at most %d", ErrName, clipName(key), len(key), MaxSecretKeyLen)
	case key == "." || key == "..":
		return fmt.Errorf("%w: Secret key %q is not allowed: Kubernetes refuses \".\" and \"..\" as keys", ErrName, key)
	case strings.HasPrefix(key, ".."):
		return fmt.Errorf("%w: Secret key %q starts with \"..\", which Kubernetes refuses: the kubelet keeps its own files (..data) under such names where it mounts a Secret", ErrName, clipName(key))
	case !secretKeyRE.MatchString(key):
		return fmt.Errorf("%w: Secret key %q holds %s; Kubernetes allows only letters, digits, '-', '_' and '.'", ErrName, clipName(key), firstBad(key, isKeyByte))
	}
	return nil
}

// CheckSecretName reports whether name is a name the API server accepts
// for a Secret, so SecretsDir/<name> is one directory under the secrets
// dir.
func CheckSecretName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: a Secret name is empty", ErrName)
	case len(name) > MaxSecretNameLen:
		return fmt.Errorf("%w: Secret name %q is %d characters long; Kubernetes allows at most %d", ErrName, clipName(name), len(name), MaxSecretNameLen)
	case !secretNameRE.MatchString(name):
		return fmt.Errorf("%w: Secret name %q is not a DNS subdomain: lowercase letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or digit", ErrName, clipName(name))
	}
	return nil
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// firstBad names the first byte of s that ok refuses.
func firstBad(s string, ok func(byte) bool) string {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			if s[i] < 0x20 || s[i] >= 0x7f {
				return fmt.Sprintf("the byte 0x%02x", s[i])
			}
			return fmt.Sprintf("%q", s[i])
		}
	}
	return "nothing else"
}

// clipName shortens a name before it goes into a message.
func clipName(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
