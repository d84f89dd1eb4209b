package cli

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// ciCommand reports whether a CI runner reads line as a workflow command:
// GitHub's runner takes "::" at its start once white space is trimmed, and
// "##[" anywhere, comparing under culture rules that pass over
// default-ignorable characters; Azure Pipelines takes "##vso[" anywhere.
func ciCommand(line string) bool {
	var b strings.Builder
	for _, r := range line {
		if !ignorableRune(r) {
			b.WriteRune(r)
		}
	}
	s := strings.TrimLeftFunc(b.String(), unicode.IsSpace)
	low := strings.ToLower(s)
	return strings.HasPrefix(s, "::") || strings.Contains(low, "##[") || strings.Contains(low, "##vso[")
}

// ignorableRune reports whether a runner's comparison passes over r.
func ignorableRune(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// annotationLine is a workflow command the github format writes itself.
var annotationLine = regexp.MustCompile(`^::(error|warning|notice) (file=[^:,\r\n]*,line=\d+,col=\d+,)?title=[^:,\r\n]*::[^\r\n]*$`)

// hostileFileName is a file or directory name a pull request could
// commit: workflow commands in both forms, characters a runner passes
// over, and markdown that would leave its place; with line breaks when
// breaks is set. mark is in it, for the test to find it again.
func hostileFileName(r *rand.Rand, mark string, breaks bool) string {
	pieces := []string{
		"::set-output name=diff-file::", "::notice title=x::hidden", "::stop-commands::t", "::error::",
		"##[set-output name=diff-file;]", "##vso[task.setvariable variable=a]", "\u00ad", "\u200b", "\ufeff", "\u00a0",
		" ", ":", "#", "[", "`", "<img src=x>", "</details>", "@octocat", "![x](https:", "|", "%0A", "\u202e", "é",
	}
	if breaks {
		pieces = append(pieces, "\n", "\r", "\n  ", "\n::error::", "\r::notice::")
	}
	var b strings.Builder
	for range 1 + r.IntN(6) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String() + mark
}

// TestHostileNamesEveryCommand runs check in every format, render
// --stdout, diff in every format and explain on repositories whose file
// and directory names are hostile: no line any of them prints, on stdout
// or stderr, is a workflow command but the github format's annotations,
// and the names are still there to read (escaped, not dropped).
func TestHostileNamesEveryCommand(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	files := example(t, "github-acme")
	kust := "resources: [agentruntime.yaml, connection.yaml, sandboxclass.yaml, secret.yaml]\n"
	for i := range 4 {
		unit := hostileFileName(r, fmt.Sprintf("u%dmark", i), false)
		broken := hostileFileName(r, fmt.Sprintf("b%dmark", i), true) + ".yaml"
		if i%2 == 0 {
			// Names that start the line a text format begins with them.
			unit, broken = "::notice title=x::"+unit, "::set-output name=diff-file::"+broken
		}
		tree := map[string]string{}
		for name, body := range files {
			if !strings.HasSuffix(name, ".yaml") {
				continue
			}
			tree[unit+"/"+name] = body
			tree["team/"+name] = strings.ReplaceAll(body, "namespace: agents", "namespace: team")
		}
		tree[unit+"/kustomization.yaml"] = kust
		tree["team/kustomization.yaml"] = kust
		g := newGitFixture(t, tree)
		// The head widens a rule of the hostile unit.
		g.write(map[string]string{unit + "/connection.yaml": replaced(t, files["connection.yaml"], "pathPrefixes: [/repos/acme/widgets]", "pathPrefixes: [/repos/acme/widgets, /orgs/acme]")})
		// A loose file whose Connection names a Secret no unit has, in a
		// directory of its own that check names.
		loose := filepath.Join(t.TempDir(), "loose")
		if err := os.MkdirAll(loose, 0o755); err != nil {
			t.Fatal(err)
		}
		conn := strings.ReplaceAll(files["connection.yaml"], "name: acme-github-token", "name: missing-token")
		if err := os.WriteFile(filepath.Join(loose, broken), []byte(conn), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			// dir is where the command runs.
			dir  string
			args []string
			// mark is what must be in the output.
			mark string
		}{
			{loose, []string{"check", "-v", "."}, "b"},
			{loose, []string{"check", "--format", "json", "."}, "b"},
			{loose, []string{"check", "--format", "github", "."}, "b"},
			{loose, []string{"check", "--format", "sarif", "."}, "b"},
			{loose, []string{"render", "--stdout", "."}, "b"},
			{loose, []string{"render", "--stdout", "--format", "github", "."}, "b"},
			{g.dir, []string{"check", "-v", "."}, "u"},
			{g.dir, []string{"diff", "--base", "main", "."}, "u"},
			{g.dir, []string{"diff", "--base", "main", "--format", "markdown", "."}, "u"},
			{g.dir, []string{"diff", "--base", "main", "--format", "json", "."}, "u"},
			{g.dir, []string{"explain", "."}, "u"},
			{g.dir, []string{"explain", "--base", "main", "--sandbox", "agents/support-workspace", "."}, ""},
		} {
			t.Chdir(tc.dir)
			var stdout, stderr bytes.Buffer
			run(&env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}, tc.args)
			name := strings.Join(tc.args, " ")
			for stream, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
				for _, l := range strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
					if ciCommand(l) && !(strings.Contains(name, "--format github") && annotationLine.MatchString(l)) {
						t.Errorf("%s (%q, %q): %s has a workflow command: %q", name, unit, broken, stream, l)
					}
				}
			}
			if tc.mark != "" && !strings.Contains(stdout.String()+stderr.String(), fmt.Sprintf("%s%dmark", tc.mark, i)) {
				t.Errorf("%s (%q, %q): the name is not in the output:\n%s%s", name, unit, broken, stdout.String(), stderr.String())
			}
		}
	}
}
