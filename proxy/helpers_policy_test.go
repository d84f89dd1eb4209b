package proxy

import "keyhole.dev/keyhole/proxy/config"

// Test-only helpers over the package's API.

// decideOnce compiles cfg and decides req, for tests that judge a single
// request.
func decideOnce(cfg *config.Config, req RequestInfo) (Decision, error) {
	p, err := NewPolicy(cfg)
	if err != nil {
		return Decision{}, err
	}
	return p.Decide(req), nil
}

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
