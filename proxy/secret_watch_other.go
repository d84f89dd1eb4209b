//go:build !linux

package proxy

// secretWatch is the inotify cache on Linux; elsewhere there is none and
// the stat cache serves every lookup.
type secretWatch struct{}

func newSecretWatch() *secretWatch { return nil }

func (*secretWatch) lookup(path, secret, key string) (Secret, error, bool) {
	return Secret{}, nil, false
}
