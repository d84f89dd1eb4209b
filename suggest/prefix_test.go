package suggest

import (
	"slices"
	"testing"
)

func TestPrefixes(t *testing.T) {
	tests := map[string]struct {
		paths    []string
		prefixes []string
		merged   []Merge
	}{
		"one path is itself": {
			paths: []string{"/repos/acme/gadgets/issues"}, prefixes: []string{"/repos/acme/gadgets/issues"},
		},
		"siblings merge into their parent": {
			paths:    []string{"/repos/acme/gadgets/issues", "/repos/acme/gadgets/pulls"},
			prefixes: []string{"/repos/acme/gadgets"},
			merged:   []Merge{{Prefix: "/repos/acme/gadgets", Paths: []string{"/repos/acme/gadgets/issues", "/repos/acme/gadgets/pulls"}}},
		},
		"paths sharing one segment stay apart": {
			paths:    []string{"/repos/acme", "/repos/other"},
			prefixes: []string{"/repos/acme", "/repos/other"},
		},
		"top-level paths never merge into /": {
			paths:    []string{"/emojis", "/user"},
			prefixes: []string{"/emojis", "/user"},
		},
		"a path under another is covered by it": {
			paths:    []string{"/user", "/user/repos"},
			prefixes: []string{"/user"},
		},
		"only siblings merge, into their parent": {
			paths:    []string{"/repos/acme/a/pulls/1", "/repos/acme/a/pulls/2", "/repos/acme/b"},
			prefixes: []string{"/repos/acme/a/pulls", "/repos/acme/b"},
			merged:   []Merge{{Prefix: "/repos/acme/a/pulls", Paths: []string{"/repos/acme/a/pulls/1", "/repos/acme/a/pulls/2"}}},
		},
		"a parent among the paths covers its children": {
			paths:    []string{"/repos/acme/a", "/repos/acme/a/pulls/1", "/repos/acme/a/pulls/2"},
			prefixes: []string{"/repos/acme/a"},
		},
		"two clusters": {
			paths:    []string{"/a/b/c", "/a/b/d", "/x/y/1", "/x/y/2"},
			prefixes: []string{"/a/b", "/x/y"},
			merged:   []Merge{{Prefix: "/a/b", Paths: []string{"/a/b/c", "/a/b/d"}}, {Prefix: "/x/y", Paths: []string{"/x/y/1", "/x/y/2"}}},
		},
		"/ only when refused itself": {
			paths: []string{"/", "/user"}, prefixes: []string{"/"},
		},
		"segments, not characters": {
			paths:    []string{"/repos/acme/widgets", "/repos/acme/widgets-old"},
			prefixes: []string{"/repos/acme"},
			merged:   []Merge{{Prefix: "/repos/acme", Paths: []string{"/repos/acme/widgets", "/repos/acme/widgets-old"}}},
		},
		"trailing slash": {
			paths:    []string{"/a/b/", "/a/b/c"},
			prefixes: []string{"/a/b"},
			merged:   []Merge{{Prefix: "/a/b", Paths: []string{"/a/b/", "/a/b/c"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, merged := Prefixes(tc.paths)
			if !slices.Equal(got, tc.prefixes) {
				t.Errorf("prefixes %q, want %q", got, tc.prefixes)
			}
			if !slices.EqualFunc(merged, tc.merged, func(a, b Merge) bool { return a.Prefix == b.Prefix && slices.Equal(a.Paths, b.Paths) }) {
				t.Errorf("merged %q, want %q", merged, tc.merged)
			}
			for _, p := range tc.paths {
				if !slices.ContainsFunc(got, func(q string) bool { return covers(q, p) }) {
					t.Errorf("%s is covered by no prefix", p)
				}
			}
		})
	}
}
