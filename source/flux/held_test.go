package flux

import (
	"path/filepath"
	"testing"
)

// How near two directories are is how many leading elements they
// share: clusters/b's objects are nearer clusters/b than clusters/a's.
func TestCommonDirs(t *testing.T) {
	for name, tc := range map[string]struct {
		a, b string
		want int
	}{
		"same":            {a: "/r/clusters/b", b: "/r/clusters/b", want: 4},
		"siblings":        {a: "/r/clusters/b", b: "/r/clusters/a", want: 3},
		"below":           {a: "/r/clusters", b: "/r/clusters/b/apps", want: 3},
		"a prefix is not": {a: "/r/clusters/prod", b: "/r/clusters/prod-eu", want: 3},
		"apart":           {a: "/r", b: "/s", want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			if got := commonDirs(filepath.FromSlash(tc.a), filepath.FromSlash(tc.b)); got != tc.want {
				t.Errorf("commonDirs(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
		})
	}
}
