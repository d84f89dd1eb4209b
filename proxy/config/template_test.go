package config

import (
	"errors"
	"slices"
	"testing"
)

func TestParseTemplate(t *testing.T) {
	tests := map[string]struct {
		in      string
		keys    []string
		invalid bool
	}{
		"bearer":          {in: "Bearer {{ .token }}", keys: []string{"token"}},
		"two keys":        {in: "{{.user}}:{{ .token }}{{.user}}", keys: []string{"user", "token"}},
		"literal only":    {in: "static", keys: nil},
		"comment":         {in: "Bearer {{/* c */}}{{ .t }}", keys: []string{"t"}},
		"unclosed":        {in: "Bearer {{ .token }", invalid: true},
		"function":        {in: `{{ printf "%s" .token }}`, invalid: true},
		"pipeline":        {in: "{{ .token | html }}", invalid: true},
		"conditional":     {in: "{{ if .a }}x{{ end }}", invalid: true},
		"loop":            {in: "{{ range .a }}x{{ end }}", invalid: true},
		"variable":        {in: "{{ $x := .a }}", invalid: true},
		"nested":          {in: "{{ .a.b }}", invalid: true},
		"dot":             {in: "{{ . }}", invalid: true},
		"define":          {in: `{{ define "x" }}y{{ end }}`, invalid: true},
		"string constant": {in: `{{ "x" }}`, invalid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmpl, err := ParseTemplate(tc.in)
			if tc.invalid {
				if !errors.Is(err, ErrTemplate) {
					t.Fatalf("ParseTemplate(%q) = %v, want ErrTemplate", tc.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTemplate(%q): %v", tc.in, err)
			}
			if got := tmpl.Keys(); !slices.Equal(got, tc.keys) {
				t.Errorf("Keys() = %q, want %q", got, tc.keys)
			}
		})
	}
}

func TestRender(t *testing.T) {
	tmpl, err := ParseTemplate("Bearer {{ .token }}!")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(func(k string) (string, error) { return "<" + k + ">", nil })
	if err != nil || got != "Bearer <token>!" {
		t.Fatalf("Render = %q, %v", got, err)
	}
	missing := errors.New("missing")
	if _, err := tmpl.Render(func(string) (string, error) { return "", missing }); !errors.Is(err, missing) {
		t.Fatalf("Render error = %v, want missing", err)
	}
}

func TestHeaderValue(t *testing.T) {
	tests := map[string]struct {
		in   string
		want string
		err  error
	}{
		"plain":             {in: "tok", want: "tok"},
		"trailing newline":  {in: "tok\n", want: "tok"},
		"two trailing":      {in: "tok\n\n", err: ErrValueLineBreak},
		"inner newline":     {in: "to\nk", err: ErrValueLineBreak},
		"carriage return":   {in: "tok\r\n", err: ErrValueLineBreak},
		"nul":               {in: "to\x00k", err: ErrValueNUL},
		"empty":             {in: "", err: ErrValueEmpty},
		"only newline":      {in: "\n", err: ErrValueEmpty},
		"spaces kept as is": {in: " tok ", want: " tok "},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := HeaderValue([]byte(tc.in))
			if !errors.Is(err, tc.err) || string(got) != tc.want {
				t.Fatalf("HeaderValue(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}
