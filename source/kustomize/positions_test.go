package kustomize

import (
	"slices"
	"testing"
)

func TestPointer(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
		ok   bool
	}{
		"field path":          {in: "/spec/hosts/0", want: []string{"spec", "hosts", "0"}, ok: true},
		"escaped slash":       {in: "/metadata/annotations/keyhole.dev~1ignore", want: []string{"metadata", "annotations", "keyhole.dev/ignore"}, ok: true},
		"escaped tilde":       {in: "/a~0b", want: []string{"a~b"}, ok: true},
		"escape order":        {in: "/a~01", want: []string{"a~1"}, ok: true},
		"append has no index": {in: "/spec/hosts/-"},
		"not a pointer":       {in: "spec/hosts"},
		"empty":               {in: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := pointer(tc.in)
			if ok != tc.ok || !slices.Equal(got, tc.want) {
				t.Errorf("pointer(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}
