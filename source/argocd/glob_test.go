package argocd

import "testing"

func TestGlobMatch(t *testing.T) {
	tests := map[string]struct {
		glob, path string
		want       bool
	}{
		"one element":                {glob: "apps/*", path: "apps/web", want: true},
		"star stays in an element":   {glob: "apps/*", path: "apps/web/prod", want: false},
		"double star below":          {glob: "apps/**", path: "apps/web/prod", want: true},
		"final double star not self": {glob: "apps/**", path: "apps", want: false},
		"double star in the middle":  {glob: "apps/**/prod", path: "apps/prod", want: true},
		"double star deep middle":    {glob: "apps/**/prod", path: "apps/a/b/prod", want: true},
		"other tree":                 {glob: "apps/*", path: "infra/web", want: false},
		"pattern characters":         {glob: "envs/[dp]*", path: "envs/dev", want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := globMatch(tc.glob, tc.path); got != tc.want {
				t.Errorf("globMatch(%q, %q) = %v, want %v", tc.glob, tc.path, got, tc.want)
			}
		})
	}
}
