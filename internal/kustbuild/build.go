package kustbuild

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"

	securefs "github.com/fluxcd/pkg/kustomize/filesys"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"keyhole.dev/keyhole/diag"
)

// Options are what a build of one directory is told.
type Options struct {
	MaxSize     int64
	AllowRemote bool
	// Unrestricted lets the build read files outside its directory, as
	// kustomize-controller builds (LoadRestrictionsNone).
	Unrestricted bool
	// KFile and KData, when set, are the root kustomization file and what
	// it reads as: the one a GitOps engine generates or rewrites, which
	// the repository does not hold as such.
	KFile string
	KData []byte
	// Root is the repository's root (absolute): whatever the load
	// restrictions, the build reads nothing outside it, nor in a .git
	// directory under it (confine.go). It must be set.
	Root string
}

// Rules are the loader's own rules for the files a build reads, so that a
// file kustomize reads is refused where reading it directly would be, with
// the loader's diagnostic at the file.
type Rules interface {
	// Stat is the loader's view of the files, for their sizes and for
	// what is on disk (or in the commit read).
	Stat(name string) (fs.FileInfo, error)
	// Outside returns the symbolic link on the way to p that leads
	// outside the build's root, and the diagnostic for it; "" when there
	// is none.
	Outside(p string) (link string, d diag.Diagnostic)
	// Decode returns the text of the file at path as the loader reads it
	// (UTF-16 and UTF-32 as UTF-8), or the loader's diagnostic when its
	// bytes are not valid in its encoding.
	Decode(path string, data []byte) ([]byte, *diag.Diagnostic)
	// TooLarge is the loader's diagnostic for a file of size bytes (-1
	// when it is not known) over the limit max.
	TooLarge(size, max int64) diag.Diagnostic
	// AliasesPastLimit reports whether the YAML aliases of the file at
	// path expand past the loader's bounds.
	AliasesPastLimit(path string, data []byte) bool
}

// FileRefused is the error a kustomize build fails with when a file it
// reads breaks one of the loader's own rules at that file (bytes that
// are not valid in the file's encoding, a size over the limit): the build reports the loader's
// diagnostic at the file, as reading the file directly would, rather than
// kustomize's message about the entry that named it.
type FileRefused struct {
	Abs string          // the file, as kustomize named it
	D   diag.Diagnostic // Pos.File is filled in where it is reported
}

func (e *FileRefused) Error() string { return e.D.Message }

// Build builds the kustomization in dir (absolute), reading from fs with
// rules applied to each file, and returns what it built, the files
// kustomize read, by path, and its error. A panic inside kustomize is an
// error: no input may crash keyhole. The error is a *RemoteRefused when
// the build names a remote base that o does not allow, and a
// *FileRefused when a file breaks the loader's rules, and an *Outside when
// the build asked for a path outside o.Root (kustomize's own error, which
// names the entry, when it says so).
func Build(fs filesys.FileSystem, rules Rules, dir string, o Options) (m resmap.ResMap, read map[string][]byte, err error) {
	maxSize, allowRemote := o.MaxSize, o.AllowRemote
	defer func() {
		if r := recover(); r != nil {
			m, read, err = nil, nil, errors.New("kustomize failed on this input")
		}
	}()
	read = map[string][]byte{}
	if o.Root == "" {
		return nil, read, errors.New("kustbuild: a build needs the repository's root")
	}
	confined := confinedFS{FileSystem: fs, root: filepath.Clean(o.Root), refused: &Outside{}}
	confined.real = confined.root
	if d, _, err := fs.CleanedAbs(confined.root); err == nil {
		confined.real = string(d)
	}
	if o.AllowRemote {
		if prefix, err := securefs.TmpConfirmedDirPrefix(); err == nil {
			confined.remote = prefix
		}
	}
	mfs := metadataFS{FileSystem: confined, rules: rules, maxSize: maxSize, read: read, allowRemote: allowRemote, refused: &RemoteRefused{}, refusedFile: &FileRefused{}, budget: &Budget{},
		kfile: o.KFile, kdata: o.KData}
	roots := []string{dir}
	if cd, _, err := fs.CleanedAbs(dir); err == nil {
		roots = append(roots, string(cd))
	}
	for _, r := range roots {
		for _, name := range konfig.RecognizedKustomizationFileNames() {
			mfs.roots = append(mfs.roots, filepath.Join(r, name))
		}
	}
	openAPISchema()
	opts := krusty.MakeDefaultOptions()
	opts.AddManagedbyLabel = false
	if o.Unrestricted {
		opts.LoadRestrictions = types.LoadRestrictionsNone
	}
	m, err = krusty.MakeKustomizer(opts).Run(mfs, dir)
	if err = refusedRead(confined, err); err != nil {
		m = nil
	}
	if err != nil && mfs.refused.Entry != nil {
		return nil, read, mfs.refused
	}
	if err != nil && mfs.refusedFile.Abs != "" {
		return nil, read, mfs.refusedFile
	}
	return m, read, err
}

