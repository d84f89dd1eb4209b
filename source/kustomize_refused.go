package source

import (
	"io/fs"
	"slices"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/kustbuild"
)

// buildRules are the loader's rules for the files one kustomize build
// reads (kustbuild.Rules): a file that breaks one (bytes that are not
// valid in the file's encoding, a size over the limit, a link outside the
// root) is refused with the loader's diagnostic at the file, as reading
// the file directly would be.
type buildRules struct {
	// fsys is the loader's view of the files kustomize reads.
	fsys fileSystem
	// confine is the root the build's symbolic links must stay in, and
	// confineGit says it is a git working tree's (confine.go).
	confine    string
	confineGit bool
}

var _ kustbuild.Rules = buildRules{}

// Stat is the loader's.
func (r buildRules) Stat(name string) (fs.FileInfo, error) { return r.fsys.Stat(name) }

// Decode reads the file's text as the loader does (decodeText).
func (r buildRules) Decode(path string, data []byte) ([]byte, *diag.Diagnostic) {
	return decodeText(path, data)
}

// AliasesPastLimit reports whether parsing the file gives a
// YAMLAliasLimit.
func (r buildRules) AliasesPastLimit(path string, data []byte) bool {
	_, ds := Parse(path, data)
	return slices.ContainsFunc(ds, func(d diag.Diagnostic) bool { return d.Code == CodeYAMLAliasLimit })
}

// TooLarge refuses a file over the size limit, at the file, as the
// loader refuses one it reads directly.
func (r buildRules) TooLarge(size, max int64) diag.Diagnostic {
	return diag.Diagnostic{
		Code:     CodeInputInvalid,
		Severity: diag.Error,
		Pos:      diag.Pos{Line: 1, Column: 1},
		Message:  tooLargeMessage(size, max) + "; keyhole reads configuration, not data dumps: split the file or exclude it",
	}
}
