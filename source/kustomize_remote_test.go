package source

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestIsRemoteRef(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"base/kustomization.yaml":   "resources: []\n",
		"example.com/cm.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"configmap.v2.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\n",
		"dir.d/kustomization.yaml":  "resources: []\n",
		"weird?ref=x/placeholder":   "",
		"github.com/acme/base/keep": "",
	})
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
			if got := isRemoteRef(osFS{}, dir, tc.ref, tc.tree); got != tc.remote {
				t.Fatalf("isRemoteRef(%q, tree=%v) = %v, want %v", tc.ref, tc.tree, got, tc.remote)
			}
		})
	}
}

// TestRemoteBases checks that a remote base is refused at its entry, in
// every field and in a base of a base, without a single request leaving
// keyhole; and that with AllowRemoteBases kustomize fetches it (from a
// loopback HTTP server) and its objects are checked.
func TestRemoteBases(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/cm.yaml" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fetched}\ndata: {a: b}\n"))
	}))
	defer srv.Close()
	url := srv.URL + "/cm.yaml"
	local := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\n"
	tests := map[string]struct {
		files map[string]string
		want  string // the refusal's position
	}{
		"resource URL": {
			files: map[string]string{"k/kustomization.yaml": "resources:\n  - cm.yaml\n  - " + url + "\n", "k/cm.yaml": local},
			want:  "k/kustomization.yaml:3:5",
		},
		"in a base of a base": {
			files: map[string]string{
				"k/kustomization.yaml":      "resources: [cm.yaml, ../mid]\n",
				"k/cm.yaml":                 local,
				"mid/kustomization.yaml":    "resources: [../deep]\n",
				"deep/kustomization.yaml":   "resources:\n- " + url + "\n",
				"unrelated/kustomization.x": "",
			},
			want: "deep/kustomization.yaml:2:3",
		},
		"patch path": {
			files: map[string]string{"k/kustomization.yaml": "resources: [cm.yaml]\npatches:\n  - path: " + url + "\n", "k/cm.yaml": local},
			want:  "k/kustomization.yaml:3:11",
		},
		"component": {
			files: map[string]string{"k/kustomization.yaml": "resources: [cm.yaml]\ncomponents: [" + url + "]\n", "k/cm.yaml": local},
			want:  "k/kustomization.yaml:2:14",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			hits.Store(0)
			docs, diags, _ := Load([]string{"k"}, Options{Dir: dir, Stdin: strings.NewReader("")})
			if hits.Load() != 0 {
				t.Fatalf("%d requests reached the remote with remote bases not allowed", hits.Load())
			}
			if len(docs) != 0 {
				t.Errorf("a refused kustomization yielded %d documents", len(docs))
			}
			var got []string
			for _, d := range diags {
				got = append(got, d.Pos.String()+" "+d.Code)
			}
			if len(got) != 1 || got[0] != tc.want+" "+CodeKustomizeRemoteBase {
				t.Fatalf("diagnostics %q, want one %s at %s", got, CodeKustomizeRemoteBase, tc.want)
			}
			if !strings.Contains(diags[0].Message, "--allow-remote-bases") || !strings.Contains(diags[0].Message, url) {
				t.Errorf("message does not say what and how: %s", diags[0].Message)
			}
		})
	}
	t.Run("allowed, fetched and checked", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"k/kustomization.yaml": "resources:\n  - cm.yaml\n  - " + url + "\n", "k/cm.yaml": local})
		hits.Store(0)
		docs, diags, err := Load([]string{"k"}, Options{Dir: dir, AllowRemoteBases: true})
		if err != nil || len(diags) != 0 {
			t.Fatalf("Load: %v, %v", err, diags)
		}
		if hits.Load() == 0 {
			t.Fatal("kustomize did not fetch the allowed remote resource")
		}
		var names []string
		for _, d := range docs {
			names = append(names, d.Object().Name)
		}
		if strings.Join(names, ",") != "local,fetched" {
			t.Fatalf("built objects %v, want local and fetched", names)
		}
	})
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
		e := remoteEntry(osFS{}, dir+"/kustomization.yaml", data)
		if e != nil && !isRemoteRef(osFS{}, dir, e.Value, true) {
			t.Fatalf("remoteEntry returned %q, which is not remote", e.Value)
		}
	})
}
