package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/internal/kustbuild"
)

// A kustomization a walk finds that declares Secrets but names none of
// keyhole's kinds is built only when one of its Secrets could be one a
// keyhole object reads (docs/inputs.md, "Scope"). Deciding that from its
// files alone, before any build, has to be sound: a Secret that is skipped
// but read would be reported missing.
//
// kustomize makes a Secret's name from a name written in the unit's files
// (a Secret's metadata.name, a stand-in's, a secretGenerator entry's) and
// only adds to it: namePrefix, nameSuffix, a generator's hash. So a name a
// Connection reads holds a name the unit writes, and the name the
// Connection reads is written in the files that make the Connection. The
// kustomization is built when any name its Secret documents or
// secretGenerators give is part of the text of a file that names keyhole's
// kinds, or of any local file of a kustomization that does (a patch may
// set the Connection's secretRef); and whenever a name is not plain (an
// alias, a template, a variable), or the unit could rename or make a
// Secret in a way its text does not show (replacements, a JSON patch of
// /metadata/name, a remote base, a Helm chart, a generator plugin).

// refText (mayHoldConnections gathers it) is the text a read Secret's name must be part of: every file
// that names keyhole's kinds and every local file of a kustomization that
// does, each followed by a NUL. all is set when nothing can be decided so
// (standard input, read once and later; a Flux substitution, which can
// write a name from a ConfigMap anywhere).
type refText struct {
	all  bool
	text []byte
	// files are the files that name keyhole's kinds, whose text read
	// adds to text. They are the whole of a large repository, which
	// holding through the Load would double what it keeps; only a walked
	// kustomization that declares Secrets and names none of keyhole's
	// kinds needs their text, and most repositories have none.
	files []string
}

// read adds the text of the files to text, once; a file that cannot be
// read again adds nothing, as a name in it could not be read either.
func (r *refText) read(fsys fileSystem) {
	for _, f := range r.files {
		if data, err := fsys.ReadFile(f); err == nil {
			r.text = append(append(r.text, data...), 0)
		}
	}
	r.files = nil
}

// walkedKustomizationMatters reports whether the kustomization in dir,
// which a walk found, is to be built, and when it is not, why (the
// InputSkipped note; "" for the usual one). It is built when a local file
// names keyhole's kinds; when something names them and it declares
// Secrets, it is built unless none of them can be one a keyhole object
// reads, or it names a remote base that keyhole does not fetch, so its
// build would fail anyway (after loading what comes before the base).
// Any doubt builds it (see above).
func (l *loader) walkedKustomizationMatters(dir string) (matters bool, note string) {
	if !l.connections {
		return l.kustomizationMatters(dir), ""
	}
	sc := l.secretsOf(dir)
	if sc.keyhole {
		return true, ""
	}
	names, declares, doubt, remote := sc.names, sc.declares, !sc.sure, sc.remote
	switch {
	case !declares:
		return false, ""
	case remote && !l.opts.AllowRemoteBases:
		return false, "kustomization not built: none of its files names keyhole's kinds, and one of its kustomizations names a remote base, " +
			"which keyhole does not fetch, so kustomize cannot build it here; skipped (name it explicitly to check it, with --allow-remote-bases)"
	case l.refs.all || doubt || len(names) == 0:
		return true, ""
	}
	slices.Sort(names)
	names = slices.Compact(names)
	l.refs.read(l.fsys)
	for _, n := range names {
		if bytes.Contains(l.refs.text, []byte(n)) {
			return true, ""
		}
	}
	return false, secretsUnreadNote(names)
}

// unitSecrets is what the local files of a kustomization say of keyhole
// and of Secrets (secretsOf).
type unitSecrets struct {
	keyhole  bool     // a file names keyhole's kinds (the rest is then not gathered)
	declares bool     // a file declares a Secret
	names    []string // the names the files give Secrets
	sure     bool     // names are every name a Secret of the build may take
	remote   bool     // a kustomization names a remote base
}

