package kustomize

import (
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/kustbuild"
	"keyhole.dev/keyhole/source"
)

// How a kustomization that does not build is reported: at the position in
// the input that caused the failure, with the kustomization's own message.

// buildFailed turns a kustomize error into a diagnostic. When kustomize
// failed on a YAML syntax error in a file it read, the loader's own
// diagnostic for that file says where, exactly (see yamlFailure);
// otherwise it is a KustomizeBuildFailed at the kustomization entry the
// error is about (see failurePos).
func (b *build) buildFailed(err error, read map[string][]byte) diag.Diagnostic {
	msg := b.scrub(kustbuild.Redact(err.Error(), read))
	if d, ok := b.yamlFailure(msg, read); ok {
		return d
	}
	return diag.Diagnostic{
		Code:     source.CodeKustomizeBuildFailed,
		Severity: diag.Error,
		Pos:      b.failurePos(err, msg, read),
		Message:  fmt.Sprintf("kustomize cannot build %s: %s%s", b.display(b.root), msg, b.pluginHint(msg)),
	}
}

// pluginHint says what to do about a build that needs what keyhole, like
// kubectl kustomize by default, does not run: helm for helmCharts, or a
// plugin or KRM function. kustomize's own advice names a flag of the
// kustomize command, which keyhole does not have.
func (b *build) pluginHint(msg string) string {
	dir := b.display(b.root)
	if strings.ContainsAny(dir, " \t'\"$`\\;&|<>()*?[]{}~#!") {
		dir = "'" + strings.ReplaceAll(dir, "'", `'\''`) + "'"
	}
	switch {
	case strings.Contains(msg, "--enable-helm"):
		return "; keyhole runs no helm, as kubectl kustomize by default: check what the chart deploys with kustomize build --enable-helm " + dir + " | keyhole check -"
	case strings.Contains(msg, "external plugins disabled"):
		return "; keyhole runs no plugins or KRM functions, as kubectl kustomize by default: check what the build makes with kustomize build --enable-alpha-plugins --enable-exec " + dir + " | keyhole check -"
	}
	return ""
}

// pluginField returns the key of the kustomization's field that needs
// what keyhole does not run (see pluginHint), or nil.
func pluginField(root *yaml.Node, msg string) *yaml.Node {
	var keys []string
	switch {
	case strings.Contains(msg, "--enable-helm"):
		keys = []string{"helmCharts", "helmChartInflationGenerator"}
	case strings.Contains(msg, "external plugins disabled"):
		keys = []string{"generators", "transformers", "validators"}
		for i, k := range keys {
			if strings.Contains(msg, "failed to load "+strings.TrimSuffix(k, "s")) {
				keys[0], keys[i] = keys[i], keys[0] // the kind of plugin kustomize names first
			}
		}
	}
	for _, k := range keys {
		if _, key := lookupKey(root, k); key != nil {
			return key
		}
	}
	return nil
}

// yamlFailure finds the file a MalformedYAMLError is about among the files
// kustomize read, and returns the loader's YAMLInvalid for it, which has
// its exact line.
func (b *build) yamlFailure(msg string, read map[string][]byte) (diag.Diagnostic, bool) {
	n, problem, file, ok := kustbuild.MalformedYAML(msg)
	if !ok {
		return diag.Diagnostic{}, false
	}
	for _, abs := range slices.Sorted(maps.Keys(read)) {
		if filepath.Base(abs) != filepath.Base(filepath.FromSlash(strings.TrimRight(file, `'":;,)`))) || kustbuild.IsKustomizationName(filepath.Base(abs)) {
			continue
		}
		name := b.display(abs)
		line := source.YAMLErrorLine(read[abs], n, problem) // kustomize's YAML library counts as keyhole's does
		_, ds := source.Parse(name, read[abs])
		for _, d := range ds {
			if d.Severity == diag.Error && d.Code == source.CodeYAMLInvalid && d.Pos.Line == line {
				return d, true
			}
		}
	}
	return diag.Diagnostic{}, false
}

