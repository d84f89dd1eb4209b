package apiserver

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// subset returns, one line each, where want is not contained in got: a
// key of want missing from got, a list of another length, or a scalar
// that differs. got may hold more (the server adds defaults, metadata and
// status); what was rendered must come back unchanged, or the server
// dropped or rewrote it. An empty or null value in want matches a missing
// one, since the server omits empty optional fields and they mean the
// same. The values are rendered manifests, which hold no secret.
func subset(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			if len(w) == 0 && got == nil {
				return nil
			}
			return []string{fmt.Sprintf("%s: rendered a map, got %T", path, got)}
		}
		var diffs []string
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			gv, present := g[k]
			if !present {
				if isEmpty(w[k]) {
					continue
				}
				diffs = append(diffs, fmt.Sprintf("%s.%s: rendered, missing on the server", path, k))
				continue
			}
			diffs = append(diffs, subset(path+"."+k, w[k], gv)...)
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok {
			if len(w) == 0 && got == nil {
				return nil
			}
			return []string{fmt.Sprintf("%s: rendered a list, got %T", path, got)}
		}
		if len(w) != len(g) {
			return []string{fmt.Sprintf("%s: rendered %d items, the server has %d", path, len(w), len(g))}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, subset(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return diffs
	default:
		if want == nil && got == nil {
			return nil
		}
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: rendered %#v, the server has %#v", path, want, got)}
		}
		return nil
	}
}

// isEmpty is true for null, an empty map and an empty list.
func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// TestSubset checks the comparison the read-back test relies on: it must
// accept what the server adds and report anything it dropped or changed,
// or the read-back would assert nothing.
func TestSubset(t *testing.T) {
	tests := map[string]struct {
		want, got any
		diffs     []string
	}{
		"equal scalars": {
			want: map[string]any{"a": 1, "b": "x", "c": true},
			got:  map[string]any{"a": 1, "b": "x", "c": true},
		},
		"server adds fields": {
			want: map[string]any{"spec": map[string]any{"replicas": 1}},
			got:  map[string]any{"spec": map[string]any{"replicas": 1, "strategy": "RollingUpdate"}, "status": map[string]any{}},
		},
		"empty values match missing ones": {
			want: map[string]any{"emptyDir": map[string]any{}, "args": []any{}, "note": nil},
			got:  map[string]any{},
		},
		"empty map matches null": {
			want: map[string]any{"emptyDir": map[string]any{}},
			got:  map[string]any{"emptyDir": nil},
		},
		"dropped field": {
			want:  map[string]any{"spec": map[string]any{"replicas": 1, "paused": true}},
			got:   map[string]any{"spec": map[string]any{"replicas": 1}},
			diffs: []string{".spec.paused: rendered, missing on the server"},
		},
		"changed scalar": {
			want:  map[string]any{"cpu": "0.5"},
			got:   map[string]any{"cpu": "500m"},
			diffs: []string{`.cpu: rendered "0.5", the server has "500m"`},
		},
		"number rewritten as string": {
			want:  map[string]any{"port": 3128},
			got:   map[string]any{"port": "3128"},
			diffs: []string{`.port: rendered 3128, the server has "3128"`},
		},
		"list length": {
			want:  map[string]any{"ports": []any{1, 2}},
			got:   map[string]any{"ports": []any{1}},
			diffs: []string{".ports: rendered 2 items, the server has 1"},
		},
		"list item": {
			want:  []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}},
			got:   []any{map[string]any{"name": "a", "x": 1}, map[string]any{"name": "c"}},
			diffs: []string{`[1].name: rendered "b", the server has "c"`},
		},
		"map replaced by scalar": {
			want:  map[string]any{"a": map[string]any{"b": 1}},
			got:   map[string]any{"a": "b"},
			diffs: []string{".a: rendered a map, got string"},
		},
		"nonempty map against null": {
			want:  map[string]any{"a": map[string]any{"b": 1}},
			got:   map[string]any{"a": nil},
			diffs: []string{".a: rendered a map, got <nil>"},
		},
		"several differences in key order": {
			want:  map[string]any{"z": 1, "a": 2},
			got:   map[string]any{},
			diffs: []string{".a: rendered, missing on the server", ".z: rendered, missing on the server"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := subset("", tc.want, tc.got)
			if !slices.Equal(got, tc.diffs) {
				t.Errorf("subset:\n got %q\nwant %q", got, tc.diffs)
			}
		})
	}
}
