package source

import (
	"bytes"
	"fmt"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"

	"keyhole.dev/keyhole/diag"
)

// YAML 1.2 (section 5.2) allows a stream in UTF-8, UTF-16 or UTF-32, told
// apart by a byte order mark or, without one, by where the NUL bytes of
// its first ASCII character fall. Windows tools write UTF-16 with a mark
// (PowerShell 5's `>` and Out-File, Notepad's "Unicode"). The loader
// decodes such a file to UTF-8 before anything else reads it: the
// parser, the scope rule's sniffing, kustomize. Lines and columns count
// characters, so they are the same in the decoded text as in the file.

// textEncoding is a stream encoding other than UTF-8.
type textEncoding struct {
	name string
	enc  encoding.Encoding // without a mark: the mark, if any, is skipped
	mark int               // bytes of the byte order mark
	unit int               // bytes of a code unit
}

// detectEncoding tells the encoding of data as YAML 1.2 does; ok is false
// for UTF-8 (with or without its mark), which needs no decoding.
func detectEncoding(data []byte) (e textEncoding, ok bool) {
	var (
		utf32BE = utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM)
		utf32LE = utf32.UTF32(utf32.LittleEndian, utf32.IgnoreBOM)
		utf16BE = unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM)
		utf16LE = unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM)
	)
	// Without a mark, the first character must be one a YAML stream can
	// start with: printable ASCII, a tab or a line break. A binary file
	// (a NUL, then a control byte) stays binary.
	ascii := func(b byte) bool { return b >= 0x20 && b < 0x7F || b == '\t' || b == '\n' || b == '\r' }
	switch {
	case bytes.HasPrefix(data, []byte{0, 0, 0xFE, 0xFF}):
		return textEncoding{"UTF-32BE", utf32BE, 4, 4}, true
	case len(data) >= 4 && data[0] == 0 && data[1] == 0 && data[2] == 0 && ascii(data[3]):
		return textEncoding{"UTF-32BE", utf32BE, 0, 4}, true
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE, 0, 0}):
		return textEncoding{"UTF-32LE", utf32LE, 4, 4}, true
	case len(data) >= 4 && ascii(data[0]) && data[1] == 0 && data[2] == 0 && data[3] == 0:
		return textEncoding{"UTF-32LE", utf32LE, 0, 4}, true
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		return textEncoding{"UTF-16BE", utf16BE, 2, 2}, true
	case len(data) >= 2 && data[0] == 0 && ascii(data[1]):
		return textEncoding{"UTF-16BE", utf16BE, 0, 2}, true
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		return textEncoding{"UTF-16LE", utf16LE, 2, 2}, true
	case len(data) >= 2 && ascii(data[0]) && data[1] == 0:
		return textEncoding{"UTF-16LE", utf16LE, 0, 2}, true
	}
	return textEncoding{}, false
}

// decodeText returns data as UTF-8: data itself when it is UTF-8 (or not
// text at all, which checkBytes then refuses), else data decoded from the
// UTF-16 or UTF-32 it is in, without its byte order mark. Bytes that are
// not valid in that encoding (an unpaired surrogate, a code point past
// U+10FFFF, a truncated last character) make bad an InputInvalid error at
// the first of them; the text returned then holds U+FFFD in their place,
// for the scope rule to sniff.
func decodeText(file string, data []byte) (text []byte, bad *diag.Diagnostic) {
	e, ok := detectEncoding(data)
	if !ok {
		return data, nil
	}
	body := data[e.mark:]
	text, err := e.enc.NewDecoder().Bytes(body)
	if err != nil {
		text = nil
	}
	// The decoders replace what is invalid with U+FFFD and say nothing:
	// valid text is what encodes back to the very same bytes.
	back, err := e.enc.NewEncoder().Bytes(text)
	if err == nil && bytes.Equal(back, body) {
		return text, nil
	}
	off := 0
	for off < len(back) && off < len(body) && back[off] == body[off] {
		off++
	}
	off -= off % e.unit
	prefix, _ := e.enc.NewDecoder().Bytes(body[:off])
	line, col := position(prefix, len(prefix))
	return text, &diag.Diagnostic{
		Code:     CodeInputInvalid,
		Severity: diag.Error,
		Pos:      diag.Pos{File: file, Line: line, Column: col},
		Message: fmt.Sprintf("invalid %s: the bytes at line %d, column %d (byte %d of the file) are not a character in %s (an unpaired surrogate, a value past U+10FFFF or a truncated last character); save the file again as UTF-8, or as %s from valid text",
			e.name, line, col, e.mark+off, e.name, e.name),
	}
}

// sniffText is data as the scope rule reads it: decoded when it is UTF-16
// or UTF-32, so that such a file names keyhole's kinds when its text does.
func sniffText(data []byte) []byte {
	text, _ := decodeText("", data)
	return text
}
