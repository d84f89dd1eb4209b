package access

import (
	"testing"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
)

// TestCatalogDecidable: every connector's read-only rules in the built-in
// catalog stay within the comparison's bounds, so a change to an agent's
// connectors is never undecided for want of room.
func TestCatalogDecidable(t *testing.T) {
	cat, err := schema.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range cat {
		var rules []config.Rule
		for _, r := range c.ReadOnly {
			rule := config.Rule{Methods: r.Methods, PathPrefixes: r.PathPrefixes, PathPatterns: r.PathPatterns, Body: r.Body}
			if g := r.GraphQL; g != nil {
				rule.GraphQL = &config.GraphQL{Operations: g.Operations, PersistedQueries: g.PersistedQueries, Batches: g.Batches}
			}
			rules = append(rules, rule)
		}
		if reqs, why := Classes(rules); why != "" || len(reqs) > MaxRequests/8 {
			t.Errorf("%s: %d classes of request: %s", name, len(reqs), why)
		}
	}
}
