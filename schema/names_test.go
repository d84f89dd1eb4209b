package schema

import (
	"encoding/json"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// TestNamePatternsAreTheProxys keeps the schema's Secret key and name
// patterns, which the CRDs and the JSON Schema carry, equal to the rule
// the proxy and the compiler check with, so check, render, the proxy and
// the API server (through the CRD) refuse the same names.
func TestNamePatternsAreTheProxys(t *testing.T) {
	var s struct {
		Defs map[string]struct {
			Pattern   string `json:"pattern"`
			MaxLength int    `json:"maxLength"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(JSONSchema(), &s); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		pattern string
		max     int
	}{
		"SecretKey":    {pattern: config.SecretKeyPattern, max: config.MaxSecretKeyLen},
		"DNSSubdomain": {pattern: config.SecretNamePattern, max: config.MaxSecretNameLen},
	}
	for def, tc := range tests {
		t.Run(def, func(t *testing.T) {
			got := s.Defs[def]
			if got.Pattern != tc.pattern || got.MaxLength != tc.max {
				t.Fatalf("#%s is %q, at most %d; the proxy's rule is %q, at most %d: change schema.cue and go generate",
					def, got.Pattern, got.MaxLength, tc.pattern, tc.max)
			}
		})
	}
}
