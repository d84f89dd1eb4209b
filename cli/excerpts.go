package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// excerpts gives the grouped text layout the source line a diagnostic is
// positioned on, and never a line that may hold a secret value. The rule,
// from the file to the line, is (docs/checks.md, "Source lines"):
//
//  1. The file is one keyhole read from the repository: not standard
//     input, read through a root at the repository that encloses it (its
//     directory, outside any repository) with os.Root, so that a link out
//     of it is not followed; no larger than the loader reads, and valid
//     YAML throughout.
//  2. No document of the file may hold a secret value: each is a mapping
//     with a kind (an agent.yaml excepted); none holds, at any depth (the
//     items of a List too), a kind that names a Secret (Secret,
//     SealedSecret, ExternalSecret, a secretRef's kind: Secret, ...) or a
//     data, stringData, encryptedData, sops or secretGenerator field (the
//     fields whose values kustomize's messages are scrubbed of); and none
//     is a HelmRelease, Application or ApplicationSet, whose values may be
//     a chart's secrets. Values files and env files have no kind, so no
//     line of theirs is shown.
//  3. The line is not a value written under a key named value outside a
//     Connection (a pod's env var, say), holds no string of a known
//     token's shape (compiler.MatchCredential, the CredentialLiteral
//     table), and the diagnostic is not a finding about a literal value
//     (CredentialLiteral, ConnectionValueLiteral), whose line is that
//     value.
//
// A line passes all three or is not shown; the diagnostic is printed all
// the same. Files are read once each.
type excerpts struct {
	wd    string
	files map[string]*excerptFile
}

// excerptFile is a file's lines, and the lines that may not be shown
// (nil lines: none of the file is shown).
type excerptFile struct {
	lines  []string
	hidden map[int]bool
}

// literalCodes are the findings about a literal value written in a field,
// whose line is that value.
var literalCodes = map[string]bool{"CredentialLiteral": true, "ConnectionValueLiteral": true}

func newExcerpts() *excerpts {
	wd, _ := os.Getwd()
	return &excerpts{wd: wd, files: map[string]*excerptFile{}}
}

// line is diag.Options.Excerpt.
func (x *excerpts) line(d diag.Diagnostic) (string, bool) {
	if d.Pos.File == "" || d.Pos.File == "-" || d.Pos.Line < 1 || literalCodes[d.Code] || x.wd == "" {
		return "", false
	}
	f, ok := x.files[d.Pos.File]
	if !ok {
		f = x.read(d.Pos.File)
		x.files[d.Pos.File] = f
	}
	if f.lines == nil || d.Pos.Line > len(f.lines) || f.hidden[d.Pos.Line] {
		return "", false
	}
	line := f.lines[d.Pos.Line-1]
	if _, token := compiler.MatchCredential(line); token {
		return "", false
	}
	return line, true
}

// read reads and judges one file (rules 1 and 2, and the lines rule 3
// hides); a file that fails them has no lines.
func (x *excerpts) read(file string) *excerptFile {
	abs := filepath.FromSlash(file)
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(x.wd, abs)
	}
	root := repoRoot(filepath.Dir(abs))
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return &excerptFile{}
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return &excerptFile{}
	}
	defer r.Close()
	fh, err := r.Open(rel)
	if err != nil {
		return &excerptFile{}
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, source.DefaultMaxFileSize+1))
	if err != nil || len(b) > source.DefaultMaxFileSize {
		return &excerptFile{}
	}
	hidden, ok := hiddenLines(b, filepath.Base(abs))
	if !ok {
		return &excerptFile{}
	}
	lines := strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
	return &excerptFile{lines: lines, hidden: hidden}
}

// secretKind matches a kind that names a Secret: Secret, SealedSecret,
// ExternalSecret, ClusterExternalSecret, SecretStore (a Connection's
// credential kind, "secret", is no object's kind).
var secretKind = regexp.MustCompile(`Secret`)

// hiddenLines judges a file's documents by rule 2, and returns the lines
// rule 3 hides for their keys; false when no line of the file may be
// shown.
func hiddenLines(b []byte, base string) (map[int]bool, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	hidden := map[int]bool{}
	agentFile := base == "agent.yaml" || base == "agent.yml"
	docs := 0
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
			return nil, false
		}
		docs++
		top := doc.Content[0]
		kind := ""
		for i := 0; i+1 < len(top.Content); i += 2 {
			if top.Content[i].Value == "kind" {
				kind = top.Content[i+1].Value
			}
		}
		switch {
		case kind == "" && !agentFile,
			kind == "HelmRelease", kind == "Application", kind == "ApplicationSet",
			mayHoldSecret(top):
			return nil, false
		}
		if kind != "Connection" {
			hideValues(top, hidden)
		}
	}
	return hidden, docs > 0
}

// mayHoldSecret reports whether a mapping, or any mapping in it (the
// items of a List), is of a kind that names a Secret or has a field whose
// values are a Secret's.
func mayHoldSecret(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k, v := n.Content[i].Value, n.Content[i+1]; {
			case k == "data", k == "stringData", k == "encryptedData", k == "sops", k == "secretGenerator":
				return true
			case k == "kind" && secretKind.MatchString(v.Value):
				return true
			case mayHoldSecret(v):
				return true
			}
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if mayHoldSecret(c) {
				return true
			}
		}
	}
	return false
}

// hideValues marks the lines of every scalar under a key named value
// (all of a block scalar's lines).
func hideValues(n *yaml.Node, hidden map[int]bool) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "value" && (v.Kind == yaml.ScalarNode || v.Kind == yaml.AliasNode) {
				for l := v.Line; l <= v.Line+strings.Count(v.Value, "\n")+1; l++ {
					hidden[l] = true
				}
				hidden[k.Line] = true
				continue
			}
			hideValues(v, hidden)
		}
	case yaml.SequenceNode, yaml.DocumentNode:
		for _, c := range n.Content {
			hideValues(c, hidden)
		}
	}
}
