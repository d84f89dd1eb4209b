package policy

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"keyhole.dev/keyhole/proxy/config"
)

// ErrTarget is wrapped when a request target cannot be matched without
// normalizing it; the proxy refuses such requests as l7-not-allowed rather
// than guessing what the upstream would make of them.
var ErrTarget = errors.New("request target refused")

// errEncodedSlash is wrapped, with ErrTarget, in TargetPath's refusal
// of an encoded '/': the decision lifts it where no rule can be confused
// by one (see decodeSlashes).
var errEncodedSlash = errors.New("the path holds an encoded '/'")

// TargetPath checks an origin-form request target ("/path?query") and
// returns its path exactly as sent. It refuses, never normalizes: dot
// segments (plain or percent-encoded), encoded '/' or '\', a literal '\',
// empty segments ("//"), ';' parameters, fragments, control characters
// (plain or encoded), malformed percent escapes and any target that is not
// origin-form. "/" alone is accepted, and so is one trailing '/' after a
// segment (a directory-style URL such as a package index's
// /simple/requests/): MatchRule matches it as the path without it.
func TargetPath(target string) (string, error) {
	return targetPath(target, false)
}

// targetPath is TargetPath, and with slashes it also accepts an encoded
// '/' (%2F or %2f) inside a segment, as npm's scoped package names
// (/@scope%2fname) and GitLab's project paths (group%2Fproject) hold
// one, so long as it leaves no empty or dot segment to an upstream that
// reads it as a separator.
func targetPath(target string, slashes bool) (string, error) {
	if !strings.HasPrefix(target, "/") {
		return "", fmt.Errorf("%w: %q is not an origin-form target", ErrTarget, Clip(target))
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c < 0x21 || c == 0x7f {
			return "", fmt.Errorf("%w: the target holds a control character or space", ErrTarget)
		}
	}
	if strings.IndexByte(target, '#') >= 0 {
		return "", fmt.Errorf("%w: the target holds a fragment", ErrTarget)
	}
	path := target
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if path == "/" {
		return path, nil
	}
	segs := strings.Split(path[1:], "/")
	for i, seg := range segs {
		if seg == "" {
			if i == len(segs)-1 {
				continue // one trailing slash
			}
			return "", fmt.Errorf("%w: the path has an empty segment (\"//\"), which upstreams read differently (some merge the slashes, some do not), so keyhole cannot tell which rule it falls under", ErrTarget)
		}
		if strings.ContainsAny(seg, ";\\") {
			return "", fmt.Errorf("%w: the path holds ';' or '\\'", ErrTarget)
		}
		dec, err := decodeSegment(seg, slashes)
		if err != nil {
			return "", err
		}
		// Each part an encoded '/' delimits is a segment to an upstream
		// that reads it as a separator.
		for part := range strings.SplitSeq(dec, "/") {
			if part == "" {
				return "", fmt.Errorf("%w: an encoded '/' at the start or end of a segment, or beside another, leaves an empty segment", ErrTarget)
			}
			if part == "." || part == ".." {
				return "", fmt.Errorf("%w: the path has a dot segment", ErrTarget)
			}
			if err := compatible(part); err != nil {
				return "", err
			}
		}
	}
	return path, nil
}

// doubleEncoded reports whether path holds an encoded '%' that begins
// an escape (%252F, %255C, %252E): an upstream that decodes twice reads
// it as the character the escape names.
func doubleEncoded(path string) bool {
	for i := 0; i+4 < len(path); i++ {
		if path[i] == '%' && path[i+1] == '2' && path[i+2] == '5' && IsHex(path[i+3]) && IsHex(path[i+4]) {
			return true
		}
	}
	return false
}

// decodeSlashes returns path (as targetPath accepts it with slashes) as
// an upstream reads it that takes an encoded '/' for a separator.
func decodeSlashes(path string) string {
	return strings.NewReplacer("%2F", "/", "%2f", "/").Replace(path)
}