// secretsOf gathers unitSecrets over the local files of the kustomization
// in dir (kustomizationHolds).
func (l *loader) secretsOf(dir string) unitSecrets {
	sc := unitSecrets{sure: true}
	sc.keyhole = l.kustomizationHolds(dir, func(p string, data []byte) bool {
		if namesKeyhole(p, data) {
			return true
		}
		data = sniffText(data)
		if !declaresSecret(data) && !isKustomizationName(filepath.Base(p)) {
			return false
		}
		if bytes.Contains(data, []byte("ReplacementTransformer")) || bytes.Contains(data, []byte("PatchTransformer")) {
			sc.sure = false // a transformer that can rename a Secret: to what, only a build says
		}
		sc.declares = sc.declares || declaresSecret(data)
		var ns []string
		sure := true
		if isKustomizationName(filepath.Base(p)) {
			// What a remote base holds is not here to read.
			r := kustbuild.RemoteEntry(l.fsys, p, data) != nil
			sc.remote, sc.sure = sc.remote || r, sc.sure && !r
			ns, sure = l.kustomizationSecretNames(p, data)
		} else {
			ns, sure = secretDocNames(p, data)
		}
		sc.sure = sc.sure && sure
		sc.names = append(sc.names, ns...)
		return false
	})
	return sc
}

// kustomizationSecretNames returns the names a kustomization file's
// secretGenerator gives; sure is false when something in it can make or
// rename a Secret in a way its text does not show: replacements or a
// patch that may reach a Secret's name, a Helm chart, a
// generator plugin, a name that is not plain.
func (l *loader) kustomizationSecretNames(kfile string, data []byte) (names []string, sure bool) {
	var doc yaml.Node
	if err := decode(yaml.NewDecoder(bytes.NewReader(data)), &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, false
	}
	k := doc.Content[0]
	for _, key := range []string{"helmCharts", "helmChartInflationGenerator", "generators"} {
		if v := Lookup(k, key); v != nil && v.Kind != yaml.ScalarNode {
			return nil, false
		}
	}
	if !replacementsSpareSecretNames(Lookup(k, "replacements")) || !l.patchesSpareSecretNames(filepath.Dir(kfile), k) {
		return nil, false
	}
	gen := Lookup(k, "secretGenerator")
	if gen == nil {
		return nil, true
	}
	if gen.Kind != yaml.SequenceNode {
		return nil, false
	}
	for _, e := range gen.Content {
		n, ok := plainName(Lookup(e, "name"))
		if !ok {
			return nil, false
		}
		names = append(names, n)
	}
	return names, true
}

// patchesSpareSecretNames reports whether a kustomization's patches surely
// leave every Secret's name alone. A strategic merge patch cannot rename;
// a patch with a target can, through a JSON patch of /metadata/name or
// allowNameChange, unless its target selects another kind.
func (l *loader) patchesSpareSecretNames(dir string, k *yaml.Node) bool {
	for _, key := range []string{"patches", "patchesJson6902"} {
		ps := Lookup(k, key)
		if ps == nil {
			continue
		}
		if ps.Kind != yaml.SequenceNode {
			return false
		}
		for _, e := range ps.Content {
			if e.Kind != yaml.MappingNode {
				return false
			}
			if kind := Lookup(Lookup(e, "target"), "kind"); kind != nil && kind.Kind == yaml.ScalarNode && kind.Value != "" && !isSecretKind(kind.Value) {
				continue
			}
			if v := Lookup(Lookup(e, "options"), "allowNameChange"); v != nil && v.Value != "false" {
				return false
			}
			patch := []byte(nil)
			if v := Lookup(e, "patch"); v != nil && v.Kind == yaml.ScalarNode {
				patch = []byte(v.Value)
			}
			if v := Lookup(e, "path"); v != nil && v.Kind == yaml.ScalarNode {
				file := filepath.Join(dir, filepath.FromSlash(v.Value))
				if l.outsideRepo(dir, file) {
					return false // never read: the build says it is outside
				}
				data, err := l.fsys.ReadFile(file)
				if err != nil {
					return false
				}
				patch = append(patch, data...)
			}
			if patchesName(patch) {
				return false
			}
		}
	}
	return true
}

func isSecretKind(k string) bool {
	return slices.Contains([]string{"Secret", "SealedSecret", "ExternalSecret", "ClusterExternalSecret"}, k)
}

