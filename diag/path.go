package diag

import (
	"strconv"
)

// JoinKey extends a field path by a mapping key, the way every keyhole
// diagnostic prints paths: spec.hosts, or metadata.annotations["keyhole.dev/ignore"]
// for a key that is not an identifier.
func JoinKey(path, key string) string {
	if !isIdent(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// JoinIndex extends a field path by a list index: spec.hosts[0].
func JoinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// isIdent reports whether s can follow a dot in a path unquoted.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case i > 0 && (r == '-' || r >= '0' && r <= '9'):
		default:
			return false
		}
	}
	return true
}
