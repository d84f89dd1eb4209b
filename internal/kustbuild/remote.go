package kustbuild

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A check that fetches whatever a pull request names runs that pull
// request's choice of git clone or HTTP request on the CI machine, and
// gives a different answer when the remote moves. keyhole therefore does
// not fetch by default: a kustomization that names a remote base is
// refused, at the entry, before kustomize can fetch it. The refusal
// happens where kustomize reads each kustomization file (metadataFS,
// through RemoteEntry), so it holds for bases of bases too.

// Stater is the loader's view of the files, which says whether a name is
// on disk (or in the commit read).
type Stater interface {
	Stat(name string) (fs.FileInfo, error)
}

// remoteFileFields are the kustomization fields whose entries are file
// names, which kustomize also loads from an http(s) URL.
func remoteFileFields() []string {
	return []string{"crds", "configurations", "generators", "transformers", "validators", "patchesStrategicMerge"}
}

// remoteTreeFields are the fields whose entries may also be a git
// repository in kustomize's shorthand (github.com/org/repo//dir?ref=v1).
func remoteTreeFields() []string { return []string{"resources", "bases", "components"} }

// remotePathFields are the fields holding a list of objects whose path
// is a file name.
func remotePathFields() []string { return []string{"patches", "patchesJson6902", "replacements"} }

// RemoteEntry returns the first entry of the kustomization file kfile
// (its bytes, data) that kustomize would fetch, or nil.
func RemoteEntry(fsys Stater, kfile string, data []byte) *yaml.Node {
	return remoteEntry(fsys, kfile, data, "")
}

// refuseRemote refuses the kustomization file at path, reading as data,
// when remote bases are not allowed and it names one. The root
// kustomization an engine rewrites (Options.KFile) is refused at the
// entry of the file the repository holds there, where it names the same
// remote (Flux's and Argo CD's rewrites keep the user's entries but not
// their lines); a remote only the engine's rewrite names is refused at
// no line of a file (RemoteRefused.Entry.Line 0).
func (f metadataFS) refuseRemote(path string, data []byte) error {
	if f.allowRemote {
		return nil
	}
	e := RemoteEntry(f.rules, path, data)
	if e == nil {
		return nil
	}
	if f.kfile != "" && filepath.Clean(path) == f.kfile {
		e = &yaml.Node{Kind: e.Kind, Value: e.Value}
		if fi, err := f.rules.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() <= f.maxSize {
			if held, err := f.FileSystem.ReadFile(path); err == nil {
				if he := remoteEntry(f.rules, path, held, e.Value); he != nil {
					e = he
				}
			}
		}
	}
	if f.refused.Entry == nil {
		*f.refused = RemoteRefused{File: path, Entry: e}
	}
	return f.refused
}

// remoteEntry is RemoteEntry, of the entries that read as want when it
// is not "".
func remoteEntry(fsys Stater, kfile string, data []byte, want string) *yaml.Node {
	var doc yaml.Node
	if err := DecodeYAML(yaml.NewDecoder(bytes.NewReader(data)), &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil // kustomize reports what is wrong with it
	}
	root := doc.Content[0]
	dir := filepath.Dir(kfile)
	scalars := func(field string) []*yaml.Node {
		seq := Lookup(root, field)
		if seq == nil || seq.Kind != yaml.SequenceNode {
			return nil
		}
		var out []*yaml.Node
		for _, e := range seq.Content {
			switch {
			case e.Kind == yaml.ScalarNode:
				out = append(out, e)
			case e.Kind == yaml.MappingNode:
				if p := Lookup(e, "path"); p != nil && p.Kind == yaml.ScalarNode {
					out = append(out, p)
				}
			}
		}
		return out
	}
	for _, field := range remoteTreeFields() {
		for _, e := range scalars(field) {
			if (want == "" || e.Value == want) && isRemoteRef(fsys, dir, e.Value, true) {
				return e
			}
		}
	}
	for _, field := range append(remoteFileFields(), remotePathFields()...) {
		for _, e := range scalars(field) {
			if (want == "" || e.Value == want) && isRemoteRef(fsys, dir, e.Value, false) {
				return e
			}
		}
	}
	if oa := Lookup(root, "openapi"); oa != nil && oa.Kind == yaml.MappingNode {
		if p := Lookup(oa, "path"); p != nil && p.Kind == yaml.ScalarNode && (want == "" || p.Value == want) && isRemoteRef(fsys, dir, p.Value, false) {
			return p
		}
	}
	return nil
}

// isRemoteRef reports whether kustomize would fetch ref, an entry of a
// kustomization in dir: a URL (http, https, ssh, git, or a file:// git
// repository, which kustomize clones too), an scp-like git address, or,
// where trees are allowed, a name that is not on disk and reads as a git
// host's shorthand (github.com/org/repo) or carries a ?ref= query.
func isRemoteRef(fsys Stater, dir, ref string, tree bool) bool {
	ref = strings.TrimSpace(ref)
	if ref == "" || strings.Contains(ref, "\n") {
		return false // not a reference; kustomize reports it
	}
	if strings.Contains(ref, "://") || strings.HasPrefix(ref, "git@") || strings.HasPrefix(ref, "git::") {
		return true
	}
	if !tree || strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../") || filepath.IsAbs(ref) {
		return false
	}
	if _, err := fsys.Stat(filepath.Join(dir, filepath.FromSlash(ref))); err == nil {
		return false // a local file or directory
	}
	if strings.Contains(ref, "?ref=") || strings.Contains(ref, "?version=") || strings.Contains(ref, "?submodules=") {
		return true
	}
	host, _, ok := strings.Cut(ref, "/")
	return ok && strings.Contains(host, ".") && !strings.HasPrefix(host, ".")
}

// RemoteRefused is the error a kustomization read fails with when it names
// a remote base; the loader turns it into a KustomizeRemoteBase
// diagnostic at the entry.
type RemoteRefused struct {
	File  string // the kustomization file, as kustomize named it
	Entry *yaml.Node
}

func (e *RemoteRefused) Error() string {
	return fmt.Sprintf("'%s': names the remote base %q, which keyhole does not fetch", e.File, e.Entry.Value)
}

// RemoteMessage is the diagnostic's message for the entry ref of a
// build that fetches is what fetches it in the cluster ("kubectl
// kustomize does").
func RemoteMessage(ref, fetches string) string {
	return fmt.Sprintf("%q is a remote base: keyhole does not fetch remote bases, so this kustomization is not built or checked; "+
		"vendor the base into the repository, or run with --allow-remote-bases to let kustomize fetch it as %s", ref, fetches)
}
