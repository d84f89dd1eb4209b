package source

import (
	"io"
	"strings"

	"keyhole.dev/keyhole/diag"
)

// gitIgnored begins the note of an input file a walk skipped because the
// .gitignore files ignore it, and that names keyhole's kinds or declares
// a Secret (see Ignored).
const gitIgnored = ".gitignore ignores this file"

// maxIgnoredNamed bounds the ignored files a walk looks at, and
// ignoredHead how much of each it reads: a note, not a parse.
const (
	maxIgnoredNamed = 64
	ignoredHead     = 64 << 10
)

// Ignored returns the files of ds (the loader's diagnostics) that a walk
// skipped because .gitignore ignores them although they name keyhole's
// kinds or declare a Secret, in order. A Secret kept out of git that way is the usual reason
// a Connection's Secret is "not in the input", so a message about
// something missing names them.
func Ignored(ds diag.List) []string {
	var files []string
	for _, d := range ds {
		if d.Code == CodeInputSkipped && strings.HasPrefix(d.Message, gitIgnored) {
			files = append(files, d.Pos.File)
		}
	}
	return files
}

// readHead returns at most n bytes of the file at name, nil when it
// cannot be read.
func readHead(fsys fileSystem, name string, n int64) []byte {
	f, err := fsys.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return b
}