// failurePos finds where a kustomize error (err, read as msg) points: in the kustomization
// the error is about (the innermost base it names, else the root), the
// entry it quotes (a missing resource, patch, component or generator
// file), the field it could not decode, or the patch that matched
// nothing; else the kustomization's first line.
func (b *build) failurePos(err error, msg string, read map[string][]byte) diag.Pos {
	// scrub writes a directory above the one built as ./dir; entries are
	// matched as the user would type them.
	msg = strings.NewReplacer("'./", "'", `"./`, `"`, " ./", " ", "(./", "(", "[./", "[").Replace(msg)
	kfiles := []string{b.kfile}
	for _, abs := range slices.Sorted(maps.Keys(read)) {
		if kustbuild.IsKustomizationName(filepath.Base(abs)) && abs != b.kfile {
			kfiles = append(kfiles, abs)
		}
	}
	// The base a nested failure is in is named last.
	at := func(kfile string) int { return strings.LastIndex(msg, "'"+b.display(filepath.Dir(kfile))+"'") }
	slices.SortStableFunc(kfiles, func(x, y string) int { return at(y) - at(x) })
	for _, kf := range kfiles {
		name := b.display(kf)
		if n, problem, ok := kustbuild.KustomizationYAML(msg); ok && kf == b.kfile {
			data, _ := b.h.ReadFile(kf)
			return diag.Pos{File: name, Line: max(source.YAMLErrorLine(data, n, problem), 1), Column: 1}
		}
		root := b.h.Kustomization(kf)
		if root == nil {
			continue
		}
		if n := b.quotedEntry(root, filepath.Dir(kf), msg); n != nil {
			return diag.Pos{File: name, Line: n.Line, Column: n.Column}
		}
		if n := badField(root, err); n != nil {
			return diag.Pos{File: name, Line: n.Line, Column: n.Column}
		}
		if n := pluginField(root, msg); n != nil {
			return diag.Pos{File: name, Line: n.Line, Column: n.Column}
		}
		if p, ok := b.unmatchedPatch(root, kf, msg); ok {
			return p
		}
	}
	return diag.Pos{File: b.kname, Line: 1, Column: 1}
}

