package compiler

import "testing"

// TestRulesOverlap: the request two rules both allow, as check names it
// for a host split between two forms, or none where no request can be
// allowed by both.
func TestRulesOverlap(t *testing.T) {
	tests := map[string]struct {
		a, b   ruleWire
		method string
		path   string // "" for no overlap
	}{
		"API prefix and git patterns of one group": {
			a: ruleWire{Methods: []string{"GET", "HEAD"}, PathPrefixes: []string{"/api/v4"}},
			b: ruleWire{Methods: []string{"GET"}, PathPatterns: []string{"/acme/*/info/refs", "/acme/*/*/info/refs"}},
		},
		"API prefix and git patterns of any group": {
			a:      ruleWire{Methods: []string{"GET"}, PathPrefixes: []string{"/api/v4"}},
			b:      ruleWire{Methods: []string{"GET"}, PathPatterns: []string{"/*/*/info/refs"}},
			method: "GET", path: "/api/v4/info/refs",
		},
		"no common method": {
			a: ruleWire{Methods: []string{"GET"}, PathPrefixes: []string{"/"}},
			b: ruleWire{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/git-upload-pack"}},
		},
		"nested prefixes": {
			a:      ruleWire{Methods: []string{"GET"}, PathPrefixes: []string{"/api/v4/projects/1"}},
			b:      ruleWire{Methods: []string{"GET"}, PathPrefixes: []string{"/api/v4"}},
			method: "GET", path: "/api/v4/projects/1",
		},
		"prefix beside another": {
			a: ruleWire{Methods: []string{"GET"}, PathPrefixes: []string{"/api/v4"}},
			b: ruleWire{Methods: []string{"GET"}, PathPrefixes: []string{"/api/v3"}},
		},
		"patterns of different lengths": {
			a: ruleWire{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/git-upload-pack"}},
			b: ruleWire{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/*/git-upload-pack"}},
		},
		"a final ** and a longer pattern": {
			a:      ruleWire{Methods: []string{"POST"}, PathPatterns: []string{"/acme/**"}},
			b:      ruleWire{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/git-upload-pack"}},
			method: "POST", path: "/acme/x/git-upload-pack",
		},
		"a final ** needs a segment past a prefix": {
			a:      ruleWire{Methods: []string{"GET"}, PathPatterns: []string{"/acme/**"}},
			b:      ruleWire{Methods: []string{"GET"}, PathPrefixes: []string{"/acme"}},
			method: "GET", path: "/acme/x",
		},
		"an exact pattern shorter than a prefix": {
			a: ruleWire{Methods: []string{"GET"}, PathPatterns: []string{"/acme/*"}},
			b: ruleWire{Methods: []string{"GET"}, PathPrefixes: []string{"/acme/widgets/issues"}},
		},
		"the root prefix": {
			a:      ruleWire{Methods: []string{"GET"}, PathPrefixes: []string{"/"}},
			b:      ruleWire{Methods: []string{"GET"}, PathPatterns: []string{"/*/*/info/refs"}},
			method: "GET", path: "/x/x/info/refs",
		},
		"an encoded-slash piece and a literal": {
			a:      ruleWire{Methods: []string{"GET"}, PathPatterns: []string{"/@acme%2F*"}, EncodedSlash: "segment"},
			b:      ruleWire{Methods: []string{"GET"}, PathPrefixes: []string{"/@acme%2Fwidgets"}, EncodedSlash: "segment"},
			method: "GET", path: "/@acme%2Fwidgets",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, order := range [][2]ruleWire{{tc.a, tc.b}, {tc.b, tc.a}} {
				m, p, ok := rulesOverlap(order[0], order[1])
				if ok != (tc.path != "") || p != tc.path || m != tc.method {
					t.Errorf("rulesOverlap = %q %q %v, want %q %q", m, p, ok, tc.method, tc.path)
				}
			}
		})
	}
}
