//go:build !linux

package proxy

// has reports whether path's value is cached: never, without a watch.
func (*secretWatch) has(string) bool { return false }
