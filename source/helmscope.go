package source

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// A chart a walk found, or an Argo CD Application renders, that names
// none of keyhole's kinds but declares Secrets is rendered only when a Connection may read one of them, as a
// kustomization is built (walkedKustomizationMatters). A chart's Secret
// names are often templates, so the rule reads its templates' text, not
// what they render: every line of a file declaring a Secret that gives a
// name (`name:` or `generateName:`, in block or flow style, wherever it
// stands) is a name; text outside the template's actions is output as
// written, so each of a name's literal pieces is part of the Secret's
// name, and a Connection reading that Secret names it in its own text.
// The chart is not rendered when, for every name, some literal piece is
// in no file that names keyhole's kinds. It is rendered whenever that
// cannot be told from the text: a name with no literal piece or one
// chosen by a condition within the line (`{{ if }}` inside it), a line
// whose action can write several lines (`include`, `template`, `tpl`,
// `toYaml`, `toJson`, `indent`, `nindent`: the metadata itself may come
// from it), an action standing alone on a line that is not a control
// (`if`, `else`, `end`, `with`, `range`, a comment), a
// ClusterExternalSecret (its Secrets' names are given otherwise), more
// files than a scope question reads, and whenever refText says every
// name is read (standard input, `${` in a file naming keyhole's kinds).

// chartNameLine matches a name a template gives, the name in group 1.
var chartNameLine = regexp.MustCompile(`(?:^|[\s{,"'])(?:generateName|name)["']?\s*:\s*((?:\{\{.*?\}\}|[^\n,}])*)`)

// chartAction matches one template action.
var chartAction = regexp.MustCompile(`\{\{.*?\}\}`)

// multiLine matches what an action may call to write several lines.
var multiLine = regexp.MustCompile(`\b(include|template|tpl|toYaml|toJson|toPrettyJson|indent|nindent)\b`)

// controlAction matches an action that writes nothing of its own.
var controlAction = regexp.MustCompile(`^\{\{-?\s*(/\*.*\*/|if\b.*|else\b.*|end|with\b.*|range\b.*)\s*-?\}\}$`)

// inLineControl matches a control within a name.
var inLineControl = regexp.MustCompile(`\{\{-?\s*(if|else|range|with)\b`)

// chartSecretNames returns the literal pieces of each name the files of
// the chart in dir that declare a Secret give; sure is false when what
// names its Secrets cannot be told from their text (see above).
func (l *loader) chartSecretNames(dir string) (names [][]string, sure bool) {
	sure = true
	n := 0
	l.visitTree(dir, func(rel string, fi fs.FileInfo) bool {
		if !sure {
			return false
		}
		if n++; n > maxScopeFiles {
			sure = false
			return false
		}
		if fi.IsDir() {
			return true
		}
		data := l.sniff(filepath.Join(dir, filepath.FromSlash(rel)), nil)
		if data == nil || !declaresSecret(data) {
			return false
		}
		ns, ok := templateSecretNames(sniffText(data))
		sure = sure && ok
		names = append(names, ns...)
		return false
	})
	return names, sure
}

// chartNamesPlain reports whether every file of the chart in dir that
// names keyhole's kinds gives only plain names: no name holds a template
// action and no line is one an action may fill with names (see above).
// Then the names its Connections read are in its files' text, less
// what its values write, which are in the chart's values.yaml.
func (l *loader) chartNamesPlain(dir string) bool {
	return !l.chartHolds(dir, func(name string, data []byte) bool {
		if !namesKeyhole(name, data) {
			return false
		}
		_, templated, ok := templateNames(sniffText(data))
		return templated || !ok
	})
}

// templateSecretNames returns the literal pieces of each name data, a
// template declaring a Secret, gives, or ok false (see above).
func templateSecretNames(data []byte) (names [][]string, ok bool) {
	names, _, ok = templateNames(data)
	return names, ok
}

// templateNames is templateSecretNames, and whether a name holds a
// template action.
func templateNames(data []byte) (names [][]string, templated, ok bool) {
	if bytes.Contains(data, []byte("ClusterExternalSecret")) {
		return nil, false, false
	}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		ms := chartNameLine.FindAllStringSubmatchIndex(line, -1)
		// Actions outside the names must write no lines of their own.
		rest := line
		for i := len(ms) - 1; i >= 0; i-- {
			rest = rest[:ms[i][2]] + rest[ms[i][3]:]
		}
		alone := strings.HasPrefix(rest, "{{") // a line a template may fill whole
		for _, a := range chartAction.FindAllString(rest, -1) {
			if multiLine.MatchString(a) || (alone && !controlAction.MatchString(a)) {
				return nil, false, false
			}
		}
		for _, m := range ms {
			v := line[m[2]:m[3]]
			if multiLine.MatchString(v) || inLineControl.MatchString(v) {
				return nil, true, false
			}
			templated = templated || strings.Contains(v, "{{")
			var pieces []string
			for _, p := range chartAction.Split(v, -1) {
				p, _, _ = strings.Cut(p, " #") // a comment
				if p = strings.Trim(strings.TrimSpace(p), `"'`); p != "" && !strings.HasPrefix(p, "#") {
					pieces = append(pieces, p)
				}
			}
			if len(pieces) == 0 {
				return nil, templated, false
			}
			names = append(names, pieces)
		}
	}
	return names, templated, true
}

// chartUnread says why the chart in dir, which names none of keyhole's
// kinds, is not rendered, when none of the Secrets it declares can be one
// a Connection reads; "" when it is to be rendered.
func (l *loader) chartUnread(dir string) string {
	if !l.connections || l.refs.all {
		return ""
	}
	names, sure := l.chartSecretNames(dir)
	if !sure || len(names) == 0 {
		return ""
	}
	l.refs.read(l.fsys)
	var shown []string
	for _, pieces := range names {
		if !slices.ContainsFunc(pieces, func(p string) bool { return !bytes.Contains(l.refs.text, []byte(p)) }) {
			return "" // every piece is in a file that names keyhole's kinds
		}
		shown = append(shown, strings.Join(pieces, "…"))
	}
	slices.Sort(shown)
	shown = slices.Compact(shown)
	more := ""
	if len(shown) > 5 {
		shown, more = shown[:5], fmt.Sprintf(" and %d more", len(shown)-5)
	}
	return "none of its files names keyhole's kinds, and the names its templates give Secrets (" + strings.Join(shown, ", ") + more +
		") are in no file that names keyhole's kinds, so no Connection reads them"
}