// compatible refuses a segment that an upstream normalizing paths by
// compatibility (Unicode NFKC, as some frameworks and file systems do)
// would read differently from what the rules matched: fullwidth or other
// forms of '.', '/', '\', ';', '%', '?' and '#' (U+FF0E FULLWIDTH FULL
// STOP twice is ".." to it). Other letters are left alone, "ﬁle" and
// "日本" included; so is a fullwidth dot inside a name, which normalizes to
// a dot inside a name.
func compatible(seg string) error {
	if isASCII(seg) {
		return nil
	}
	n := norm.NFKC.String(seg)
	if n == "." || n == ".." || strings.ContainsAny(n, "/\\;%?#") {
		return fmt.Errorf("%w: the path holds characters that Unicode compatibility normalization reads as '.', '/', '\\', ';', '%%', '?' or '#'", ErrTarget)
	}
	return nil
}

// isASCII reports whether s is all ASCII, which no Unicode normalization
// or folding changes: the fast way past them on every request.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// decodeSegment percent-decodes one segment and refuses escapes that
// could change how an upstream splits or reads the path: an encoded '/'
// among them unless slashes.
func decodeSegment(seg string, slashes bool) (string, error) {
	if strings.IndexByte(seg, '%') < 0 {
		// Bytes that are not UTF-8 sent as they are: the proxy's HTTP
		// client percent-encodes them on the way out, so the upstream
		// would get the very escapes refused below (%c0%ae).
		if !utf8.ValidString(seg) {
			return "", fmt.Errorf("%w: the path holds bytes that are not UTF-8", ErrTarget)
		}
		return seg, nil
	}
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		if seg[i] != '%' {
			b.WriteByte(seg[i])
			continue
		}
		if i+2 >= len(seg) || !IsHex(seg[i+1]) || !IsHex(seg[i+2]) {
			return "", fmt.Errorf("%w: the path has a malformed percent escape", ErrTarget)
		}
		c := unhex(seg[i+1])<<4 | unhex(seg[i+2])
		switch {
		case c == '/' && !slashes:
			return "", fmt.Errorf("%w: %w", ErrTarget, errEncodedSlash)
		case c == '\\':
			return "", fmt.Errorf("%w: the path holds an encoded '\\'", ErrTarget)
		case c == ';':
			return "", fmt.Errorf("%w: the path holds an encoded ';'", ErrTarget)
		case c < 0x20 || c == 0x7f:
			return "", fmt.Errorf("%w: the path holds an encoded control character", ErrTarget)
		}
		b.WriteByte(c)
		i += 2
	}
	// An escape sequence that is not UTF-8, such as the overlong %c0%ae
	// for '.', is read as a dot or a slash by some servers: refuse it.
	if !utf8.ValidString(b.String()) {
		return "", fmt.Errorf("%w: the path holds percent escapes that are not UTF-8", ErrTarget)
	}
	return b.String(), nil
}

// IsHex reports whether c is a hexadecimal digit, as a percent-escape
// takes.
func IsHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// MatchPrefix reports whether path (as returned by TargetPath) lies under
// prefix by whole segments: /repos/acme/widgets matches itself and
// /repos/acme/widgets/pulls but not /repos/acme/widgets-old. "/" matches
// every path.
func MatchPrefix(prefix, path string) bool {
	if prefix == "/" {
		return strings.HasPrefix(path, "/")
	}
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || path[len(prefix)] == '/'
}

// MatchPattern reports whether path matches pattern segment by segment:
// "*" matches exactly one segment and a final "**" matches one or more
// remaining segments.
func MatchPattern(pattern, path string) bool {
	return matchPatternWith(pattern, path, func(p, s string) bool { return p == "*" || p == s })
}

// matchPatternWith is MatchPattern with segment deciding whether one
// segment of the pattern matches one of the path.
func matchPatternWith(pattern, path string, segment func(p, s string) bool) bool {
	if pattern == "/" {
		return path == "/"
	}
	if !strings.HasPrefix(pattern, "/") || !strings.HasPrefix(path, "/") || path == "/" {
		return false
	}
	ps := strings.Split(pattern[1:], "/")
	ss := strings.Split(path[1:], "/")
	for i, p := range ps {
		if p == "**" && i == len(ps)-1 {
			return len(ss) > i
		}
		if i >= len(ss) || !segment(p, ss[i]) {
			return false
		}
	}
	return len(ss) == len(ps)
}

