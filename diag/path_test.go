package diag

import (
	"strings"
	"testing"
)

func TestJoin(t *testing.T) {
	tests := map[string]struct {
		got, want string
	}{
		"first key":      {got: JoinKey("", "spec"), want: "spec"},
		"nested key":     {got: JoinKey("spec", "hosts"), want: "spec.hosts"},
		"index":          {got: JoinIndex("spec.hosts", 0), want: "spec.hosts[0]"},
		"dotted key":     {got: JoinKey("metadata.annotations", "keyhole.dev/ignore"), want: `metadata.annotations["keyhole.dev/ignore"]`},
		"digit first":    {got: JoinKey("data", "1key"), want: `data["1key"]`},
		"dash inside":    {got: JoinKey("x", "a-b_c9"), want: "x.a-b_c9"},
		"empty key":      {got: JoinKey("x", ""), want: `x[""]`},
		"quote escaped":  {got: JoinKey("", `a"b`), want: `["a\"b"]`},
		"key after list": {got: JoinKey(JoinIndex("inject", 2), "value"), want: "inject[2].value"},
	}
	for name, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", name, tc.got, tc.want)
		}
	}
}

func TestEscapeControl(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain":              {in: "apps/prod/connection.yaml", want: "apps/prod/connection.yaml"},
		"unicode kept":       {in: "apps/prød/連接.yaml", want: "apps/prød/連接.yaml"},
		"line break":         {in: "a\n::error file=x::forged.yaml", want: `a\n::error file=x::forged.yaml`},
		"carriage return":    {in: "a\rb", want: `a\rb`},
		"escape sequence":    {in: "a\x1b[31mred", want: `a\x1b[31mred`},
		"tab":                {in: "a\tb", want: `a\tb`},
		"C1 control":         {in: "a\u0085b", want: `a\u0085b`},
		"line separator":     {in: "a\u2028b", want: `a\u2028b`},
		"bidi override":      {in: "a\u202eb", want: `a\u202eb`},
		"invalid UTF-8 kept": {in: "a\xffb", want: "a\xffb"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := EscapeControl(tc.in); got != tc.want {
				t.Errorf("EscapeControl(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	d := Diagnostic{Code: "X", Severity: Error, Pos: Pos{File: "a\n::error::forged", Line: 1, Column: 2}, Message: "m"}
	if got := d.String(); strings.Contains(got, "\n") {
		t.Errorf("a file name's line break reached the line: %q", got)
	}
}
