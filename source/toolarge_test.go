package source

import (
	"strings"
	"testing"
)

// TestLoadTooLargeWalked walks files over the size limit: each that
// names keyhole's kinds (anywhere in it, across the blocks it is searched
// in, or in its UTF-16 text) is an error that says the limit, and one
// that names none is skipped, saying so; the same from disk and from a
// commit, and inside a kustomize build.
func TestLoadTooLargeWalked(t *testing.T) {
	const limit = 128 << 10
	filler := strings.Repeat("# a line of comment that pads the file past the limit\n", 3*sniffBlock/54)
	// A long line whose kind field straddles two blocks.
	straddle := strings.Repeat("x", sniffBlock-20) + "\nkind: SandboxClass\n"
	tests := map[string]struct {
		files map[string]string
		want  []string
	}{
		"a Connection at the end of a large file": {
			files: map[string]string{"big.yaml": filler + connection},
			want:  []string{"big.yaml:1:1: error InputInvalid: file too large: "},
		},
		"a kind field across two blocks": {
			files: map[string]string{"big.yaml": "a: 1\n" + straddle + filler},
			want:  []string{"big.yaml:1:1: error InputInvalid: file too large: "},
		},
		"a Connection in UTF-16": {
			files: map[string]string{"big.yaml": encode(t, "UTF-16LE with a mark", filler+connection)},
			want:  []string{"big.yaml:1:1: error InputInvalid: file too large: "},
		},
		"an agent.yaml, by its name": {
			files: map[string]string{"agents/agent.yaml": filler},
			want:  []string{"agents/agent.yaml:1:1: error InputInvalid: file too large: "},
		},
		"a large file of other kinds": {
			files: map[string]string{"big.yaml": filler + "apiVersion: v1\nkind: ConfigMap\n"},
			want:  []string{"big.yaml:1:1: info InputSkipped: not read as objects: it names none of keyhole's kinds (InputInvalid: file too large: "},
		},
		"a Connection too large in a kustomization": {
			files: map[string]string{
				"k/kustomization.yaml": "resources: [big.yaml, secret.yaml]\n",
				"k/big.yaml":           filler + connection,
				"k/secret.yaml":        "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
			},
			want: []string{"k/big.yaml:1:1: error InputInvalid: file too large: "},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir, r := gitRepo(t)
			writeFiles(t, dir, tc.files)
			commitAll(t, r, "large files")
			_, diags, errText := loaded(t, []string{"."}, Options{Dir: dir, MaxFileSize: limit})
			if errText != "" {
				t.Fatalf("Load: %s", errText)
			}
			if len(diags) != len(tc.want) {
				t.Fatalf("diagnostics:\n%s\nwant %d", strings.Join(diags, "\n"), len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(diags[i], w) || !strings.Contains(diags[i], "bytes, over the 131072 bytes limit") {
					t.Errorf("diagnostic %d:\n got %s\nwant %s... bytes, over the 131072 bytes limit", i, diags[i], w)
				}
			}
			tree := headTree(t, dir)
			emptyWorkTree(t, dir)
			_, gotDiags, gotErr := loaded(t, []string{"."}, Options{Dir: dir, MaxFileSize: limit, Tree: tree})
			if strings.Join(gotDiags, "\n") != strings.Join(diags, "\n") || gotErr != errText {
				t.Errorf("the commit reads otherwise\ncommit:\n%s %s\ndisk:\n%s", strings.Join(gotDiags, "\n"), gotErr, strings.Join(diags, "\n"))
			}
		})
	}
}