// metadataFS is the real filesystem, except that the root kustomization
// reads with buildMetadata: [originAnnotations, transformerAnnotations]
// added. kustomize enables origin tracking only from the kustomization
// file (krusty.Options has no switch for it) and hands the setting down to
// every base; adding it here leaves the user's files untouched.
//
// It is also where keyhole's limits hold for what kustomize reads: a file
// over the size limit, or YAML whose aliases expand past the loader's
// bounds (kustomize would expand a "billion laughs" resource without
// end), is refused before kustomize parses it.
type metadataFS struct {
	filesys.FileSystem
	// rules are the loader's, for the files' sizes, encodings, aliases
	// and links.
	rules Rules
	// roots are the paths the root kustomization file may be read as.
	roots   []string
	maxSize int64
	// read keeps what kustomize read, so that an error message quoting a
	// file can have its Secret values taken out (see Redact).
	read map[string][]byte
	// allowRemote lets kustomize fetch remote bases; otherwise the first
	// kustomization naming one fails to read and refused records it.
	allowRemote bool
	refused     *RemoteRefused
	// refusedFile is the first file the loader's own rules refused.
	refusedFile *FileRefused
	// budget counts the objects the build has read (Budget).
	budget *Budget
	// kfile, when set, reads as kdata: the root kustomization an engine
	// generates (see Options).
	kfile string
	kdata []byte
}

// CleanedAbs answers for the generated root kustomization too, which a
// build restricted to its root asks before reading it.
func (f metadataFS) CleanedAbs(path string) (filesys.ConfirmedDir, string, error) {
	if f.kfile != "" && filepath.Clean(path) == f.kfile {
		d, _, err := f.FileSystem.CleanedAbs(filepath.Dir(path))
		return d, filepath.Base(path), err
	}
	if err := f.outside(path); err != nil {
		return "", "", err
	}
	return f.FileSystem.CleanedAbs(path)
}

// Exists is true of the generated root kustomization too.
func (f metadataFS) Exists(path string) bool {
	return (f.kfile != "" && filepath.Clean(path) == f.kfile) || f.FileSystem.Exists(path)
}

// ReadFile adds the build metadata to the root kustomization file, and
// refuses what the loader would refuse to expand.
func (f metadataFS) ReadFile(path string) ([]byte, error) {
	if f.kfile != "" && filepath.Clean(path) == f.kfile {
		f.read[path] = f.kdata
		if err := f.refuseRemote(path, f.kdata); err != nil {
			return nil, err
		}
		return WithBuildMetadata(f.kdata), nil
	}
	if err := f.outside(path); err != nil {
		return nil, err
	}
	if fi, err := f.rules.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() > f.maxSize {
		return nil, f.tooLarge(path, fi.Size())
	}
	data, err := f.FileSystem.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > f.maxSize {
		return nil, f.tooLarge(path, -1)
	}
	if data, err = f.decodeForKustomize(path, data); err != nil {
		return nil, err
	}
	if bytes.ContainsRune(data, '*') {
		if f.rules.AliasesPastLimit(path, data) {
			return nil, fmt.Errorf("'%s': YAML aliases expand past keyhole's limit (a \"billion laughs\" document?); not handed to kustomize", path)
		}
	}
	if err := f.budget.Spend(path, data); err != nil {
		return nil, err
	}
	f.read[path] = data
	if IsKustomizationName(filepath.Base(path)) {
		if err := f.refuseRemote(path, data); err != nil {
			return nil, err
		}
	}
	if !slices.Contains(f.roots, filepath.Clean(path)) {
		return data, nil
	}
	return WithBuildMetadata(data), nil
}

// refuse keeps the first refusal of a build and returns it as the error
// kustomize's read fails with.
func (f metadataFS) refuse(abs string, d diag.Diagnostic) error {
	if f.refusedFile.Abs == "" {
		*f.refusedFile = FileRefused{Abs: filepath.Clean(abs), D: d}
	}
	return f.refusedFile
}

// decodeForKustomize gives kustomize the text of a UTF-16 or UTF-32 file
// as UTF-8, as the loader reads it (kustomize's YAML library reads UTF-16
// but not UTF-32, and splits documents before it decodes), or refuses
// the file when its bytes are not valid in its encoding.
func (f metadataFS) decodeForKustomize(path string, data []byte) ([]byte, error) {
	text, bad := f.rules.Decode(path, data)
	if bad != nil {
		return nil, f.refuse(path, *bad)
	}
	return text, nil
}

// tooLarge refuses a file over the size limit, at the file, as the
// loader refuses one it reads directly.
func (f metadataFS) tooLarge(path string, size int64) error {
	return f.refuse(path, f.rules.TooLarge(size, f.maxSize))
}

// outside checks that the path kustomize reads leads nowhere outside the
// build's root; it refuses the path, at the link, when it does.
func (f metadataFS) outside(p string) error {
	if link, d := f.rules.Outside(p); link != "" {
		return f.refuse(link, d)
	}
	return nil
}

// Open and ReadDir refuse a path that leads outside the build's root
// through a symbolic link, as ReadFile and CleanedAbs do: kustomize
// resolves every path it loads with CleanedAbs first.

// Open: see CleanedAbs.
func (f metadataFS) Open(p string) (filesys.File, error) {
	if err := f.outside(p); err != nil {
		return nil, err
	}
	return f.FileSystem.Open(p)
}

// ReadDir: see CleanedAbs.
func (f metadataFS) ReadDir(p string) ([]string, error) {
	if err := f.outside(p); err != nil {
		return nil, err
	}
	return f.FileSystem.ReadDir(p)
}

// openAPISchema loads kustomize's built-in OpenAPI schema before the first
// build. kustomize loads it the first time a build needs it (a strategic
// merge patch) and meanwhile reads it unlocked elsewhere (whether a kind
// is namespaced): two builds at once, one loading it, race. Loaded once
// before any build, it is only read. It costs 50 ms of CPU, once.
var openAPISchema = sync.OnceFunc(func() {
	openapi.SchemaForResourceType(yaml.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"})
})
