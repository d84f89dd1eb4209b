package flux

import (
	"cmp"
	"fmt"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// An ArtifactGenerator (source.extensions.fluxcd.io) cuts ExternalArtifacts
// out of other Flux sources: each artifact is the files its copy
// operations take from a source ("@repo/apps/x/**") and place in the
// artifact ("@artifact/apps/x/"). Where every copy of an artifact takes a
// directory of one source and places it at the same path, the artifact
// is that source's tree, cut down; where every copy takes the contents of
// a directory below one directory P of the source and places them at the
// same path below the artifact's root ("@repo/apps/base/**" to
// "@artifact/base/", "@repo/infra/**" to "@artifact/"), it is P's tree,
// cut down. Any other copy (a glob of files, a directory placed
// elsewhere, copies from two such directories, an exclude) is the cut's
// Odd. What a Kustomization building from the artifact then reads is the
// loader's.

// artifactGenerator is what the ArtifactGenerator d, in namespace ns,
// says of each ExternalArtifact it makes, in its order.
func artifactGenerator(d *source.Document, ns string) []source.ArtifactCut {
	spec := source.Lookup(d.Node, "spec")
	type src struct{ kind, ns, name string }
	sources := map[string]src{}
	if s := source.Lookup(spec, "sources"); s != nil && s.Kind == yaml.SequenceNode {
		for _, e := range s.Content {
			sources[source.StringField(e, "alias")] = src{source.StringField(e, "kind"), cmp.Or(source.StringField(e, "namespace"), ns), source.StringField(e, "name")}
		}
	}
	arts := source.Lookup(spec, "artifacts")
	if arts == nil || arts.Kind != yaml.SequenceNode {
		return nil
	}
	var cuts []source.ArtifactCut
	for _, a := range arts.Content {
		name := source.StringField(a, "name")
		if name == "" {
			continue
		}
		cut := source.ArtifactCut{Artifact: name, Generator: ns + "/" + d.Object().Name}
		alias := ""
		copies := source.Lookup(a, "copy")
		if copies == nil || copies.Kind != yaml.SequenceNode || len(copies.Content) == 0 {
			cut.Odd = "no copy"
		} else {
			for i, c := range copies.Content {
				from, to := source.StringField(c, "from"), source.StringField(c, "to")
				al, dir, prefix, ok := dirCopy(from, to)
				if ok && source.Lookup(c, "exclude") == nil && (alias == "" || al == alias) && (i == 0 || prefix == cut.Prefix) {
					if _, known := sources[al]; known {
						alias = al
						cut.Prefix = prefix
						cut.Dirs = append(cut.Dirs, dir)
						continue
					}
				}
				cut.Odd = fmt.Sprintf("copy from %q to %q", from, to)
				break
			}
		}
		if s, ok := sources[alias]; ok && cut.Odd == "" {
			cut.Kind, cut.Namespace, cut.Name = s.kind, s.ns, s.name
		}
		cuts = append(cuts, cut)
	}
	return cuts
}

// dirCopy reports whether a copy operation takes a directory of the
// source aliased al and places it at the same path of the artifact, from
// "@al/DIR/" or "@al/DIR/**" to "@artifact/DIR/" (prefix ""), or takes
// the contents of the directory PREFIX/DIR and places them at DIR, from
// "@al/PREFIX/DIR/**" to "@artifact/DIR/"; dir is DIR, "" for the root.
func dirCopy(from, to string) (al, dir, prefix string, ok bool) {
	if !strings.HasPrefix(from, "@") {
		return "", "", "", false
	}
	al, rest, found := strings.Cut(from[1:], "/")
	if !found || al == "" {
		return "", "", "", false
	}
	rest, contents := strings.CutSuffix(rest, "**")
	if rest != "" && !strings.HasSuffix(rest, "/") || strings.ContainsAny(rest, "*?[{\\") {
		return "", "", "", false
	}
	src := strings.Trim(path.Clean("/"+rest), "/")
	at, found := strings.CutPrefix(to, "@artifact/")
	if !found || strings.ContainsAny(at, "*?[{\\") {
		return "", "", "", false
	}
	dir = strings.Trim(path.Clean("/"+at), "/")
	switch {
	case src == dir:
		return al, dir, "", true
	case !contents || src == "":
		return "", "", "", false // a directory itself placed elsewhere
	case dir == "":
		return al, "", src, true
	case strings.HasSuffix(src, "/"+dir):
		return al, dir, strings.TrimSuffix(src, "/"+dir), true
	}
	return "", "", "", false
}
