package argocd

import (
	"path/filepath"
	"testing"

	"keyhole.dev/keyhole/source"
)

// TestOwnRepo: a source naming no directory here takes its OwnErr or
// OwnWarn when another source builds a unit from the same repository and
// revision out of this repository, and keeps its Skip when none does.
func TestOwnRepo(t *testing.T) {
	unit := &source.Unit{Name: "argocd:argocd/web", Argo: &source.ArgoOverlay{}}
	tests := map[string]struct {
		found                 []source.ArgoFound
		skip, err, warn, code string
	}{
		"another source builds from the repository": {
			found: []source.ArgoFound{{Unit: unit, Repo: "git.example/acme@HEAD"},
				{Repo: "git.example/acme@HEAD", Skip: "out of reach", OwnErr: "no such path"}},
			err: "no such path",
		},
		"a generator path matching nothing": {
			found: []source.ArgoFound{{Unit: unit, Repo: "git.example/acme@HEAD"},
				{Repo: "git.example/acme@HEAD", Skip: "out of reach", OwnWarn: "matches nothing"}},
			warn: "matches nothing", code: source.CodeGeneratorMatchesNothing,
		},
		"another revision": {
			found: []source.ArgoFound{{Unit: unit, Repo: "git.example/acme@HEAD"},
				{Repo: "git.example/acme@v1", Skip: "out of reach", OwnErr: "no such path"}},
			skip: "out of reach",
		},
		"no unit builds from it": {
			found: []source.ArgoFound{{Repo: "git.example/acme@HEAD", Skip: "out of reach", OwnErr: "no such path"}},
			skip:  "out of reach",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := []*source.ArgoObject{{Found: tc.found}}
			ownRepo(objs)
			got := objs[0].Found[len(tc.found)-1]
			if got.Skip != tc.skip || got.Err != tc.err || got.Warn != tc.warn || got.Code != tc.code {
				t.Errorf("got skip %q err %q warn %q code %q, want %q %q %q %q", got.Skip, got.Err, got.Warn, got.Code, tc.skip, tc.err, tc.warn, tc.code)
			}
		})
	}
}

// TestRootOf: the deepest of keyhole.yaml's argocd.roots holding a file
// is its root.
func TestRootOf(t *testing.T) {
	base := filepath.FromSlash("/repo")
	roots := []source.ArgoRoot{
		{Path: filepath.Join(base, "clusters"), Shown: "clusters"},
		{Path: filepath.Join(base, "clusters", "prod"), Shown: "clusters/prod", Instance: "prod"},
	}
	tests := map[string]struct {
		file, want string
	}{
		"the deepest":  {file: filepath.Join(base, "clusters", "prod", "app.yaml"), want: "clusters/prod"},
		"the shallow":  {file: filepath.Join(base, "clusters", "dev", "app.yaml"), want: "clusters"},
		"outside":      {file: filepath.Join(base, "apps", "app.yaml"), want: ""},
		"no file":      {file: "", want: ""},
		"a root alone": {file: filepath.Join(base, "clusters"), want: "clusters"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ""
			if r := rootOf(roots, tc.file); r != nil {
				got = r.Shown
			}
			if got != tc.want {
				t.Errorf("rootOf(%q) = %q, want %q", tc.file, got, tc.want)
			}
		})
	}
}
