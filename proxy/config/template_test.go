package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"text/template"
)

func TestParseTemplate(t *testing.T) {
	tests := map[string]struct {
		in      string
		keys    []string
		invalid bool
		msg     string // in the error
	}{
		"index dotted":      {in: `Bearer {{ index . "tls.crt" }}`, keys: []string{"tls.crt"}},
		"index hyphen":      {in: `{{ index . "my-token" }}`, keys: []string{"my-token"}},
		"index raw string":  {in: "{{ index . `config.json` }}", keys: []string{"config.json"}},
		"index plain":       {in: `{{ index . "token" }}{{ .token }}`, keys: []string{"token"}},
		"index trimmed":     {in: `x {{- index . "a.b" -}} y`, keys: []string{"a.b"}},
		"dotted as field":   {in: "{{ .tls.crt }}", invalid: true, msg: `to read the key "tls.crt", write {{ index . "tls.crt" }}`},
		"hyphen as field":   {in: "Bearer {{ .my-token }}", invalid: true, msg: `read with {{ index . "my-token" }}`},
		"digit as field":    {in: "{{ .1st }}", invalid: true, msg: `read with {{ index . "1st" }}`},
		"index kubelet":     {in: `{{ index . "..data" }}`, invalid: true, msg: "kubelet keeps its own files"},
		"index slash":       {in: `{{ index . "a/b" }}`, invalid: true, msg: "holds '/'"},
		"index empty":       {in: `{{ index . "" }}`, invalid: true, msg: "empty"},
		"index two keys":    {in: `{{ index . "a" "b" }}`, invalid: true, msg: "one key"},
		"index of a key":    {in: `{{ index .a "b" }}`, invalid: true, msg: "does not read a key of the Secret"},
		"index of variable": {in: `{{ index $ "b" }}`, invalid: true, msg: "does not read a key of the Secret"},
		"index number":      {in: `{{ index . 1 }}`, invalid: true, msg: "quoted string"},
		"index piped":       {in: `{{ index . "a" | html }}`, invalid: true, msg: "pipeline"},
		"non-ASCII field":   {in: "{{ .tökén }}", invalid: true, msg: "Kubernetes cannot hold"},
		"bearer":            {in: "Bearer {{ .token }}", keys: []string{"token"}},
		"two keys":          {in: "{{.user}}:{{ .token }}{{.user}}", keys: []string{"user", "token"}},
		"literal only":      {in: "static", keys: nil},
		"comment":           {in: "Bearer {{/* c */}}{{ .t }}", keys: []string{"t"}},
		"unclosed":          {in: "Bearer {{ .token }", invalid: true},
		"function":          {in: `{{ printf "%s" .token }}`, invalid: true},
		"pipeline":          {in: "{{ .token | html }}", invalid: true},
		"conditional":       {in: "{{ if .a }}x{{ end }}", invalid: true},
		"loop":              {in: "{{ range .a }}x{{ end }}", invalid: true},
		"variable":          {in: "{{ $x := .a }}", invalid: true},
		"nested":            {in: "{{ .a.b }}", invalid: true},
		"dot":               {in: "{{ . }}", invalid: true},
		"define":            {in: `{{ define "x" }}y{{ end }}`, invalid: true},
		"string constant":   {in: `{{ "x" }}`, invalid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmpl, err := ParseTemplate(tc.in)
			if tc.invalid {
				if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("ParseTemplate(%q) = %v, want ErrTemplate saying %q", tc.in, err, tc.msg)
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

// FuzzParseTemplate parses arbitrary header templates: no panic, errors
// wrap ErrTemplate, every key read is one Kubernetes accepts, and what a
// parsed template renders is its text with each key's value in place.
func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"Bearer {{ .token }}", `{{ index . "tls.crt" }}`, "{{ .a.b }}", "{{ .my-key }}", `{{ index . "..data" }}`, "{{", "x{{/* c */}}y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tmpl, err := ParseTemplate(s)
		if err != nil {
			if !errors.Is(err, ErrTemplate) {
				t.Fatalf("error %v does not wrap ErrTemplate", err)
			}
			return
		}
		for _, r := range tmpl.Refs() {
			if err := CheckSecretKey(r.Key); err != nil {
				t.Fatalf("accepted a reference to %q: %v", r.Key, err)
			}
			if r.Offset < 0 || r.Offset >= len(s) {
				t.Fatalf("reference offset %d outside the template", r.Offset)
			}
		}
		// It renders as Go's text/template renders it over the Secret's
		// keys, which is how the operator reads the same value.
		value := func(k string) string { return "<" + k + ">" }
		got, err := tmpl.Render(func(k string) (string, error) { return value(k), nil })
		if err != nil {
			t.Fatal(err)
		}
		data := map[string]string{}
		for _, k := range tmpl.Keys() {
			data[k] = value(k)
		}
		gt, err := template.New("value").Option("missingkey=error").Parse(s)
		if err != nil {
			t.Fatalf("text/template refuses %q, which ParseTemplate accepted: %v", s, err)
		}
		var want strings.Builder
		if err := gt.Execute(&want, data); err != nil {
			t.Fatalf("text/template cannot execute %q: %v", s, err)
		}
		if got != want.String() {
			t.Fatalf("ParseTemplate renders %q as %q, text/template as %q", s, got, want.String())
		}
	})
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
		"vertical tab":      {in: "to\vk", err: ErrValueControl},
		"escape sequence":   {in: "tok\x1b[2J", err: ErrValueControl},
		"DEL":               {in: "to\x7fk", err: ErrValueControl},
		"tab kept":          {in: "to\tk", want: "to\tk"},
		"obs-text kept":     {in: "to\xe9k", want: "to\xe9k"},
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

// TestParseTemplateRemembers: a template parsed once is the same Template
// the next time, a template that fails fails every time, and past
// maxParsed texts nothing more is kept, though every text still parses.
func TestParseTemplateRemembers(t *testing.T) {
	a, err := ParseTemplate("Bearer {{ .remembered }}")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseTemplate("Bearer {{ .remembered }}")
	if err != nil || a != b {
		t.Fatalf("second parse: %p, %v; want %p", b, err, a)
	}
	for range 2 {
		if _, err := ParseTemplate("Bearer {{ .bad"); err == nil {
			t.Fatal("a broken template parsed")
		}
	}
	for i := range maxParsed + 1 {
		if _, err := ParseTemplate(fmt.Sprintf("x%d {{ .k }}", i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := ParseTemplate("after the bound {{ .k }}")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseTemplate("after the bound {{ .k }}")
	if err != nil || c == d || !slices.Equal(c.Keys(), d.Keys()) {
		t.Fatalf("past the bound: %p and %p (%v), want two equal parses", c, d, err)
	}
	if got := parsedCount.Load(); got < maxParsed {
		t.Fatalf("%d parses counted", got)
	}
}
