package source

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
)

// encodings are the ways YAML 1.2 lets a file be saved, with and without
// a byte order mark, keyed by a name for test cases.
var encodings = map[string]struct {
	enc  encoding.Encoding
	mark string
}{
	"UTF-8 with a mark":     {mark: "\uFEFF"},
	"UTF-16LE with a mark":  {enc: unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM), mark: "\xFF\xFE"},
	"UTF-16BE with a mark":  {enc: unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM), mark: "\xFE\xFF"},
	"UTF-32LE with a mark":  {enc: utf32.UTF32(utf32.LittleEndian, utf32.IgnoreBOM), mark: "\xFF\xFE\x00\x00"},
	"UTF-32BE with a mark":  {enc: utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM), mark: "\x00\x00\xFE\xFF"},
	"UTF-16LE without mark": {enc: unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM)},
	"UTF-16BE without mark": {enc: unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM)},
	"UTF-32LE without mark": {enc: utf32.UTF32(utf32.LittleEndian, utf32.IgnoreBOM)},
	"UTF-32BE without mark": {enc: utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM)},
}

// encode saves text as the named encoding would.
func encode(t testing.TB, name, text string) string {
	t.Helper()
	e := encodings[name]
	if e.enc == nil {
		return e.mark + text
	}
	b, err := e.enc.NewEncoder().String(text)
	if err != nil {
		t.Fatal(err)
	}
	return e.mark + b
}

// TestParseEncodings holds a file saved in UTF-16 or UTF-32 to the file
// saved in UTF-8: the same documents at the same positions, and the same
// diagnostics at the same line and column (in characters, a character
// outside the BMP, two UTF-16 code units, counting as one).
func TestParseEncodings(t *testing.T) {
	texts := map[string]string{
		"a Connection, CRLF line ends and a character outside the BMP": strings.ReplaceAll(
			strings.Replace(connection, "namespace: agents", "namespace: agents # 𝔘nicode ü", 1), "\n", "\r\n"),
		"two documents and a duplicate key after wide characters": secretAndClass + "---\napiVersion: v1\nkind: ConfigMap\ndata: {ü😀: 1, ü😀: 2}\n",
		"a NUL after wide characters":                             "apiVersion: v1\nkind: ConfigMap\ndata: {a: \"ü😀\x00\"}\n",
	}
	for ename := range encodings {
		for tname, text := range texts {
			t.Run(ename+"/"+tname, func(t *testing.T) {
				wantDocs, wantDiags := Parse("in.yaml", []byte(text))
				gotDocs, gotDiags := Parse("in.yaml", []byte(encode(t, ename, text)))
				if len(wantDocs)+len(wantDiags) == 0 {
					t.Fatal("the UTF-8 text gives nothing: the case tests nothing")
				}
				if g, w := nodesOf(t, gotDocs), nodesOf(t, wantDocs); g != w {
					t.Errorf("documents differ\n%s:\n%s\nUTF-8:\n%s", ename, g, w)
				}
				if g, w := fmt.Sprint(gotDiags), fmt.Sprint(wantDiags); g != w {
					t.Errorf("diagnostics differ\n%s:\n%s\nUTF-8:\n%s", ename, g, w)
				}
			})
		}
	}
}

// nodesOf renders documents with the position of every node.
func nodesOf(t *testing.T, docs []*Document) string {
	t.Helper()
	var b strings.Builder
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		b.WriteString(n.Value + "@" + strconv.Itoa(n.Line) + ":" + strconv.Itoa(n.Column) + " ")
		for _, c := range n.Content {
			walk(c)
		}
	}
	for _, d := range docs {
		b.WriteString(d.File + "#" + strconv.Itoa(d.Index) + " " + d.Pos.String() + ": ")
		walk(d.Node)
		b.WriteString("\n")
	}
	return b.String()
}

// TestDecodeInvalid points at the first bytes a file's encoding does not
// allow, by line and column of the text before them.
func TestDecodeInvalid(t *testing.T) {
	tests := map[string]struct {
		data      string
		line, col int
		contains  string
	}{
		"UTF-16LE unpaired high surrogate": {
			data: "\xFF\xFE" + "a\x00:\x00 \x00b\x00\n\x00c\x00:\x00 \x00\x3D\xD8x\x00\n\x00",
			line: 2, col: 4, contains: "invalid UTF-16LE",
		},
		"UTF-16BE lone low surrogate after a surrogate pair": {
			data: "\xFE\xFF" + "\x00a\x00:\x00 \xD8\x3D\xDE\x00\xDC\x00",
			line: 1, col: 5, contains: "invalid UTF-16BE",
		},
		"UTF-16LE odd length": {
			data: "\xFF\xFE" + "a\x00\n\x00b",
			line: 2, col: 1, contains: "truncated",
		},
		"UTF-32LE past U+10FFFF": {
			data: "\xFF\xFE\x00\x00" + "k\x00\x00\x00:\x00\x00\x00\x00\x00\x11\x00",
			line: 1, col: 3, contains: "invalid UTF-32LE",
		},
		"UTF-32BE surrogate code point": {
			data: "\x00\x00\xFE\xFF" + "\x00\x00\x00k\x00\x00\x00\n\x00\x00\xD8\x00",
			line: 2, col: 1, contains: "invalid UTF-32BE",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			docs, ds := Parse("in.yaml", []byte(tc.data))
			if len(docs) != 0 || len(ds) != 1 {
				t.Fatalf("%d documents, diagnostics %v; want one error", len(docs), ds)
			}
			d := ds[0]
			if d.Code != CodeInputInvalid || d.Pos.Line != tc.line || d.Pos.Column != tc.col || !strings.Contains(d.Message, tc.contains) {
				t.Errorf("got %v, want InputInvalid at %d:%d saying %q", d, tc.line, tc.col, tc.contains)
			}
		})
	}
}

