package compiler

import "testing"

// TestLabelSyntax holds label keys and values to the API server's rules,
// which the controller applies when it converts a selector.
func TestLabelSyntax(t *testing.T) {
	tests := map[string]struct {
		key, value string
		keyOK      bool
		valueOK    bool
	}{
		"plain":                     {key: "team", value: "a", keyOK: true, valueOK: true},
		"prefixed":                  {key: "keyhole.dev/agents", value: "true", keyOK: true, valueOK: true},
		"empty value":               {key: "a_b.c-d", value: "", keyOK: true, valueOK: true},
		"empty key":                 {key: "", value: "-a", keyOK: false, valueOK: false},
		"empty prefix":              {key: "/team", value: "a-", keyOK: false, valueOK: false},
		"upper-case prefix":         {key: "Keyhole.dev/team", value: "A.b_C", keyOK: false, valueOK: true},
		"two slashes":               {key: "a/b/c", value: "a b", keyOK: false, valueOK: false},
		"name of 63":                {key: "a23456789012345678901234567890123456789012345678901234567890123", value: "a23456789012345678901234567890123456789012345678901234567890123", keyOK: true, valueOK: true},
		"name of 64":                {key: "a234567890123456789012345678901234567890123456789012345678901234", value: "a234567890123456789012345678901234567890123456789012345678901234", keyOK: false, valueOK: false},
		"a space, a line break":     {key: "bad key", value: "a\nb", keyOK: false, valueOK: false},
		"non-ASCII letters":         {key: "é", value: "é", keyOK: false, valueOK: false},
		"starts with a dot or dash": {key: ".a", value: "_a", keyOK: false, valueOK: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := checkLabelKey(tc.key); (err == nil) != tc.keyOK {
				t.Errorf("checkLabelKey(%q) = %v; want ok %v", tc.key, err, tc.keyOK)
			}
			if err := checkLabelValue(tc.value); (err == nil) != tc.valueOK {
				t.Errorf("checkLabelValue(%q) = %v; want ok %v", tc.value, err, tc.valueOK)
			}
		})
	}
}
