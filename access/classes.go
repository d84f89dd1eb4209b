// Package access is what a sandbox's proxy config lets through, as
// classes of request: per host, the rules name finitely many methods, path
// segments and body values, so the requests fall into finitely many
// classes no rule can tell apart, and deciding one request of each class
// with the proxy's own decision function decides them all. keyhole diff
// compares two configs this way (docs/diff.md); a Ceiling is checked
// against one this way (docs/checks.md, AccessAboveCeiling).
package access

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
)

// The bounds on classes. Past them a host is undecided rather than
// guessed.
const (
	// MaxPaths bounds the request paths tried per host: one per class
	// of paths the rules of both sides cannot tell apart.
	MaxPaths = 4096
	// MaxBodies bounds the JSON bodies tried per host.
	MaxBodies = 256
	// MaxRequests bounds methods × paths × bodies per host.
	MaxRequests = 1 << 15
)

// Request is one representative request of a class: a method, a path
// and a body (nil for none). WebSocket marks a WebSocket handshake (a
// bodiless GET), decided as a wss:// URL.
type Request struct {
	Method    string
	Path      string
	Body      []byte
	WebSocket bool
}

// Scheme is the URL scheme the request is decided under, given the
// one its class walk tries (https or http): wss for a handshake over
// https.
func (r Request) Scheme(scheme string) string {
	if r.WebSocket && scheme == "https" {
		return "wss"
	}
	return scheme
}

