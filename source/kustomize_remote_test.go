package source

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

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
			docs, diags, _ := testLoad([]string{"k"}, Options{Dir: dir, Stdin: strings.NewReader("")})
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
		docs, diags, err := testLoad([]string{"k"}, Options{Dir: dir, AllowRemoteBases: true})
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
