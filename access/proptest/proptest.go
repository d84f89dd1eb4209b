// Package proptest is what the property tests of access and diff draw
// random proxy configs from: a pick from a few literals, paths made of
// them, and the hosts of a config, each left out, passed through or
// injected. Few literals make random rules overlap and random requests
// hit them. Nothing here is for production code.
package proptest

import (
	"math/rand/v2"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
)

// Pick is one of xs, drawn uniformly.
func Pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// Subset is xs with each kept by an even draw, in xs' order; nil when
// none is kept.
func Subset[T any](rng *rand.Rand, xs []T) []T {
	var out []T
	for _, x := range xs {
		if rng.IntN(2) == 0 {
			out = append(out, x)
		}
	}
	return out
}

// Path is "/" or up to three segments drawn from segs; with pattern, a
// segment may be "*" and the last one "**".
func Path(rng *rand.Rand, segs []string, pattern bool) string {
	n := rng.IntN(4)
	if n == 0 {
		return "/"
	}
	var parts []string
	for i := range n {
		switch {
		case pattern && i == n-1 && rng.IntN(3) == 0:
			parts = append(parts, "**")
		case pattern && rng.IntN(3) == 0:
			parts = append(parts, "*")
		default:
			parts = append(parts, Pick(rng, segs))
		}
	}
	return "/" + strings.Join(parts, "/")
}

// Hosts draws what a config does with each of names: one in four is left
// out, one in four passed through, and the other half injected, as
// injected makes it (drawing from rng after the choice).
func Hosts(rng *rand.Rand, names []string, injected func(name string) config.Host) (hosts []config.Host, passthrough []string) {
	for _, h := range names {
		switch rng.IntN(4) {
		case 0:
		case 1:
			passthrough = append(passthrough, h)
		default:
			hosts = append(hosts, injected(h))
		}
	}
	return hosts, passthrough
}
