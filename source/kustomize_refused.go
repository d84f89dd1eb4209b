package source

import (
	"path/filepath"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"keyhole.dev/keyhole/diag"
)

// fileRefused is the error a kustomize build fails with when a file it
// reads breaks one of the loader's own rules at that file (bytes that
// are not valid in the file's encoding, a size over the limit): the build reports the loader's
// diagnostic at the file, as reading the file directly would, rather than
// kustomize's message about the entry that named it.
type fileRefused struct {
	abs string          // the file, as kustomize named it
	d   diag.Diagnostic // Pos.File is filled in where it is reported
}

func (e *fileRefused) Error() string { return e.d.Message }

// refuse keeps the first refusal of a build and returns it as the error
// kustomize's read fails with.
func (f metadataFS) refuse(abs string, d diag.Diagnostic) error {
	if f.refusedFile.abs == "" {
		*f.refusedFile = fileRefused{abs: filepath.Clean(abs), d: d}
	}
	return f.refusedFile
}

// decodeForKustomize gives kustomize the text of a UTF-16 or UTF-32 file
// as UTF-8, as the loader reads it (kustomize's YAML library reads UTF-16
// but not UTF-32, and splits documents before it decodes), or refuses
// the file when its bytes are not valid in its encoding.
func (f metadataFS) decodeForKustomize(path string, data []byte) ([]byte, error) {
	text, bad := decodeText(path, data)
	if bad != nil {
		return nil, f.refuse(path, *bad)
	}
	return text, nil
}

// reportRefused adds the diagnostic of a build's refused file.
func (b *build) reportRefused(e *fileRefused) {
	d := e.d
	d.Pos.File = b.display(e.abs)
	b.l.diags = append(b.l.diags, d)
}

// tooLarge refuses a file over the size limit, at the file, as the
// loader refuses one it reads directly.
func (f metadataFS) tooLarge(path string, size int64) error {
	return f.refuse(path, diag.Diagnostic{
		Code:     CodeInputInvalid,
		Severity: diag.Error,
		Pos:      diag.Pos{Line: 1, Column: 1},
		Message:  tooLargeMessage(size, f.maxSize) + "; keyhole reads configuration, not data dumps: split the file or exclude it",
	})
}

// Open and ReadDir refuse a path that leads outside the build's root
// through a symbolic link, as ReadFile and CleanedAbs (kustomize.go) do:
// kustomize resolves every path it loads with CleanedAbs first.

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
