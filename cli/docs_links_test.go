package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// mdLink is a Markdown inline link's target; mdAnchor an explicit anchor.
var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	mdAnchor = regexp.MustCompile(`<a id="([^"]+)"`)
	mdFence  = regexp.MustCompile("^\\s*(```|~~~)")
)

// TestDocLinks: every relative link in README.md, docs/ and the examples'
// READMEs leads to a file of the repository, and every #fragment to a
// heading or an anchor of the file it names, as GitHub renders them.
func TestDocLinks(t *testing.T) {
	root := ".."
	files := []string{filepath.Join(root, "README.md")}
	for _, glob := range []string{"docs/*.md", "examples/*/README.md", "examples/*/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	slices.Sort(files)
	files = slices.Compact(files)
	anchors := map[string][]string{}
	anchorsOf := func(file string) ([]string, error) {
		if a, ok := anchors[file]; ok {
			return a, nil
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		a := docAnchors(string(b))
		anchors[file] = a
		return a, nil
	}
	links := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for n, line := range docProse(string(b)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: %s leads nowhere: %v", rel, n+1, target, err)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				a, err := anchorsOf(dest)
				if err != nil {
					t.Errorf("%s:%d: %s: %v", rel, n+1, target, err)
					continue
				}
				if !slices.Contains(a, frag) {
					t.Errorf("%s:%d: %s names no heading or anchor of %s", rel, n+1, target, filepath.Base(dest))
				}
			}
		}
	}
	if links < 50 {
		t.Errorf("only %d relative links found: the reader lost its way", links)
	}
}

// mdCode is an inline code span, whose text is not a link.
var mdCode = regexp.MustCompile("`[^`]*`")

// docProse returns the lines of a Markdown file with those of fenced
// blocks emptied and inline code spans removed, so a link's line number
// is its own and what code shows is not taken for a link.
func docProse(md string) []string { return docLines(md, true) }

// docLines is docProse, keeping code spans unless strip is set.
func docLines(md string, strip bool) []string {
	lines := strings.Split(md, "\n")
	in := false
	for i, l := range lines {
		if mdFence.MatchString(l) {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
			continue
		}
		if strip {
			lines[i] = mdCode.ReplaceAllString(l, "")
		}
	}
	return lines
}

// docAnchors lists the fragments a Markdown file answers to on GitHub:
// each heading's slug (lower case, punctuation dropped, spaces to
// hyphens, -1, -2 ... for repeats) and each <a id>.
func docAnchors(md string) []string {
	var out []string
	seen := map[string]int{}
	for _, l := range docLines(md, false) {
		for _, m := range mdAnchor.FindAllStringSubmatch(l, -1) {
			out = append(out, m[1])
		}
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		slug := githubSlug(h)
		if k := seen[slug]; k > 0 {
			out = append(out, fmt.Sprintf("%s-%d", slug, k))
		} else {
			out = append(out, slug)
		}
		seen[slug]++
	}
	return out
}

// githubSlug is the id GitHub gives a heading.
func githubSlug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// docMention is a page of docs/ named in prose or in a message.
var docMention = regexp.MustCompile(`\bdocs/([A-Za-z0-9_-]+\.md)\b`)

// TestDocMentions: every docs/PAGE.md that the code's messages, help and
// the docs name in plain text exists.
func TestDocMentions(t *testing.T) {
	root := ".."
	seen := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".cache", "testdata", "node_modules", "rendered":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, "_test.go") || !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".md") || strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range docMention.FindAllStringSubmatch(string(b), -1) {
			seen++
			if _, err := os.Stat(filepath.Join(root, "docs", m[1])); err != nil {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s names docs/%s, which does not exist", rel, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 20 {
		t.Errorf("only %d mentions of docs/ pages found", seen)
	}
}
