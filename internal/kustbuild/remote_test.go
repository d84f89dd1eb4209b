package kustbuild

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// disk is the files on disk, as the loader reads them.
type disk struct{}

func (disk) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

func TestIsRemoteRef(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"base/kustomization.yaml":   "resources: []\n",
		"example.com/cm.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"configmap.v2.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\n",
		"dir.d/kustomization.yaml":  "resources: []\n",
		"weird?ref=x/placeholder":   "",
		"github.com/acme/base/keep": "",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[string]struct {
		ref    string
		tree   bool
		remote bool
	}{
		"https URL":                          {ref: "https://raw.example.com/acme/cm.yaml", tree: false, remote: true},
		"http URL in resources":              {ref: "http://127.0.0.1:8080/cm.yaml", tree: true, remote: true},
		"ssh URL":                            {ref: "ssh://git@github.com/acme/base.git", tree: true, remote: true},
		"git scp-like":                       {ref: "git@github.com:acme/base.git//overlay", tree: true, remote: true},
		"file:// repository (cloned too)":    {ref: "file:///srv/repos/base.git", tree: true, remote: true},
		"go-getter style":                    {ref: "git::https://github.com/acme/base", tree: true, remote: true},
		"github shorthand":                   {ref: "github.com/acme/agent-bases//github?ref=v1.4.0", tree: true, remote: true},
		"shorthand without a ref":            {ref: "gitlab.example.org/acme/base", tree: true, remote: true},
		"ref query on a bare name":           {ref: "acme/base?ref=main", tree: true, remote: true},
		"local directory":                    {ref: "base", tree: true, remote: false},
		"local dir that looks like a host":   {ref: "example.com/cm.yaml", tree: true, remote: false},
		"shorthand that exists on disk":      {ref: "github.com/acme/base", tree: true, remote: false},
		"local file with dots":               {ref: "configmap.v2.yaml", tree: true, remote: false},
		"relative parent path":               {ref: "../shared/base", tree: true, remote: false},
		"dot-relative path":                  {ref: "./missing.d/x", tree: true, remote: false},
		"missing plain file":                 {ref: "missing.yaml", tree: true, remote: false},
		"shorthand in a file-only field":     {ref: "github.com/acme/patch.yaml", tree: false, remote: false},
		"URL in a file-only field":           {ref: "https://example.com/patch.yaml", tree: false, remote: true},
		"empty":                              {ref: "", tree: true, remote: false},
		"absolute path":                      {ref: "/etc/kustomize/base", tree: true, remote: false},
		"multi-line scalar is not a ref":     {ref: "a\nhttps://x", tree: true, remote: false},
		"directory name with a dot, present": {ref: "dir.d", tree: true, remote: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := isRemoteRef(disk{}, dir, tc.ref, tc.tree); got != tc.remote {
				t.Fatalf("isRemoteRef(%q, tree=%v) = %v, want %v", tc.ref, tc.tree, got, tc.remote)
			}
		})
	}
}

// FuzzRemoteEntry feeds arbitrary kustomization files to the remote-base
// scan, which runs on every kustomization kustomize reads: it must never
// panic, and what it returns must be an entry it judges remote.
func FuzzRemoteEntry(f *testing.F) {
	for _, s := range []string{
		"resources:\n- github.com/acme/base?ref=v1\n",
		"resources: [cm.yaml, https://example.com/x.yaml]\n",
		"patches:\n- path: http://x/p.yaml\n  target: {kind: ConfigMap}\n",
		"openapi: {path: https://x/schema.json}\n",
		"components: [git@github.com:acme/c.git]\n",
		"- a\n- b\n",
		"resources: &a [*a]\n",
		"",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		e := RemoteEntry(disk{}, dir+"/kustomization.yaml", data)
		if e != nil && !isRemoteRef(disk{}, dir, e.Value, true) {
			t.Fatalf("RemoteEntry returned %q, which is not remote", e.Value)
		}
	})
}
