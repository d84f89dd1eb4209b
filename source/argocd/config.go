package argocd

import (
	"cmp"
	"fmt"
	"path"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// Config reads the argocd field of keyhole.yaml's Config document d,
// whose directory is base (absolute, OS form): its roots, each a file or
// directory of the repository, and the directories of argocd.rendered,
// which need not exist. A root that is not a file or directory of the
// repository is a ConfigInvalid error at its place; the compiler checks
// the rest of the field's shape.
func (Engine) Config(h source.Host, d *source.Document, base string) (source.ArgoConfig, diag.List) {
	var c source.ArgoConfig
	if s := source.Lookup(source.Lookup(d.Node, "argocd"), "rendered"); s != nil && s.Kind == yaml.SequenceNode {
		c.Rendered = []string{}
		for _, e := range s.Content {
			if e.Kind == yaml.ScalarNode && e.Value != "" {
				c.Rendered = append(c.Rendered, filepath.Join(base, filepath.FromSlash(path.Clean("/"+e.Value))))
			}
		}
	}
	roots := source.Lookup(source.Lookup(d.Node, "argocd"), "roots")
	if roots == nil || roots.Kind != yaml.SequenceNode {
		return c, nil
	}
	var ds diag.List
	for _, e := range roots.Content {
		rel := source.StringField(e, "path")
		if rel == "" {
			continue // the compiler says what is missing
		}
		p := filepath.Join(base, filepath.FromSlash(path.Clean("/"+rel)))
		if _, err := h.Stat(p); err != nil {
			at := cmp.Or(source.Lookup(e, "path"), e)
			ds = append(ds, diag.Diagnostic{Code: source.CodeConfigInvalid, Severity: diag.Error,
				Pos: diag.Pos{File: d.File, Line: at.Line, Column: at.Column}, Object: d.Object(),
				Message: fmt.Sprintf("argocd.roots: %q is not a file or directory of this repository", rel)})
			continue
		}
		c.Roots = append(c.Roots, source.ArgoRoot{Path: p, Shown: rel, Instance: source.StringField(e, "instance")})
	}
	return c, ds
}
