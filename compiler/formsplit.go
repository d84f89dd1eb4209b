package compiler

import (
	"cmp"
	pathpkg "path"
	"slices"
	"strings"
)

// One host of a Connection may take its credential in two forms, split
// by rule: a self-hosted GitLab reads a PRIVATE-TOKEN header on its API
// and basic auth on git's smart-HTTP paths. Two inject entries cover the
// host, each with rules; a request takes the form of the entry whose
// rule allows it. What is ambiguous is a request two entries of
// different forms both allow, or an entry without rules beside one of
// another form: which credential to send cannot then be told.

// injectForm names how an entry sets the credential, equal for entries
// that set it the same way; "" for an entry the compiler skips (neither
// form; checkInjectForm reports it). resolve reads basic before value,
// and so does this.
func injectForm(kind string, in *injectWire) string {
	switch {
	case proxyOnlyCredential(kind):
		return kind // the proxy sets the minted token or signature per host
	case in.Basic != nil:
		return "basic\x00" + in.Basic.UsernameKey + "\x00" + in.Basic.PasswordKey
	case in.Value != nil:
		return "header\x00" + strings.ToLower(cmp.Or(in.Header, "Authorization")) + "\x00" + *in.Value
	}
	return ""
}

// pathSpec is a rule path read as segments: a pattern's literal and
// "*" segments, then what may follow them.
type pathSpec struct {
	segs []string
	tail tailKind
}

type tailKind int

const (
	tailNone      tailKind = iota // a pattern without "**": nothing follows
	tailOneOrMore                 // a pattern's final "**"
	tailAny                       // a prefix: itself or anything under it
)

func prefixSpec(p string) pathSpec {
	s := pathSpec{tail: tailAny}
	if p != "/" {
		s.segs = strings.Split(strings.TrimPrefix(p, "/"), "/")
	}
	return s
}

func patternSpec(p string) pathSpec {
	if p == "/" {
		return pathSpec{tail: tailNone}
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if segs[len(segs)-1] == "**" {
		return pathSpec{segs: segs[:len(segs)-1], tail: tailOneOrMore}
	}
	return pathSpec{segs: segs, tail: tailNone}
}

func (s pathSpec) takes(extra int) bool {
	switch s.tail {
	case tailNone:
		return extra == 0
	case tailOneOrMore:
		return extra >= 1
	}
	return true
}

// segmentOverlap reports whether one path segment may match both rule
// segments, and gives one. A segment holding "*" among other text (a
// piece beside an encoded '/') is read as a glob; of two such, an
// overlap is assumed, so a split is never read as safe when it is not.
func segmentOverlap(a, b string) (string, bool) {
	ga, gb := strings.Contains(a, "*"), strings.Contains(b, "*")
	switch {
	case !ga && !gb:
		return a, a == b
	case a == "*" && !gb:
		return b, true
	case b == "*" && !ga:
		return a, true
	case !gb:
		ok, _ := pathpkg.Match(a, b)
		return b, ok
	case !ga:
		ok, _ := pathpkg.Match(b, a)
		return a, ok
	}
	return strings.ReplaceAll(a, "*", "x"), true
}

// specOverlap gives a path both specs may match, if one may exist.
func specOverlap(a, b pathSpec) (string, bool) {
	if len(a.segs) > len(b.segs) {
		a, b = b, a
	}
	var out []string
	for i, s := range a.segs {
		seg, ok := segmentOverlap(s, b.segs[i])
		if !ok {
			return "", false
		}
		out = append(out, seg)
	}
	rest := len(b.segs) - len(a.segs)
	extra := -1
	for k := range 2 {
		if a.takes(rest+k) && b.takes(k) {
			extra = k
			break
		}
	}
	if extra < 0 {
		return "", false
	}
	for _, s := range b.segs[len(a.segs):] {
		out = append(out, strings.ReplaceAll(s, "*", "x"))
	}
	for range extra {
		out = append(out, "x")
	}
	return "/" + strings.Join(out, "/"), true
}

func ruleSpecs(r ruleWire) []pathSpec {
	specs := make([]pathSpec, 0, len(r.PathPrefixes)+len(r.PathPatterns))
	for _, p := range r.PathPrefixes {
		specs = append(specs, prefixSpec(p))
	}
	for _, p := range r.PathPatterns {
		specs = append(specs, patternSpec(p))
	}
	return specs
}

// rulesOverlap gives a request, method and path, that both rules may
// allow, if one may exist. It errs towards an overlap: a request it
// names may be refused by a rule's encodedSlash reading, never the
// other way round.
func rulesOverlap(a, b ruleWire) (method, p string, ok bool) {
	i := slices.IndexFunc(a.Methods, func(m string) bool { return slices.Contains(b.Methods, m) })
	if i < 0 {
		return "", "", false
	}
	for _, x := range ruleSpecs(a) {
		for _, y := range ruleSpecs(b) {
			if p, ok := specOverlap(x, y); ok {
				return a.Methods[i], p, true
			}
		}
	}
	return "", "", false
}