// Compare orders requests smallest first: fewer path segments, a shorter
// path, a more common method, a shorter body.
func (r Request) Compare(o Request) int {
	return cmp.Or(
		cmp.Compare(strings.Count(r.Path, "/"), strings.Count(o.Path, "/")),
		cmp.Compare(len(r.Path), len(o.Path)),
		strings.Compare(r.Path, o.Path),
		cmp.Compare(methodRank(r.Method), methodRank(o.Method)),
		strings.Compare(r.Method, o.Method),
		cmp.Compare(len(r.Body), len(o.Body)),
		strings.Compare(string(r.Body), string(o.Body)),
		cmp.Compare(boolRank(r.WebSocket), boolRank(o.WebSocket)),
	)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// commonMethods are tried, in this order, for a method no rule names.
func commonMethods() []string {
	return []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND"}
}

func methodRank(m string) int {
	if i := slices.Index(commonMethods(), m); i >= 0 {
		return i
	}
	return len(commonMethods())
}

// Classes returns one request per class of requests that rules
// (the host's rules on both sides) cannot tell apart: two requests in one
// class match exactly the same rules. A rule matches a product of a
// method set, a path set and a body set, so the classes are the product
// of the classes of each: the methods the rules name and one they do
// not; the paths of pathClasses; the bodies of bodyClasses; and, where
// a rule has websocket: true, a WebSocket handshake on each path. why is
// set when the classes exceed the comparison's bounds.
func Classes(rules []config.Rule) (reqs []Request, why string) {
	methods := map[string]bool{}
	for _, r := range rules {
		for _, m := range r.Methods {
			methods[m] = true
		}
	}
	ms := slices.Sorted(maps.Keys(methods))
	ms = append(ms, fresh(commonMethods(), methods, "OTHER"))
	paths, ok := pathClasses(rules)
	if !ok {
		return nil, fmt.Sprintf("its rules' paths fall into more than %d classes to compare", MaxPaths)
	}
	bodies, ok := bodyClasses(rules)
	if !ok {
		return nil, fmt.Sprintf("its rules' body conditions fall into more than %d classes to compare", MaxBodies)
	}
	webSocket := slices.ContainsFunc(rules, func(r config.Rule) bool { return r.WebSocket })
	n := len(ms) * len(paths) * len(bodies)
	if webSocket {
		n += len(paths)
	}
	if n > MaxRequests {
		return nil, fmt.Sprintf("its rules make %d classes of requests to compare, more than %d", n, MaxRequests)
	}
	for _, p := range paths {
		for _, m := range ms {
			for _, b := range bodies {
				reqs = append(reqs, Request{Method: m, Path: p, Body: b})
			}
		}
		if webSocket {
			reqs = append(reqs, Request{Method: "GET", Path: p, WebSocket: true})
		}
	}
	return reqs, ""
}

// fresh returns the first of candidates not in taken, else base with a
// number.
func fresh(candidates []string, taken map[string]bool, base string) string {
	for _, c := range candidates {
		if !taken[c] {
			return c
		}
	}
	for i := 2; ; i++ {
		if c := base + strconv.Itoa(i); !taken[c] {
			return c
		}
	}
}

// pathSpec is a rule path as the proxy matches it: segments (a "*" one
// matches any single segment), then what the path may hold after them.
type pathSpec struct {
	segs []string
	// exact: nothing after the segments (a pattern); else anything (a
	// prefix) or, with more, at least one more segment (a final "**").
	exact, more bool
	// segment is the rule's encodedSlash: segment: its segments may be
	// pieces joined by %2F (spelled so), a "*" piece matching one piece,
	// and its "*" segments match no segment holding %2F.
	segment bool
}

// matches reports whether the spec's segment at depth d matches seg, a
// segment of a request path with its encoded '/' spelled %2F.
func (s pathSpec) matches(d int, seg string) bool {
	p := s.segs[d]
	if !s.segment {
		return p == "*" || p == seg
	}
	if p == "*" {
		return !strings.Contains(seg, "%2F")
	}
	pp, sp := strings.Split(p, "%2F"), strings.Split(seg, "%2F")
	if len(pp) != len(sp) {
		return false
	}
	for i := range pp {
		if pp[i] != "*" && pp[i] != sp[i] {
			return false
		}
	}
	return true
}

// pathSpecs reads the rules' paths.
func pathSpecs(rules []config.Rule) []pathSpec {
	var out []pathSpec
	split := func(p string) []string {
		if p == "/" {
			return nil
		}
		return strings.Split(strings.TrimPrefix(p, "/"), "/")
	}
	for _, r := range rules {
		seg := r.EncodedSlash == config.EncodedSlashSegment
		canon := func(p string) string {
			if seg {
				return config.CanonicalEncodedSlash(p)
			}
			return p
		}
		for _, p := range r.PathPrefixes {
			out = append(out, pathSpec{segs: split(canon(p)), segment: seg})
		}
		for _, p := range r.PathPatterns {
			segs := split(canon(p))
			if n := len(segs); n > 0 && segs[n-1] == "**" {
				out = append(out, pathSpec{segs: segs[:n-1], more: true, segment: seg})
				continue
			}
			out = append(out, pathSpec{segs: segs, exact: true, segment: seg})
		}
	}
	return out
}

// pathClasses returns one path per class of paths the rules' prefixes and
// patterns cannot tell apart. It walks the paths segment by segment: at
// each depth a path's next segment either is one of the literals the
// specs still in play name there, or is none of them (a fresh segment,
// which every such spec treats alike). Past its segments a spec's match
// depends on the path's length alone: a prefix matches whatever follows,
// a pattern nothing, a final "**" one or more segments. So where a spec
// ends, the path that ends there and one a segment longer stand for every
// longer one. ok is false past MaxPaths.
func pathClasses(rules []config.Rule) (paths []string, ok bool) {
	specs := pathSpecs(rules)
	// Where a rule reads an encoded '/' as part of its segment, a fresh
	// segment holding one is told apart from one without (its "*" does
	// not match it; a rule without the field reads it both ways), and so
	// is one beside a double encoding, which such a rule refuses.
	segment := slices.ContainsFunc(specs, func(s pathSpec) bool { return s.segment })
	var walk func(prefix []string, alive []pathSpec) bool
	walk = func(prefix []string, alive []pathSpec) bool {
		if len(paths) >= MaxPaths {
			return false
		}
		paths = append(paths, "/"+strings.Join(prefix, "/"))
		d := len(prefix)
		var next []pathSpec
		lits := map[string]bool{}
		longer := false // whether a spec ending here tells this path from longer ones
		for _, s := range alive {
			if len(s.segs) > d {
				next = append(next, s)
				if s.segs[d] != "*" {
					lits[s.segs[d]] = true
				}
			} else if s.exact || s.more {
				longer = true
			}
		}
		concretePieces(lits)
		other := fresh([]string{"other", "x", "y"}, lits, "other")
		var slashed []string
		if segment {
			slashed = []string{other + "%2F" + other, other + "%2F" + other + "%2525"}
		}
		if len(next) == 0 {
			var more []string
			if longer {
				more = append(more, other)
			}
			for _, seg := range append(more, slashed...) {
				if len(paths) >= MaxPaths {
					return false
				}
				paths = append(paths, "/"+strings.Join(append(slices.Clone(prefix), seg), "/"))
			}
			return true
		}
		// The literals in order, then a segment none of them is.
		for _, seg := range slices.Concat(slices.Sorted(maps.Keys(lits)), []string{other}, slashed) {
			var keep []pathSpec
			for _, s := range next {
				if s.matches(d, seg) {
					keep = append(keep, s)
				}
			}
			if !walk(append(slices.Clone(prefix), seg), keep) {
				return false
			}
		}
		return true
	}
	ok = walk(nil, specs)
	return paths, ok
}

// concretePieces replaces, among the literal segments lits of one depth,
// each that holds a "*" piece (a pattern's /@acme%2F* under
// encodedSlash: segment) by a segment it matches, its "*" pieces a piece
// no literal of the depth holds there: that segment stands for every one
// the pattern matches and no literal names.
func concretePieces(lits map[string]bool) {
	taken := map[string]bool{}
	for lit := range lits {
		for _, piece := range strings.Split(lit, "%2F") {
			taken[piece] = true
		}
	}
	piece := fresh([]string{"x", "y", "other"}, taken, "x")
	var wild []string
	for lit := range lits {
		if pieces := strings.Split(lit, "%2F"); len(pieces) > 1 && slices.Contains(pieces, "*") {
			wild = append(wild, lit)
		}
	}
	for _, lit := range wild {
		delete(lits, lit)
		pieces := strings.Split(lit, "%2F")
		for i := range pieces {
			if pieces[i] == "*" {
				pieces[i] = piece
			}
		}
		lits[strings.Join(pieces, "%2F")] = true
	}
}

// bodyClasses returns one body per class of bodies the rules' body
// conditions cannot tell apart: per field the JSON conditions name
// (spelled exactly, as the proxy matches them: docs/proxy.md#body-rules),
// one of the values named or none of them (the field left out, which
// fails every condition on it as any other value would); and, where a
// rule has a GraphQL condition, the GraphQL requests of graphQLClasses.
// No body stands for the bodies that fail every condition. ok is false
// past MaxBodies.
func bodyClasses(rules []config.Rule) (bodies [][]byte, ok bool) {
	bodies, ok = jsonBodyClasses(rules)
	if !ok {
		return nil, false
	}
	gql, ok := graphQLClasses(rules)
	if !ok || len(bodies)+len(gql) > MaxBodies {
		return nil, false
	}
	mcp, ok := mcpClasses(rules)
	if !ok || len(bodies)+len(gql)+len(mcp) > MaxBodies {
		return nil, false
	}
	return slices.Concat(bodies, gql, mcp), true
}

// jsonBodyClasses returns the classes of bodies the rules' JSON body
// conditions tell apart (see bodyClasses).
func jsonBodyClasses(rules []config.Rule) (bodies [][]byte, ok bool) {
	values := map[string]map[string]bool{}
	for _, r := range rules {
		for field, vs := range r.Body {
			f := field
			if values[f] == nil {
				values[f] = map[string]bool{}
			}
			for _, v := range vs {
				values[f][v] = true
			}
		}
	}
	fields := slices.Sorted(maps.Keys(values))
	sorted := make([][]string, len(fields))
	n := 1
	for i, f := range fields {
		sorted[i] = slices.Sorted(maps.Keys(values[f]))
		n *= len(sorted[i]) + 1
		if n > MaxBodies {
			return nil, false
		}
	}
	// Each combination: per field, one of its values or (index 0) none.
	choice := make([]int, len(fields))
	for {
		obj := map[string]string{}
		for i, f := range fields {
			if choice[i] > 0 {
				obj[f] = sorted[i][choice[i]-1]
			}
		}
		if len(obj) == 0 {
			bodies = append(bodies, nil)
		} else {
			b, _ := json.Marshal(obj) // a map of strings always marshals, keys sorted
			bodies = append(bodies, b)
		}
		i := 0
		for ; i < len(fields); i++ {
			choice[i]++
			if choice[i] <= len(sorted[i]) {
				break
			}
			choice[i] = 0
		}
		if i == len(fields) {
			return bodies, true
		}
	}
}

// graphQLClasses returns one GraphQL request per class the rules'
// GraphQL conditions tell apart, none when no rule has one. A condition
// decides a request by the set of operation types its document holds
// (all of them count, whatever operationName selects), by whether it is
// a persisted query, and, for a batch, by the set of such kinds among its
// requests; everything else about a well-formed request is alike to every
// condition. So the classes are: a document with one operation of each
// type of a non-empty set of types; a persisted query; and, where a rule
// allows batches, a batch with one request of each kind of a non-empty
// set of kinds. These bodies are not JSON-condition classes: a GraphQL
// request holds no field but query, operationName, variables and
// extensions, and a body with any other field fails every GraphQL
// condition. Only a JSON condition naming one of those four fields could
// match a GraphQL request; such rules beside a GraphQL condition are
// beyond the comparison (ok false).
func graphQLClasses(rules []config.Rule) (bodies [][]byte, ok bool) {
	has, batches := false, false
	for _, r := range rules {
		if r.GraphQL != nil {
			has = true
			batches = batches || r.GraphQL.Batches
		}
	}
	if !has {
		return nil, true
	}
	for _, r := range rules {
		for field := range r.Body {
			for _, g := range []string{"query", "operationName", "variables", "extensions"} {
				if strings.EqualFold(strings.NewReplacer("_", "", "-", "").Replace(field), strings.ToLower(g)) {
					return nil, false
				}
			}
		}
	}
	type request = map[string]any
	ops := config.GraphQLOperations()
	names := map[string]string{config.GraphQLQuery: "Q", config.GraphQLMutation: "M", config.GraphQLSubscription: "S"}
	var kinds []request
	for set := 1; set < 1<<len(ops); set++ {
		var doc []string
		for i, op := range ops {
			if set&(1<<i) != 0 {
				doc = append(doc, op)
			}
		}
		req := request{}
		if len(doc) == 1 {
			req["query"] = doc[0] + "{__typename}"
		} else {
			parts := make([]string, len(doc))
			for i, op := range doc {
				parts[i] = op + " " + names[op] + "{__typename}"
			}
			req["query"] = strings.Join(parts, " ")
			req["operationName"] = names[doc[0]]
		}
		kinds = append(kinds, req)
	}
	kinds[0]["query"] = "{__typename}" // the query alone, in its shortest form
	persisted := request{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": strings.Repeat("0", 64)}}}
	kinds = append(kinds, persisted)
	for _, k := range kinds {
		b, _ := json.Marshal(k) // maps of strings and numbers always marshal, keys sorted
		bodies = append(bodies, b)
	}
	if !batches {
		return bodies, true
	}
	// A batch's verdict depends on the kinds of its requests, not on how
	// many of each: one request of each single-operation kind and the
	// persisted query make every set.
	singles := []request{kinds[0], kinds[1], kinds[3], persisted}
	for set := 1; set < 1<<len(singles); set++ {
		var batch []request
		for i, k := range singles {
			if set&(1<<i) != 0 {
				batch = append(batch, k)
			}
		}
		b, _ := json.Marshal(batch)
		bodies = append(bodies, b)
	}
	return bodies, true
}
