package source

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestMemo loads a directory, changes it, and loads it again with one
// Memo: a file of the same name and bytes gives the documents of the first
// load (its very nodes), anything else is parsed, and the second load
// returns what a load without the Memo returns.
func TestMemo(t *testing.T) {
	tests := map[string]struct {
		change map[string]string // file → new content; "" removes it
		// shared are the files whose nodes the second load takes from
		// the first.
		shared []string
	}{
		"unchanged": {
			shared: []string{"connection.yaml", "secret.yaml"},
		},
		"one file changed": {
			change: map[string]string{"connection.yaml": connection + "  # edited\n"},
			shared: []string{"secret.yaml"},
		},
		"lines moved": {
			change: map[string]string{"secret.yaml": "# one line down\n" + secretAndClass},
			shared: []string{"connection.yaml"},
		},
		"renamed": {
			change: map[string]string{"secret.yaml": "", "renamed.yaml": secretAndClass},
			shared: []string{"connection.yaml"},
		},
		"broken": {
			change: map[string]string{"connection.yaml": "kind: [\n"},
			shared: []string{"secret.yaml"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(files map[string]string) {
				for f, body := range files {
					p := filepath.Join(dir, f)
					if body == "" {
						if err := os.Remove(p); err != nil {
							t.Fatal(err)
						}
						continue
					}
					if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			write(map[string]string{"connection.yaml": connection, "secret.yaml": secretAndClass})
			memo := NewMemo()
			first, _, err := testLoad([]string{"."}, Options{Dir: dir, Memo: memo})
			if err != nil {
				t.Fatal(err)
			}
			if memo.Hits() != 0 {
				t.Fatalf("the first load reused %d files", memo.Hits())
			}
			write(tc.change)
			again, againDiags, err := testLoad([]string{"."}, Options{Dir: dir, Memo: memo})
			if err != nil {
				t.Fatal(err)
			}
			fresh, freshDiags, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(again, fresh) || !reflect.DeepEqual(againDiags, freshDiags) {
				t.Errorf("with the memo:\n%v\n%v\nwithout:\n%v\n%v", docIDs(again), againDiags, docIDs(fresh), freshDiags)
			}
			if memo.Hits() != len(tc.shared) {
				t.Errorf("reused %d files, want %d (%v)", memo.Hits(), len(tc.shared), tc.shared)
			}
			for _, d := range again {
				sharedNode := false
				for _, f := range first {
					if f.Node == d.Node {
						sharedNode = true
					}
				}
				want := false
				for _, s := range tc.shared {
					want = want || filepath.Base(d.File) == s
				}
				if sharedNode != want {
					t.Errorf("%s#%d: node shared %v, want %v", d.File, d.Index, sharedNode, want)
				}
			}
		})
	}
}
