package compiler

import "testing"

func TestSuggest(t *testing.T) {
	tests := map[string]struct {
		word       string
		candidates []string
		want       string
	}{
		"one letter off":     {word: "tokn", candidates: []string{"user", "token"}, want: "token"},
		"swapped neighbours": {word: "vsc", candidates: []string{"chat", "vcs"}, want: "vcs"},
		"too far":            {word: "username", candidates: []string{"user", "token"}, want: ""},
		"exact is no typo":   {word: "token", candidates: []string{"token"}, want: ""},
		"tie goes lexically": {word: "ab", candidates: []string{"ac", "aa"}, want: "aa"},
		"no candidates":      {word: "x", want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := suggest(tc.word, tc.candidates); got != tc.want {
				t.Errorf("suggest(%q, %q) = %q, want %q", tc.word, tc.candidates, got, tc.want)
			}
		})
	}
}
