package proptest

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// TestPath: every path is "/" or segments drawn from segs, with "*" and
// "**" (last only) only for a pattern, and every form is drawn.
func TestPath(t *testing.T) {
	segs := []string{"a", "b"}
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for range 2000 {
		pattern := rng.IntN(2) == 0
		p := Path(rng, segs, pattern)
		seen[p] = true
		if p == "/" {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		if len(parts) > 3 {
			t.Fatalf("%s: more than three segments", p)
		}
		for i, s := range parts {
			switch {
			case slices.Contains(segs, s):
			case pattern && s == "*":
			case pattern && s == "**" && i == len(parts)-1:
			default:
				t.Fatalf("%s (pattern %t): segment %q", p, pattern, s)
			}
		}
	}
	for _, want := range []string{"/", "/a", "/b/a/b", "/*", "/a/**"} {
		if !seen[want] {
			t.Errorf("%s never drawn", want)
		}
	}
}

// TestSubset: a subset keeps xs' order, and every subset of a small set
// is drawn, the empty one as nil.
func TestSubset(t *testing.T) {
	xs := []string{"a", "b", "c"}
	rng := rand.New(rand.NewPCG(5, 6))
	seen := map[string]bool{}
	for range 500 {
		s := Subset(rng, xs)
		if len(s) == 0 && s != nil {
			t.Fatal("an empty subset is not nil")
		}
		for i, x := range s {
			if j := slices.Index(xs, x); j < 0 || i > 0 && j <= slices.Index(xs, s[i-1]) {
				t.Fatalf("%v is not a subset of %v in order", s, xs)
			}
		}
		seen[strings.Join(s, "")] = true
	}
	if len(seen) != 8 {
		t.Errorf("drew %d of the 8 subsets: %v", len(seen), seen)
	}
}

// TestHosts: each name is left out, passed through or injected, in
// names' order, and all three happen.
func TestHosts(t *testing.T) {
	names := []string{"one.example", "two.example", "three.example"}
	rng := rand.New(rand.NewPCG(3, 4))
	var out, pass, inj int
	for range 500 {
		hosts, passthrough := Hosts(rng, names, func(name string) config.Host { return config.Host{Name: name} })
		var got []string
		for _, h := range hosts {
			got = append(got, h.Name)
		}
		for _, n := range names {
			if slices.Contains(got, n) && slices.Contains(passthrough, n) {
				t.Fatalf("%s both injected and passed through", n)
			}
		}
		if !slices.IsSorted(indexes(names, got)) || !slices.IsSorted(indexes(names, passthrough)) {
			t.Fatalf("hosts %v, passthrough %v: not in names' order", got, passthrough)
		}
		inj += len(hosts)
		pass += len(passthrough)
		out += len(names) - len(hosts) - len(passthrough)
	}
	if out == 0 || pass == 0 || inj == 0 {
		t.Errorf("left out %d, passed through %d, injected %d: each should happen", out, pass, inj)
	}
}

func indexes(names, of []string) []int {
	var is []int
	for _, n := range of {
		is = append(is, slices.Index(names, n))
	}
	return is
}