// quotedEntry returns the first scalar of the kustomization root (in dir)
// whose value, or the path it names as the user would type it, the
// message quotes; failing that, one whose last path element ends a
// quoted path in the message.
func (b *build) quotedEntry(root *yaml.Node, dir, msg string) *yaml.Node {
	quotes := func(c string) bool {
		return strings.Contains(msg, "'"+c+"'") || strings.Contains(msg, `"`+c+`"`) ||
			strings.Contains(msg, "("+c+")") || strings.Contains(msg, "["+c+"]")
	}
	var exact, byBase *yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if exact != nil {
			return
		}
		if n.Kind == yaml.ScalarNode && len(n.Value) > 1 && !strings.Contains(n.Value, "\n") {
			shown := b.display(filepath.Join(dir, filepath.FromSlash(n.Value)))
			if quotes(n.Value) || quotes(shown) {
				exact = n
				return
			}
			base := path.Base(n.Value)
			if byBase == nil && base != "." && base != ".." && base != "/" &&
				(strings.Contains(msg, "/"+base+"'") || strings.Contains(msg, "/"+base+`"`)) {
				byBase = n
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(root)
	if exact != nil {
		return exact
	}
	return byBase
}

// badField returns the field of the kustomization that kustomize could not
// decode (err): its first entry when it is a list, else its value.
func badField(root *yaml.Node, err error) *yaml.Node {
	field, list, ok := kustbuild.BadField(err)
	if !ok {
		return nil
	}
	v, k := lookupKey(root, field)
	if v == nil {
		return nil
	}
	// A list where a string belongs is wrong as a whole; a string where
	// an object belongs is wrong in the entry that holds it.
	if v.Kind == yaml.SequenceNode && len(v.Content) > 0 && !list {
		for _, e := range v.Content {
			if e.Kind == yaml.ScalarNode {
				return e // the string where an object belongs, as in a legacy patches entry
			}
		}
		return v.Content[0]
	}
	return k
}

// unmatchedPatch finds, among the patches the kustomization file kf
// (parsed as root) holds inline or names as files, the document a "no
// matches for Id" error is about, and returns the position of its name.
func (b *build) unmatchedPatch(root *yaml.Node, kf, msg string) (diag.Pos, bool) {
	kind, name, ok := kustbuild.UnmatchedPatch(msg)
	if !ok {
		return diag.Pos{}, false
	}
	named := func(d *source.Document) *yaml.Node {
		if n := source.Lookup(source.Lookup(d.Node, "metadata"), "name"); n != nil && source.StringField(d.Node, "kind") == kind && n.Value == name {
			return n
		}
		return nil
	}
	var files []string
	var inline []*yaml.Node
	if seq := source.Lookup(root, "patchesStrategicMerge"); seq != nil && seq.Kind == yaml.SequenceNode {
		for _, e := range seq.Content {
			switch {
			case e.Kind != yaml.ScalarNode:
			case strings.Contains(e.Value, "\n") || strings.HasPrefix(strings.TrimSpace(e.Value), "{"):
				inline = append(inline, e)
			default:
				files = append(files, e.Value)
			}
		}
	}
	if seq := source.Lookup(root, "patches"); seq != nil && seq.Kind == yaml.SequenceNode {
		for _, e := range seq.Content {
			if p := source.StringField(e, "path"); p != "" {
				files = append(files, p)
			}
			if v := source.Lookup(e, "patch"); v != nil && v.Kind == yaml.ScalarNode {
				inline = append(inline, v)
			}
		}
	}
	for _, v := range inline {
		docs, _ := source.Parse(b.display(kf), []byte(v.Value))
		for _, d := range docs {
			if n := named(d); n != nil {
				data, _ := b.h.ReadFile(kf)
				line, col := inlinePos(data, v, n)
				return diag.Pos{File: b.display(kf), Line: line, Column: col}, true
			}
		}
	}
	dir := filepath.Dir(kf)
	for _, f := range files {
		abs := filepath.Join(dir, filepath.FromSlash(f))
		data, err := b.h.ReadFile(abs)
		if err != nil || int64(len(data)) > b.h.MaxFileSize() {
			continue
		}
		docs, _ := source.Parse(b.display(abs), data)
		for _, d := range docs {
			if n := named(d); n != nil {
				return diag.Pos{File: d.File, Line: n.Line, Column: n.Column}, true
			}
		}
	}
	return diag.Pos{}, false
}

// inlinePos returns where the node n, found by parsing the text of the
// scalar v, is in the file (data) that holds v. A literal block (|) keeps
// its text's lines as they are, indented: n is on the file's line
// v.Line+n.Line, shifted right by the block's indentation (that of its
// first line that is not blank). Any other style (folded, quoted, flow)
// reflows the text, and an unexpected file gives no certain answer: then
// the position is v's own.
func inlinePos(data []byte, v, n *yaml.Node) (line, col int) {
	if v.Style&yaml.LiteralStyle == 0 {
		return v.Line, v.Column
	}
	lines := strings.Split(string(data), "\n")
	indent := -1
	for i := v.Line; i < len(lines); i++ { // lines[v.Line] is the line after the block's header
		l := strings.TrimRight(lines[i], "\r")
		if strings.TrimSpace(l) != "" {
			indent = len(l) - len(strings.TrimLeft(l, " "))
			break
		}
	}
	line, col = v.Line+n.Line, indent+n.Column
	if indent < 0 || line > len(lines) {
		return v.Line, v.Column
	}
	// The node's text must start there (or its opening quote).
	l := strings.TrimRight(lines[line-1], "\r")
	if col > len(l) || !(strings.HasPrefix(l[col-1:], n.Value) || l[col-1] == '"' || l[col-1] == '\'') {
		return v.Line, v.Column
	}
	return line, col
}

// scrub makes a kustomize error readable and the same on every machine
// (Host.Scrub).
func (b *build) scrub(msg string) string { return b.h.Scrub(b.named, b.root, msg) }

// display is the path reported for abs, a file of this build.
func (b *build) display(abs string) string { return b.h.Display(b.named, b.root, abs) }
