package proxy

// Test-only helpers over the package's API.

// newSecret wraps a value.
func newSecret(v string) Secret { return Secret{v: v} }

// cached reports whether path's value is held by the cache, for tests.
func (d SecretDir) cached(path string) bool {
	if d.watch != nil {
		return d.watch.has(path)
	}
	if d.cache != nil {
		_, ok := d.cache.get(path)
		return ok
	}
	return false
}
