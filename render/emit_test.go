package render

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// normal turns what emitYAML accepts into what yaml.v3 decodes into an
// any, so a round trip can be compared with reflect.DeepEqual.
func normal(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = normal(x)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, x := range v {
			l[i] = normal(x)
		}
		return l
	case []string:
		l := make([]any, len(v))
		for i, x := range v {
			l[i] = x
		}
		return l
	case int64:
		return int(v)
	case int32:
		return int(v)
	case float64:
		return int(v)
	}
	return v
}

func roundTrip(t *testing.T, v any) []byte {
	t.Helper()
	out, err := emitYAML(v)
	if err != nil {
		t.Fatalf("emitYAML: %v", err)
	}
	var back any
	if err := yaml.Unmarshal(out, &back); err != nil {
		t.Fatalf("the emitted YAML does not parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(back, normal(v)) {
		t.Fatalf("round trip changed the value:\nemitted:\n%s\ndecoded: %#v\nwant:    %#v", out, back, normal(v))
	}
	return out
}

func TestEmitRoundTrip(t *testing.T) {
	tricky := []string{
		"", " ", "yes", "No", "on", "OFF", "y", "n", "true", "null", "~", "0", "-1", "+1", "1.5", "1e3", "0x1F", "0o17",
		"0b101", "1:20", ".inf", "-.Inf", ".nan", "a: b", "a #b", "#x", "- x", "[x]", "{x}", "*x", "&x", "!x", "|x", ">x",
		"'x'", `"x"`, "%x", "@x", "`x`", "x\ny", "x\n", "x\n\n", " x\ny", "x \ny", "\tx\ny", "x\r\ny", "tab\there",
		"ünïcödé", "emoji 🙂", "\u2028", "\x00", "\x7f", "${VAR}", "omnia-injected-github-acme", "Bearer {{ .token }}",
		"app.kubernetes.io/name", "/etc/keyhole/trust/bundle.pem", "http://127.0.0.1:3128", "localhost,127.0.0.1,::1",
		"=", "a=b", "key.with/slash", "set -eu\ncat a b > c\n", "\ufeffbom\nx",
	}
	list := []any{}
	m := map[string]any{}
	for _, s := range tricky {
		list = append(list, s)
		m[s] = s
		roundTrip(t, map[string]any{"k": s})
		roundTrip(t, map[string]any{"k": []any{s, map[string]any{"in": s}}})
	}
	roundTrip(t, map[string]any{"list": list, "map": m})
	roundTrip(t, map[string]any{
		"empty": map[string]any{}, "none": []any{}, "strs": []string{"a", "b"}, "nostrs": []string{},
		"n": 3, "n64": int64(-4), "b": true, "f": float64(8),
		"nested": []any{[]any{"a", []any{}}, map[string]any{}, map[string]any{"x": []any{map[string]any{"y": 1}}}},
	})
}

func TestEmitRefuses(t *testing.T) {
	for name, v := range map[string]any{
		"fraction": map[string]any{"x": 1.5},
		"struct":   map[string]any{"x": struct{}{}},
		"nil":      map[string]any{"x": nil},
	} {
		if _, err := emitYAML(v); err == nil {
			t.Errorf("%s: emitYAML accepted it", name)
		}
	}
}

// TestEmitRenderedObjects round-trips every object the renderer builds for
// the test plan, in both proxy modes.
func TestEmitRenderedObjects(t *testing.T) {
	for _, mode := range []string{ModeSidecar, ModeDeployment} {
		files, err := Render(testPlan(), Options{ProxyMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !strings.HasSuffix(f.Path, ".yaml") {
				continue
			}
			var v any
			if err := yaml.Unmarshal(f.Data, &v); err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
			roundTrip(t, v)
		}
	}
}

func FuzzEmit(f *testing.F) {
	for _, s := range []string{"x", "yes", "a: b", "x\ny\n", "0x1F", "1:20", " lead", "${x}"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, k, v string) {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return // the renderer refuses invalid UTF-8 before encoding
		}
		if len(strconv.Quote(k)) > maxKey {
			if _, err := emitYAML(map[string]any{k: v}); err == nil {
				t.Fatal("emitYAML wrote a key longer than YAML allows")
			}
			return
		}
		roundTrip(t, map[string]any{k: v, "l": []any{v, map[string]any{k: []string{v}}}})
	})
}

// TestEmitFixed: a fixed value is written as the value it holds, wherever
// it is (a map's value, a sequence item, inline or not, at any depth,
// empty or not), the first time and from the emitter's copy after.
func TestEmitFixed(t *testing.T) {
	m := obj{"b": list{"x", obj{"c": 1}}, "a": "y"}
	l := list{obj{"k": "v", "l": list{}}, "s", list{"n"}}
	values := map[string]any{
		"map":           m,
		"list":          l,
		"strings":       []string{"p", "q"},
		"empty map":     obj{},
		"empty list":    list{},
		"scalar":        "z",
		"literal block": "line one\nline two\n",
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			build := func(v any) obj {
				return obj{
					"value": v,
					"items": list{v, obj{"in": v, "deeper": list{list{v}}}},
					"again": obj{"value": v},
				}
			}
			want, err := emitYAML(build(v))
			if err != nil {
				t.Fatal(err)
			}
			var e emitter
			f := fix(v)
			for i := range 2 {
				got, err := e.emit(build(f))
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Errorf("emit %d wrote\n%s\nwant\n%s", i, got, want)
				}
			}
		})
	}
}
