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

// FuzzLabelSelector holds the conversion and matching of one selector
// requirement to the controller's meaning: no panic on any input, and each
// operator picks exactly the namespaces it names.
func FuzzLabelSelector(f *testing.F) {
	f.Add("team", "In", "a", "a", true)
	f.Add("keyhole.dev/team", "NotIn", "a", "b", true)
	f.Add("team", "Exists", "", "", false)
	f.Add("team", "DoesNotExist", "", "x", true)
	f.Add("bad key", "in", "a b", "", false)
	f.Fuzz(func(t *testing.T, key, op, value, label string, has bool) {
		w := &labelSelectorWire{}
		w.MatchExpressions = append(w.MatchExpressions, struct {
			Key      string   `yaml:"key"`
			Operator string   `yaml:"operator"`
			Values   []string `yaml:"values"`
		}{Key: key, Operator: op})
		if op == "In" || op == "NotIn" {
			w.MatchExpressions[0].Values = []string{value}
		}
		s, bad := convertSelector(w, path{"spec", "namespaceSelector"})
		if bad != nil {
			if bad.msg == "" || len(bad.at) < 3 {
				t.Fatalf("a refusal without a reason or a place: %+v", bad)
			}
			return
		}
		labels := map[string]string{}
		if has {
			labels[key] = label
		}
		want := map[string]bool{
			"In":           has && label == value,
			"NotIn":        !has || label != value,
			"Exists":       has,
			"DoesNotExist": !has,
		}[op]
		if got := s.matches(labels); got != want {
			t.Fatalf("%s %s %q on %v: %v, want %v", key, op, value, labels, got, want)
		}
		ml, bad := convertSelector(&labelSelectorWire{MatchLabels: map[string]string{key: value}}, nil)
		if bad == nil && ml.matches(labels) != (has && label == value) {
			t.Fatalf("matchLabels {%s: %s} on %v", key, value, labels)
		}
	})
}