// matchSegmentPaths reports whether path lies under one of r's prefixes
// or matches one of its patterns, an encoded '/' being part of its
// segment (config.EncodedSlashSegment): a prefix matches whole segments,
// its %2F matching a %2F (either case) at the same place; a pattern's "*"
// matches a segment, or a piece of one between %2F, that holds no %2F;
// its final "**" matches the remaining segments, whatever they hold.
func matchSegmentPaths(r config.Rule, path string) bool {
	path = config.CanonicalEncodedSlash(path)
	for _, p := range r.PathPrefixes {
		if MatchPrefix(config.CanonicalEncodedSlash(p), path) {
			return true
		}
	}
	for _, p := range r.PathPatterns {
		if matchSegmentPattern(config.CanonicalEncodedSlash(p), path) {
			return true
		}
	}
	return false
}

// matchSegmentPattern is MatchPattern with an encoded '/' part of its
// segment; pattern and path spell it %2F.
func matchSegmentPattern(pattern, path string) bool {
	return matchPatternWith(pattern, path, matchSegment)
}

// matchSegment matches one segment of a pattern under
// config.EncodedSlashSegment: piece by piece where it holds %2F, "*"
// matching a piece (or the whole segment) that holds none.
func matchSegment(p, seg string) bool {
	if !strings.Contains(p, "%2F") {
		return p == seg || p == "*" && !strings.Contains(seg, "%2F")
	}
	pp, sp := strings.Split(p, "%2F"), strings.Split(seg, "%2F")
	if len(pp) != len(sp) {
		return false
	}
	for i := range pp {
		if pp[i] != sp[i] && pp[i] != "*" {
			return false
		}
	}
	return true
}

// MatchRule reports whether a request with this method, path (from
// TargetPath) and body matches rule r. body is consulted only when r has a
// Body, GraphQL or MCP condition (see CheckBody, CheckGraphQL and
// CheckMCP).
func MatchRule(r config.Rule, method, path string, body Body) bool {
	return matchRule(r, method, path, body) == nil
}

// errNoMatch is matchRule's answer for a rule whose method or path does
// not fit; a body that does not fit gets CheckBody's reason instead.
var errNoMatch = errors.New("no match")

func matchRule(r config.Rule, method, path string, body Body) error {
	if !slices.Contains(r.Methods, method) {
		return errNoMatch
	}
	// A trailing slash names the same place as the path without it for
	// the rules: /simple/requests/ lies under the prefix /simple and
	// matches the pattern /simple/*, never more.
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	pathOK := false
	if r.EncodedSlash == config.EncodedSlashSegment {
		pathOK = matchSegmentPaths(r, path)
	} else {
		for _, p := range r.PathPrefixes {
			if MatchPrefix(p, path) {
				pathOK = true
				break
			}
		}
		for _, p := range r.PathPatterns {
			if !pathOK && MatchPattern(p, path) {
				pathOK = true
			}
		}
	}
	if !pathOK {
		return errNoMatch
	}
	if r.GraphQL != nil {
		if err := CheckGraphQL(*r.GraphQL, body); err != nil {
			return err
		}
	}
	if r.MCP != nil {
		return checkMCPRule(*r.MCP, method, body)
	}
	if len(r.Body) == 0 {
		return nil
	}
	return CheckBody(r.Body, body)
}

// CanonicalHost lowercases an authority ("host" or "host:port"), drops a
// trailing dot and drops the port when it is defaultPort. It returns
// "host" or "host:port" so that two spellings of one host compare equal.
// IPv6 literals keep their brackets when a port remains.
func CanonicalHost(authority, defaultPort string) (string, error) {
	host, port := authority, ""
	// An authority without a colon has no port: net.SplitHostPort would
	// build an error to say so, on every request.
	if !strings.Contains(authority, ":") {
		if strings.HasPrefix(authority, "[") && strings.HasSuffix(authority, "]") {
			host = authority[1 : len(authority)-1]
		}
	} else if h, p, err := net.SplitHostPort(authority); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(authority, "[") && strings.HasSuffix(authority, "]") {
		host = authority[1 : len(authority)-1]
	} else if strings.Contains(authority, ":") {
		return "", fmt.Errorf("malformed host %q", Clip(authority))
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return "", errors.New("empty host")
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("/\\@?#%[]", c) >= 0 {
			return "", fmt.Errorf("malformed host %q", Clip(authority))
		}
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return "", fmt.Errorf("malformed port in %q", Clip(authority))
		}
	}
	if port == defaultPort {
		port = ""
	}
	if port == "" {
		return host, nil
	}
	return net.JoinHostPort(host, port), nil
}

// Clip shortens s to 64 bytes for a message or a log line, so what a
// sandbox sends cannot flood either.
func Clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
