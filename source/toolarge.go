package source

import (
	"bytes"
	"fmt"
	"io"

	"golang.org/x/text/transform"

	"keyhole.dev/keyhole/diag"
)

// A file over the size limit is never parsed, but whether it names
// keyhole's kinds is still a fact about it: found by a walk, it is an
// error when it does and one InputSkipped note when it does not, as any
// other file that cannot be read as objects (docs/inputs.md). So its
// bytes are searched, a block at a time, for what namesKeyhole looks for,
// without ever holding more than a block and a line of it.

// sniffBlock is how much of a file too large to read is searched at once.
const sniffBlock = 1 << 20

// sniffCarry bounds the end of a block carried into the next one: the
// line a kind field may straddle the blocks on.
const sniffCarry = 64 << 10

// sniffFactor bounds the bytes searched: at most this many times the size
// limit (1 GiB at the default limit), so that a walk that meets a disk
// image named like YAML ends.
const sniffFactor = 64

// sniffReader reports whether holds is true of the text r yields, read a
// block at a time (each cut after a line break where it can be, the cut
// line carried over), decoded first when it is UTF-16 or UTF-32. whole is
// false when it stopped at max bytes without an answer.
func sniffReader(name string, r io.Reader, max int64, holds func(name string, data []byte) bool) (found, whole bool) {
	lim := &io.LimitedReader{R: r, N: max}
	head := make([]byte, 4)
	n, _ := io.ReadFull(lim, head)
	head = head[:n]
	var src io.Reader = io.MultiReader(bytes.NewReader(head), lim)
	if e, ok := detectEncoding(head); ok {
		src = transform.NewReader(io.MultiReader(bytes.NewReader(head[e.mark:]), lim), e.enc.NewDecoder())
	}
	buf := make([]byte, 0, sniffBlock+sniffCarry)
	for {
		m, err := io.ReadFull(src, buf[len(buf):len(buf)+sniffBlock])
		buf = buf[:len(buf)+m]
		end := err != nil
		cut := len(buf)
		if !end {
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				cut = i + 1
			}
		}
		if holds(name, buf[:cut]) {
			return true, true
		}
		if end {
			return false, lim.N > 0
		}
		rest := buf[cut:]
		if len(rest) > sniffCarry {
			rest = rest[len(rest)-sniffCarry:]
		}
		buf = append(buf[:0], rest...)
	}
}

// mib says a size in bytes as a size limit is said: in MiB when it is a
// whole number of them.
func mib(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// tooLargeMessage is what is said of a file over the limit; size is its
// size, or negative when it is not known (a stream read up to the limit).
func tooLargeMessage(size, limit int64) string {
	if size < 0 {
		return fmt.Sprintf("file too large: over the %s limit", mib(limit))
	}
	return fmt.Sprintf("file too large: %d bytes, over the %s limit", size, mib(limit))
}

// tooLarge is the diagnostic of a file over the size limit, reported as
// name; size is its size, or negative when it is not known. Found by a
// walk, it is an error when the file names keyhole's kinds (r, when not
// nil, is searched for them: see sniffReader) and one InputSkipped note
// when it does not.
func (l *loader) tooLarge(name string, r io.Reader, size int64, walked bool) diag.List {
	d := diag.Diagnostic{
		Code:     CodeInputInvalid,
		Severity: diag.Error,
		Pos:      diag.Pos{File: name, Line: 1, Column: 1},
		Message:  tooLargeMessage(size, l.opts.MaxFileSize) + "; keyhole reads configuration, not data dumps: split the file or exclude it",
	}
	if !walked || namesKeyhole(name, nil) {
		return diag.List{d}
	}
	why := "it names none of keyhole's kinds"
	if r == nil {
		why = "it could not be searched for keyhole's kinds"
	} else {
		found, whole := sniffReader(name, r, sniffFactor*l.opts.MaxFileSize, namesKeyhole)
		if found {
			return diag.List{d}
		}
		if !whole {
			why = fmt.Sprintf("its first %s name none of keyhole's kinds", mib(sniffFactor*l.opts.MaxFileSize))
		}
	}
	return diag.List{skipped(d.Pos, fmt.Sprintf("not read as objects: %s (%s: %s); skipped (name the file explicitly to check it)", why, d.Code, tooLargeMessage(size, l.opts.MaxFileSize)))}
}

// largeFileHolds reports whether holds is true of the file at abs, too
// large to read whole, searched as sniffReader searches it.
func largeFileHolds(fsys fileSystem, abs string, limit int64, holds func(name string, data []byte) bool) bool {
	if holds(abs, nil) {
		return true
	}
	f, err := fsys.Open(abs)
	if err != nil {
		return false
	}
	defer f.Close()
	found, _ := sniffReader(abs, f, sniffFactor*limit, holds)
	return found
}
