package diag

import "testing"

func TestSuggest(t *testing.T) {
	tests := map[string]struct {
		word       string
		candidates []string
		want       string
	}{
		"one letter off":     {word: "tokn", candidates: []string{"user", "token"}, want: "token"},
		"swapped neighbours": {word: "vsc", candidates: []string{"chat", "vcs"}, want: "vcs"},
		"swapped in a field": {word: "hsots", candidates: []string{"credential", "hosts"}, want: "hosts"},
		"other case":         {word: "Hosts", candidates: []string{"hosts"}, want: "hosts"},
		"too far":            {word: "username", candidates: []string{"user", "token"}, want: ""},
		"exact is no typo":   {word: "token", candidates: []string{"token"}, want: ""},
		"tie goes lexically": {word: "ab", candidates: []string{"ac", "aa"}, want: "aa"},
		"no candidates":      {word: "x", want: ""},
		"long words":         {word: string(make([]byte, 100)), candidates: []string{string(make([]byte, 99))}, want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Suggest(tc.word, tc.candidates); got != tc.want {
				t.Errorf("Suggest(%q, %q) = %q, want %q", tc.word, tc.candidates, got, tc.want)
			}
		})
	}
}
