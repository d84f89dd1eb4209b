package kustbuild

import "testing"

func TestMeasureYAML(t *testing.T) {
	lineTests := map[string]struct {
		in   string
		want int
	}{
		"ending in a newline": {in: "a\nb\n", want: 2},
		"without one":         {in: "a\nb", want: 2},
		"empty":               {in: "", want: 0},
		"one blank line":      {in: "\n", want: 1},
	}
	for name, tc := range lineTests {
		t.Run("lines/"+name, func(t *testing.T) {
			if got := countLines([]byte(tc.in)); got != tc.want {
				t.Fatalf("countLines(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
	tests := map[string]struct {
		in            string
		objects, keys int
		ok            bool
	}{
		"two documents":      {in: "a: 1\nb: 2\n---\nc: {d: 1, e: 2, f: 3}\n", objects: 2, keys: 3, ok: true},
		"a List":             {in: "kind: List\nitems:\n- {a: 1}\n- {b: 1}\n", objects: 3, keys: 2, ok: true},
		"a top-level list":   {in: "- {a: 1}\n- {b: 1}\n- c\n", objects: 3, keys: 1, ok: true},
		"env file":           {in: "A=1\nB=2\n", ok: false},
		"not YAML":           {in: "a: [\n", ok: false},
		"empty":              {in: "", ok: false},
		"aliases not walked": {in: "a: &x {k1: 1, k2: 2}\nb: *x\nc: *x\n", objects: 1, keys: 3, ok: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objects, keys, ok := measureYAML([]byte(tc.in))
			if objects != tc.objects || keys != tc.keys || ok != tc.ok {
				t.Fatalf("measureYAML = %d, %d, %v; want %d, %d, %v", objects, keys, ok, tc.objects, tc.keys, tc.ok)
			}
		})
	}
}