// TestLoadEncodedFiles walks a repository holding files saved in UTF-16
// and UTF-32, on disk and in a commit: each is read as its text. One
// that names keyhole's kinds and holds bytes its encoding does not allow
// is an error at the file; one that names none is skipped, as a UTF-8
// file would be.
func TestLoadEncodedFiles(t *testing.T) {
	const canary = "canary-value-4d1e"
	secret := strings.Replace(secretAndClass, "placeholder-not-a-token", canary, 1)
	files := map[string]string{
		"walk/c16le.yaml":            encode(t, "UTF-16LE with a mark", strings.ReplaceAll(connection, "\n", "\r\n")),
		"walk/c16be.yaml":            encode(t, "UTF-16BE with a mark", strings.Replace(connection, "github-acme", "be", 1)),
		"walk/c32le.yaml":            encode(t, "UTF-32LE with a mark", strings.Replace(connection, "github-acme", "le32", 1)),
		"walk/secret.yaml":           encode(t, "UTF-16LE with a mark", secret),
		"walk/bad-conn.yaml":         encode(t, "UTF-16LE with a mark", "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\n") + "\x3D\xD8",
		"walk/bad-other.yaml":        encode(t, "UTF-16LE with a mark", "apiVersion: v1\nkind: ConfigMap\n") + "\x3D\xD8",
		"kust/kustomization.yaml":    encode(t, "UTF-16LE with a mark", "resources: [c32be.yaml, c16le.yaml]\n"),
		"kust/c32be.yaml":            encode(t, "UTF-32BE with a mark", strings.Replace(connection, "github-acme", "k32", 1)),
		"kust/c16le.yaml":            encode(t, "UTF-16LE with a mark", strings.Replace(connection, "github-acme", "k16", 1)),
		"badkust/kustomization.yaml": "resources: [c.yaml]\n",
		"badkust/c.yaml":             encode(t, "UTF-32LE with a mark", "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\n") + "\xFF\xFF\xFF\x7F",
	}
	dir, r := gitRepo(t)
	writeFiles(t, dir, files)
	commitAll(t, r, "encoded files")
	docs, diags, errText := loaded(t, []string{"."}, Options{Dir: dir})
	if errText != "" {
		t.Fatalf("Load: %s", errText)
	}
	var ids []string
	ds, _, _ := testLoad([]string{"."}, Options{Dir: dir})
	ids = docIDs(ds)
	wantIDs := []string{
		"kust/c32be.yaml#0 Connection/k32",
		"kust/c16le.yaml#0 Connection/k16",
		"walk/c16be.yaml#0 Connection/be",
		"walk/c16le.yaml#0 Connection/github-acme",
		"walk/c32le.yaml#0 Connection/le32",
		"walk/secret.yaml#0 Secret/acme-github-token",
		"walk/secret.yaml#1 SandboxClass/workspace",
	}
	if !slices.Equal(ids, wantIDs) {
		t.Errorf("documents:\n got %q\nwant %q", ids, wantIDs)
	}
	wantDiags := []string{
		"badkust/c.yaml:3:1: error InputInvalid: invalid UTF-32LE",
		"walk/bad-conn.yaml:3:1: error InputInvalid: invalid UTF-16LE",
		"walk/bad-other.yaml:3:1: info InputSkipped: not read as objects: it names none of keyhole's kinds (InputInvalid: invalid UTF-16LE",
	}
	if len(diags) != len(wantDiags) {
		t.Fatalf("diagnostics:\n%s\nwant %d", strings.Join(diags, "\n"), len(wantDiags))
	}
	for i, w := range wantDiags {
		if !strings.HasPrefix(diags[i], w) {
			t.Errorf("diagnostic %d:\n got %s\nwant %s...", i, diags[i], w)
		}
	}
	for _, s := range append(slices.Clone(diags), errText) {
		if strings.Contains(s, canary) {
			t.Errorf("a diagnostic holds the Secret's value: %s", s)
		}
	}
	// The commit reads as the disk does.
	tree := headTree(t, dir)
	emptyWorkTree(t, dir)
	gotDocs, gotDiags, gotErr := loaded(t, []string{"."}, Options{Dir: dir, Tree: tree})
	if strings.Join(gotDocs, "\n---\n") != strings.Join(docs, "\n---\n") {
		t.Errorf("documents differ\ncommit:\n%s\ndisk:\n%s", strings.Join(gotDocs, "\n---\n"), strings.Join(docs, "\n---\n"))
	}
	if strings.Join(gotDiags, "\n") != strings.Join(diags, "\n") || gotErr != errText {
		t.Errorf("diagnostics differ\ncommit:\n%s %s\ndisk:\n%s %s", strings.Join(gotDiags, "\n"), gotErr, strings.Join(diags, "\n"), errText)
	}
	if _, err := os.Stat(filepath.Join(dir, "walk")); err == nil {
		t.Fatal("the working tree was not emptied")
	}
}
