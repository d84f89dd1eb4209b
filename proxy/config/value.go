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
)

// HeaderValue returns a Secret value as it goes into a header: one trailing
// newline is dropped, as a file written by `echo` or a YAML block scalar
// ends with one; any other CR, LF or NUL makes the value unusable, since
// it would split or truncate the header. The compiler's
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
	}
	return b, nil
}
