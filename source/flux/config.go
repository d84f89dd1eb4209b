package flux

import (
	"cmp"
	"fmt"
	"path"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/source"
)

// fluxSystem is the namespace Flux's bootstrap installs Flux and its
// sources into: a flux.sources entry's namespace when it names none.
const fluxSystem = "flux-system"

// Config reads the flux field of the Config document d, whose directory
// is base. A path that is not a directory of the repository (or, for
// entries, not a file or directory of it) is a ConfigInvalid error at
// its place; the compiler checks the rest of the field's shape.
func (Engine) Config(h source.Host, d *source.Document, base string) (source.FluxConfig, diag.List) {
	var c source.FluxConfig
	var ds diag.List
	flux := source.Lookup(d.Node, "flux")
	if flux == nil {
		return c, nil
	}
	bad := func(n *yaml.Node, msg string) {
		ds = append(ds, diag.Diagnostic{Code: source.CodeConfigInvalid, Severity: diag.Error,
			Pos: diag.Pos{File: d.File, Line: n.Line, Column: n.Column}, Object: d.Object(), Message: msg})
	}
	// resolve is rel under base: a path cannot leave the repository.
	resolve := func(rel string) string {
		return filepath.Join(base, filepath.FromSlash(path.Clean("/"+rel)))
	}
	if s := source.Lookup(flux, "sources"); s != nil && s.Kind == yaml.SequenceNode {
		for _, e := range s.Content {
			kind, name, rel := source.StringField(e, "kind"), source.StringField(e, "name"), source.StringField(e, "path")
			if kind == "" || name == "" || rel == "" {
				continue // the compiler says what is missing
			}
			dir := resolve(rel)
			if fi, err := h.Stat(dir); err != nil || !fi.IsDir() {
				bad(cmp.Or(source.Lookup(e, "path"), e), fmt.Sprintf("flux.sources: path %q is not a directory of this repository; name the directory that is the root of %s %s/%s's artifact", rel, kind, cmp.Or(source.StringField(e, "namespace"), fluxSystem), name))
				continue
			}
			if c.Sources == nil {
				c.Sources = map[source.FluxSource]string{}
			}
			c.Sources[source.FluxSource{Kind: kind, Namespace: cmp.Or(source.StringField(e, "namespace"), fluxSystem), Name: name}] = dir
		}
	}
	if s := source.Lookup(flux, "rendered"); s != nil && s.Kind == yaml.SequenceNode {
		for _, e := range s.Content {
			if e.Kind == yaml.ScalarNode && e.Value != "" {
				c.Rendered = append(c.Rendered, resolve(e.Value))
			}
		}
	}
	if s := source.Lookup(flux, "entries"); s != nil && s.Kind == yaml.SequenceNode {
		for _, e := range s.Content {
			if e.Kind != yaml.ScalarNode || e.Value == "" {
				continue
			}
			p := resolve(e.Value)
			if _, err := h.Stat(p); err != nil {
				bad(e, fmt.Sprintf("flux.entries: %q is not a file or directory of this repository", e.Value))
				continue
			}
			c.Entries = append(c.Entries, p)
		}
	}
	return c, ds
}
