// Package kustomize is the kustomize engine's reading of a build: it
// turns the objects kustomize built of a kustomization root into
// documents whose nodes keep the file, line and column that wrote them,
// through bases, patches and generators, and a build that failed into
// its error, placed on the kustomization entry, field or file that
// caused it. It reads the repository through the loader's source.Host.
// Running the build is internal/kustbuild's, through the loader's Memo;
// which kustomizations are built, for which unit, and what their
// documents mean for it are the loader's (package source).
package kustomize

import (
	"bytes"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/kustbuild"
	"keyhole.dev/keyhole/source"
)

// Engine reads kustomize's builds for source.Load
// (source.Engines.Kustomize).
type Engine struct{}

var _ source.Kustomize = Engine{}

// Read reads the build in: its objects as documents, or its failure.
func (Engine) Read(h source.Host, in *source.KustomizeBuild) source.KustomizeRead {
	b := &build{h: h, u: in.Unit, named: in.Named, root: in.Dir, kfile: in.KFile, kname: in.KName,
		files: map[string]*parsedFile{}, kusts: map[string]*kustPatches{}, where: map[*yaml.Node]source.Placed{}}
	if in.Err != nil {
		return source.KustomizeRead{Diags: diag.List{b.failed(in.Err, in.Read)}}
	}
	out := source.KustomizeRead{Where: b.where, Copies: copiesValues(in.Read)}
	out.Docs = make([]source.Document, 0, in.Built.Size())
	for _, r := range in.Built.Resources() {
		doc, err := b.document(r)
		if err != nil {
			b.diags = append(b.diags, diag.Diagnostic{
				Code:     source.CodeKustomizeBuildFailed,
				Severity: diag.Error,
				Pos:      diag.Pos{File: b.kname, Line: 1, Column: 1},
				Message:  "kustomize built an object keyhole cannot read: " + b.scrub(kustbuild.Redact(err.Error(), in.Read)),
			})
			continue
		}
		out.Docs = append(out.Docs, doc)
	}
	out.Diags = b.diags
	out.Sources = make(map[string]string, len(b.files))
	for abs, f := range b.files {
		out.Sources[abs] = f.name
	}
	if slices.ContainsFunc(b.diags, func(d diag.Diagnostic) bool { return d.Code == source.CodeYAMLInvalid }) {
		out.Unwritable = unwritable(in)
	}
	return out
}

// failed is the diagnostic of a build that failed with err, having read
// read.
func (b *build) failed(err error, read map[string][]byte) diag.Diagnostic {
	switch e := err.(type) {
	case *kustbuild.FileRefused:
		return b.refused(e)
	case *kustbuild.Outside:
		return b.outside(e)
	case *kustbuild.RemoteRefused:
		return b.remote(e)
	}
	if d, ok := b.helmNotRun(b.u, err, b.scrub(kustbuild.Redact(err.Error(), read)), read); ok {
		return d
	}
	return b.buildFailed(err, read)
}

// unwritable is, of a build whose sources the loader found invalid YAML
// in (such as a duplicate mapping key, which kustomize reads),
// kustomize's own error writing out what it built (Resource.AsYAML,
// which kustomize build and kustomize-controller call), quoting no key
// or value; "" when it writes it out.
func unwritable(in *source.KustomizeBuild) string {
	for _, r := range in.Built.Resources() {
		if _, err := r.AsYAML(); err != nil {
			msg := quotedKey.ReplaceAllString(kustbuild.Redact(err.Error(), in.Read), "a mapping key ")
			return strings.Join(strings.Fields(msg), " ")
		}
	}
	return ""
}

// quotedKey is a mapping key yaml's errors quote, which may be anything.
var quotedKey = regexp.MustCompile(`mapping key ".*?" `)

// copiesValues reports whether a kustomization among the files a build
// read copies values from one object into another: replacements, or
// vars, which can carry what a generator read from a file into any
// field.
func copiesValues(read map[string][]byte) bool {
	for p, data := range read {
		if !kustbuild.IsKustomizationName(filepath.Base(p)) {
			continue
		}
		var doc yaml.Node
		if err := kustbuild.DecodeYAML(yaml.NewDecoder(bytes.NewReader(source.Text(data))), &doc); err != nil || len(doc.Content) == 0 {
			return true // kustomize read it; keyhole cannot say what it does
		}
		if source.Lookup(doc.Content[0], "replacements") != nil || source.Lookup(doc.Content[0], "vars") != nil {
			return true
		}
	}
	return false
}
