package config

import (
	"bytes"
	"errors"
)

// Errors a Secret value can have that make it unusable in a header.
var (
	ErrValueEmpty     = errors.New("value is empty")
	ErrValueLineBreak = errors.New("value holds a line break other than a single trailing one")
	ErrValueNUL       = errors.New("value holds a NUL byte")
	ErrValueControl   = errors.New("value holds a control character")
)

// HeaderValue returns a Secret value as it goes into a header: one trailing
// newline is dropped, as a file written by `echo` or a YAML block scalar
// ends with one; any other CR, LF or NUL makes the value unusable, since
// it would split or truncate the header, and so does any other control
// character but tab (DEL included), which a header value may not hold
// (RFC 9110 section 5.5): Go's HTTP client refuses to send one, and an
// upstream that takes it writes an escape sequence into its logs. The compiler's
// ConnectionInjectionInvalid check and the proxy's credential-unavailable
// refusal both use it, so they agree on which values are usable. Errors
// never include the value.
func HeaderValue(b []byte) ([]byte, error) {
	b = bytes.TrimSuffix(b, []byte("\n"))
	switch {
	case len(b) == 0:
		return nil, ErrValueEmpty
	case bytes.ContainsAny(b, "\r\n"):
		return nil, ErrValueLineBreak
	case bytes.IndexByte(b, 0) >= 0:
		return nil, ErrValueNUL
	case bytes.IndexFunc(b, isControl) >= 0:
		return nil, ErrValueControl
	}
	return b, nil
}

// isControl reports a control character a header value may not hold:
// C0 but tab, and DEL. Bytes above 0x7f are obs-text, which it may.
func isControl(r rune) bool {
	return r < ' ' && r != '\t' || r == 0x7f
}
