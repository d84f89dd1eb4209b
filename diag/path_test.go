package diag

import "testing"

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
