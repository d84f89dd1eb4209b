package policy

import "keyhole.dev/keyhole/proxy/config"

// decideOnce compiles cfg and decides req, for tests that judge a single
// request.
func decideOnce(cfg *config.Config, req RequestInfo) (Decision, error) {
	p, err := NewPolicy(cfg)
	if err != nil {
		return Decision{}, err
	}
	return p.Decide(req), nil
}