// patchesName reports whether data holds a JSON patch path to a
// metadata.name: "/metadata/name", not "/metadata/namespace".
func patchesName(data []byte) bool {
	const p = "/metadata/name"
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte(p))
		if i < 0 {
			return false
		}
		off += i + len(p)
		if off == len(data) || !isNameByte(data[off]) {
			return true
		}
	}
}

// replacementsSpareSecretNames reports whether a kustomization's
// replacements (nil: none) surely leave every Secret's name alone: each
// is written inline, and each target selects another kind or writes
// fields outside metadata.name.
func replacementsSpareSecretNames(r *yaml.Node) bool {
	if r == nil {
		return true
	}
	if r.Kind != yaml.SequenceNode {
		return false
	}
	for _, e := range r.Content {
		if Lookup(e, "path") != nil {
			return false // in another file
		}
		targets := Lookup(e, "targets")
		if targets == nil || targets.Kind != yaml.SequenceNode {
			return false
		}
		for _, t := range targets.Content {
			if kind := Lookup(Lookup(t, "select"), "kind"); kind != nil && kind.Kind == yaml.ScalarNode && kind.Value != "" && !isSecretKind(kind.Value) {
				continue
			}
			fps := Lookup(t, "fieldPaths")
			if fps == nil || fps.Kind != yaml.SequenceNode {
				return false
			}
			for _, fp := range fps.Content {
				// Only a path into metadata, other than the namespace,
				// labels and annotations, can reach the name.
				rest, meta := strings.CutPrefix(fp.Value, "metadata.")
				if fp.Kind != yaml.ScalarNode || meta && !strings.HasPrefix(rest, "namespace") &&
					!strings.HasPrefix(rest, "labels") && !strings.HasPrefix(rest, "annotations") {
					return false
				}
			}
		}
	}
	return true
}

// secretDocNames returns the names the Secret documents of a resource file
// give (a Secret's, and what a stand-in makes: a SealedSecret's template,
// an ExternalSecret's target); sure is false when one is not plain. A file
// that is not YAML holds no resource kustomize builds: its build fails, or
// it is a generator's input.
func secretDocNames(p string, data []byte) (names []string, sure bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := decode(dec, &doc); err != nil {
			if errors.Is(err, io.EOF) {
				return names, true
			}
			ext := strings.ToLower(filepath.Ext(p))
			return names, ext != ".yaml" && ext != ".yml" && ext != ".json"
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}
		m := doc.Content[0]
		kind := Lookup(m, "kind")
		if kind == nil || kind.Kind != yaml.ScalarNode {
			continue
		}
		var fields [][]string
		switch kind.Value {
		case "Secret":
			fields = [][]string{{"metadata", "name"}}
		case "SealedSecret":
			fields = [][]string{{"metadata", "name"}, {"spec", "template", "metadata", "name"}}
		case "ExternalSecret":
			fields = [][]string{{"metadata", "name"}, {"spec", "target", "name"}}
		case "ClusterExternalSecret":
			fields = [][]string{{"metadata", "name"}, {"spec", "externalSecretName"}, {"spec", "externalSecretSpec", "target", "name"}}
		default:
			continue
		}
		for _, path := range fields {
			v := m
			for _, key := range path {
				v = Lookup(v, key)
			}
			if v == nil {
				continue
			}
			n, ok := plainName(v)
			if !ok {
				return nil, false
			}
			names = append(names, n)
		}
	}
}

// plainName is the value of a name field when it is a plain name: a
// scalar (not an alias) of name characters only, so no variable, template
// or kustomize var can make it another.
func plainName(v *yaml.Node) (string, bool) {
	if v == nil || v.Kind != yaml.ScalarNode || v.Value == "" {
		return "", false
	}
	for i := 0; i < len(v.Value); i++ {
		if !isNameByte(v.Value[i]) {
			return "", false
		}
	}
	return v.Value, true
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_'
}

// secretsUnreadNote is the InputSkipped note for such a kustomization.
func secretsUnreadNote(names []string) string {
	shown := names
	more := ""
	if len(shown) > 5 {
		shown, more = shown[:5], fmt.Sprintf(" and %d more", len(names)-5)
	}
	return "kustomization not built: the names it gives Secrets (" + strings.Join(shown, ", ") + more +
		") are in no file that names keyhole's kinds, so no Connection reads them; skipped (name it explicitly to check it)"
}
