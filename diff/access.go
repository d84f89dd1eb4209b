package diff

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// Verdict says how what a sandbox may do changed between two plans.
type Verdict string

// The verdicts. A request "gains" when the head allows it and the base
// refused it, or when the head puts a credential on it that the base did
// not (a host that was passed through, or another Secret, key, header
// template, injection form or placeholder); it "loses" the other way round.
const (
	// VerdictUnchanged: every request gets the same decision and the
	// same credential from both plans.
	VerdictUnchanged Verdict = "unchanged"
	// VerdictWidened: some request gains, none loses.
	VerdictWidened Verdict = "widened"
	// VerdictNarrowed: some request loses, none gains.
	VerdictNarrowed Verdict = "narrowed"
	// VerdictChanged: some requests gain and others lose.
	VerdictChanged Verdict = "changed"
	// VerdictUndecided: the comparison could not be completed within its
	// bounds (see Access.Undecided); the witnesses found are still
	// reported, but more requests may gain or lose.
	VerdictUndecided Verdict = "undecided"
)

// Verdicts lists the verdicts in the order the reports give them: what
// most needs a reviewer first.
func Verdicts() []Verdict {
	return []Verdict{VerdictWidened, VerdictChanged, VerdictUndecided, VerdictNarrowed, VerdictUnchanged}
}

func (v Verdict) rank() int {
	if i := slices.Index(Verdicts(), v); i >= 0 {
		return i
	}
	return len(Verdicts())
}

// MayWiden reports whether a sandbox with this verdict may now be
// allowed something it was not: widened, changed, or undecided.
func (v Verdict) MayWiden() bool {
	return v == VerdictWidened || v == VerdictChanged || v == VerdictUndecided
}

// MayNarrow reports whether a sandbox with this verdict may now be
// refused something it was allowed: narrowed, changed, or undecided.
func (v Verdict) MayNarrow() bool {
	return v == VerdictNarrowed || v == VerdictChanged || v == VerdictUndecided
}

// Access is how what one sandbox may do changed, with witnesses: concrete
// requests that the proxy's decision function, run on both plans, decides
// differently.
type Access struct {
	Verdict Verdict `json:"verdict"`
	// Undecided says why the verdict is VerdictUndecided.
	Undecided string `json:"undecided,omitempty"`
	// Widened are the smallest requests that gain, at most a few per
	// host; Narrowed the smallest that lose.
	Widened  []Witness `json:"widened,omitempty"`
	Narrowed []Witness `json:"narrowed,omitempty"`
}

// Witness is one request that two plans decide differently, with both
// decisions as the proxy made them.
type Witness struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	// Body is the request's JSON body, for hosts whose rules look at it.
	Body string  `json:"body,omitempty"`
	Base Outcome `json:"base"`
	Head Outcome `json:"head"`
	// Rule is the rule that allows the request: the head's for a request
	// that gains, the base's for one that loses; empty when the host has
	// no rules or is passed through.
	Rule string `json:"rule,omitempty"`
}

// Request is the witness's request on one line: METHOD URL [body].
func (w Witness) Request() string {
	if w.Body == "" {
		return w.Method + " " + w.URL
	}
	return w.Method + " " + w.URL + " " + w.Body
}

// Outcome is the proxy's decision on one request, and the credential it
// puts on it: Secret and key names, never a value.
type Outcome struct {
	// Action is the proxy's: refuse, tunnel, forward or inject.
	Action policy.Action `json:"action"`
	// Reason is the refusal reason the sandbox sees in
	// X-Omnia-Egress-Refused, for a refusal.
	Reason policy.Reason `json:"reason,omitempty"`
	// Connection and Credential say whose credential is injected and how,
	// for an injection.
	Connection string `json:"connection,omitempty"`
	Credential string `json:"credential,omitempty"`
}

// Allowed reports whether the proxy lets the request through.
func (o Outcome) Allowed() bool { return o.Action != policy.ActionRefuse }

func (o Outcome) String() string {
	switch o.Action {
	case policy.ActionRefuse:
		return fmt.Sprintf("refused (%d %s)", o.Reason.Status(), o.Reason)
	case policy.ActionTunnel:
		return "tunnelled, no credential"
	case policy.ActionForward:
		return "forwarded over plain HTTP, no credential"
	case policy.ActionInject:
		return "allowed with " + o.Credential
	}
	return string(o.Action)
}

// The comparison's bounds. Past them a host's verdict is undecided rather
// than guessed.
const (
	// maxPaths bounds the request paths tried per host: one per class
	// of paths the rules of both sides cannot tell apart.
	maxPaths = 4096
	// maxBodies bounds the JSON bodies tried per host.
	maxBodies = 256
	// maxRequests bounds methods × paths × bodies per host.
	maxRequests = 1 << 15
	// witnessesPerHost is how many witnesses of each direction a host
	// reports: one per distinct cause (rule, scheme, kind of change)
	// first, smallest first.
	witnessesPerHost = 3
)

// CompareAccess compares what two proxy configs of one sandbox let
// through. A nil config is a sandbox that does not exist on that side:
// it reaches nothing.
func CompareAccess(base, head *config.Config) Access {
	return newAccessCache().compare(base, head)
}

// accessCache remembers each host's comparison by the two entries it
// compared, so that thousands of sandboxes sharing one change cost one
// comparison. It lives for one Compare.
type accessCache map[string]hostAccess

func newAccessCache() accessCache { return accessCache{} }

// hostAccess is one host's comparison.
type hostAccess struct {
	undecided         string
	gains, loses      bool
	widened, narrowed []Witness
}

// entry is a host as one side has it: injected (h set), passed through,
// or absent.
type entry struct {
	h           *config.Host
	passthrough bool
}

func (e entry) key() string {
	switch {
	case e.h != nil:
		b, _ := json.Marshal(e.h) // a config.Host always marshals
		return string(b)
	case e.passthrough:
		return "passthrough"
	}
	return "none"
}

func entries(c *config.Config) map[string]entry {
	out := map[string]entry{}
	if c == nil {
		return out
	}
	for i := range c.Hosts {
		out[c.Hosts[i].Name] = entry{h: &c.Hosts[i]}
	}
	for _, p := range c.Passthrough {
		out[p] = entry{passthrough: true}
	}
	return out
}

func (ac accessCache) compare(base, head *config.Config) Access {
	name := "sandbox"
	for _, c := range []*config.Config{head, base} {
		if c != nil && c.Sandbox.Name != "" {
			name = c.Sandbox.Name
		}
	}
	pb, errB := fullPolicy(base, name)
	ph, errH := fullPolicy(head, name)
	if err := cmp.Or(errB, errH); err != nil {
		return Access{Verdict: VerdictUndecided, Undecided: fmt.Sprintf("a proxy config does not compile: %v", err)}
	}
	be, he := entries(base), entries(head)
	var a Access
	var gains, loses bool
	var undecided []string
	for _, host := range unionKeys(be, he) {
		b, h := be[host], he[host]
		if b.key() == h.key() {
			continue // the same entry decides every request the same
		}
		k := host + "\x00" + b.key() + "\x00" + h.key()
		ha, ok := ac[k]
		if !ok {
			ha = compareHost(host, b, h)
			ac[k] = ha
		}
		if ha.undecided != "" {
			undecided = append(undecided, ha.undecided)
		}
		gains, loses = gains || ha.gains, loses || ha.loses
		a.Widened = append(a.Widened, ha.widened...)
		a.Narrowed = append(a.Narrowed, ha.narrowed...)
	}
	// Each witness was found on one host's entries alone; decide it
	// again on the whole plans, as the proxy would serve them.
	for _, ws := range [][]Witness{a.Widened, a.Narrowed} {
		for _, w := range ws {
			body := []byte(w.Body)
			gotB := outcome(pb, pb.DecideURL(w.Method, w.URL, body))
			gotH := outcome(ph, ph.DecideURL(w.Method, w.URL, body))
			if gotB != w.Base || gotH != w.Head {
				undecided = append(undecided, fmt.Sprintf("%s: the whole plans decide it %s and %s, not as its host alone does", w.Request(), gotB, gotH))
			}
		}
	}
	switch {
	case len(undecided) > 0:
		a.Verdict, a.Undecided = VerdictUndecided, strings.Join(undecided, "; ")
	case gains && loses:
		a.Verdict = VerdictChanged
	case gains:
		a.Verdict = VerdictWidened
	case loses:
		a.Verdict = VerdictNarrowed
	default:
		a.Verdict = VerdictUnchanged
	}
	return a
}

// fullPolicy compiles a sandbox's config; a missing side is an empty
// config, which refuses everything.
func fullPolicy(c *config.Config, name string) (*policy.Policy, error) {
	if c == nil {
		c = &config.Config{APIVersion: config.APIVersion, Kind: config.Kind, Sandbox: config.SandboxRef{Name: name}}
	}
	return policy.NewPolicy(c)
}

// hostPolicy compiles a config holding one host's entry alone.
func hostPolicy(host string, e entry) (*policy.Policy, error) {
	c := &config.Config{APIVersion: config.APIVersion, Kind: config.Kind, Sandbox: config.SandboxRef{Name: "sandbox"}}
	switch {
	case e.h != nil:
		c.Hosts = []config.Host{*e.h}
	case e.passthrough:
		c.Passthrough = []string{host}
	}
	return policy.NewPolicy(c)
}

// outcome reads a decision, and the credential the policy injects with
// it.
func outcome(p *policy.Policy, d policy.Decision) Outcome {
	o := Outcome{Action: d.Action}
	switch d.Action {
	case policy.ActionRefuse:
		o.Reason = d.Reason
	case policy.ActionInject:
		o.Connection = d.Connection
		if h := p.Host(d.Host); h != nil {
			o.Credential = describeCredential(h.Inject)
		}
	}
	return o
}

// compareHost decides every class of request to host on both entries
// and keeps the witnesses.
func compareHost(host string, b, h entry) hostAccess {
	pb, err := hostPolicy(host, b)
	if err != nil {
		return hostAccess{undecided: fmt.Sprintf("host %s: the base's entry does not compile: %v", host, err)}
	}
	ph, err := hostPolicy(host, h)
	if err != nil {
		return hostAccess{undecided: fmt.Sprintf("host %s: the head's entry does not compile: %v", host, err)}
	}
	var rules []config.Rule
	for _, e := range []entry{b, h} {
		if e.h != nil {
			rules = append(rules, e.h.Rules...)
		}
	}
	reqs, why := requestClasses(rules)
	if why != "" {
		return hostAccess{undecided: fmt.Sprintf("host %s: %s", host, why)}
	}
	var ha hostAccess
	var gained, lost []found
	// The proxy decides a plain http:// request by its host alone
	// (forwarded to a passthrough host, refused elsewhere: credentials go
	// only over HTTPS), so one such request stands for them all.
	plain := []request{{method: "GET", path: "/"}}
	for _, try := range []struct {
		scheme string
		reqs   []request
	}{{"https", reqs}, {"http", plain}} {
		scheme := try.scheme
		for _, r := range try.reqs {
			url := scheme + "://" + host + r.path
			ob := outcome(pb, pb.DecideURL(r.method, url, r.body))
			oh := outcome(ph, ph.DecideURL(r.method, url, r.body))
			if ob == oh || ob.Allowed() == oh.Allowed() && ob.Credential == oh.Credential {
				continue // the same decision, or the same credential under another Connection's name
			}
			w := Witness{Method: r.method, URL: url, Body: string(r.body), Base: ob, Head: oh}
			switch {
			case !ob.Allowed() || oh.Credential != "" && oh.Credential != ob.Credential:
				// Newly allowed, or a credential it did not carry.
				w.Rule = matchingRule(h, r)
				gained = append(gained, found{w: w, r: r, scheme: scheme, cause: "gain:" + scheme + ":" + w.Rule + ":" + boolWord(!ob.Allowed())})
			default:
				// Newly refused, or no longer carries its credential.
				w.Rule = matchingRule(b, r)
				lost = append(lost, found{w: w, r: r, scheme: scheme, cause: "lose:" + scheme + ":" + w.Rule + ":" + boolWord(!oh.Allowed())})
			}
		}
	}
	ha.gains, ha.loses = len(gained) > 0, len(lost) > 0
	ha.widened, ha.narrowed = smallest(gained), smallest(lost)
	return ha
}

func boolWord(b bool) string { return strconv.FormatBool(b) }

// matchingRule names the first rule of e that the proxy matches r with,
// as the reports write rules; "" when e has no rules.
func matchingRule(e entry, r request) string {
	if e.h == nil {
		return ""
	}
	for _, rule := range e.h.Rules {
		if policy.MatchRule(rule, r.method, r.path, policy.Body{Data: r.body, Complete: true, ContentType: []string{"application/json"}}) {
			return DescribeRule(rule)
		}
	}
	return ""
}

// found is a differing request with what picks witnesses among them.
type found struct {
	w      Witness
	r      request
	scheme string
	cause  string
}

// smallest picks witnesses: the smallest request of each distinct cause
// first, then the smallest of the rest, witnessesPerHost in all, given
// smallest first.
func smallest(fs []found) []Witness {
	slices.SortFunc(fs, func(a, b found) int {
		return cmp.Or(cmp.Compare(schemeRank(a.scheme), schemeRank(b.scheme)), a.r.compare(b.r))
	})
	var picked []int
	causes := map[string]bool{}
	for i, f := range fs {
		if len(picked) < witnessesPerHost && !causes[f.cause] {
			causes[f.cause] = true
			picked = append(picked, i)
		}
	}
	for i := range fs {
		if len(picked) < witnessesPerHost && !slices.Contains(picked, i) {
			picked = append(picked, i)
		}
	}
	slices.Sort(picked)
	out := make([]Witness, 0, len(picked))
	for _, i := range picked {
		out = append(out, fs[i].w)
	}
	return out
}

func schemeRank(s string) int {
	if s == "https" {
		return 0
	}
	return 1
}

// request is one representative request: a method, a path and a body.
type request struct {
	method string
	path   string
	body   []byte
}

// compare orders requests smallest first: fewer path segments, a shorter
// path, a more common method, a shorter body.
func (r request) compare(o request) int {
	return cmp.Or(
		cmp.Compare(strings.Count(r.path, "/"), strings.Count(o.path, "/")),
		cmp.Compare(len(r.path), len(o.path)),
		strings.Compare(r.path, o.path),
		cmp.Compare(methodRank(r.method), methodRank(o.method)),
		strings.Compare(r.method, o.method),
		cmp.Compare(len(r.body), len(o.body)),
		strings.Compare(string(r.body), string(o.body)),
	)
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

// requestClasses returns one request per class of requests that rules
// (the host's rules on both sides) cannot tell apart: two requests in one
// class match exactly the same rules. A rule matches a product of a
// method set, a path set and a body set, so the classes are the product
// of the classes of each: the methods the rules name and one they do
// not; the paths of pathClasses; the bodies of bodyClasses. why is set
// when the classes exceed the comparison's bounds.
func requestClasses(rules []config.Rule) (reqs []request, why string) {
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
		return nil, fmt.Sprintf("its rules' paths fall into more than %d classes to compare", maxPaths)
	}
	bodies, ok := bodyClasses(rules)
	if !ok {
		return nil, fmt.Sprintf("its rules' body conditions fall into more than %d classes to compare", maxBodies)
	}
	if n := len(ms) * len(paths) * len(bodies); n > maxRequests {
		return nil, fmt.Sprintf("its rules make %d classes of requests to compare, more than %d", n, maxRequests)
	}
	for _, p := range paths {
		for _, m := range ms {
			for _, b := range bodies {
				reqs = append(reqs, request{method: m, path: p, body: b})
			}
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
		for _, p := range r.PathPrefixes {
			out = append(out, pathSpec{segs: split(p)})
		}
		for _, p := range r.PathPatterns {
			segs := split(p)
			if n := len(segs); n > 0 && segs[n-1] == "**" {
				out = append(out, pathSpec{segs: segs[:n-1], more: true})
				continue
			}
			out = append(out, pathSpec{segs: segs, exact: true})
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
// longer one. ok is false past maxPaths.
func pathClasses(rules []config.Rule) (paths []string, ok bool) {
	var walk func(prefix []string, alive []pathSpec) bool
	walk = func(prefix []string, alive []pathSpec) bool {
		if len(paths) >= maxPaths {
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
		other := fresh([]string{"other", "x", "y"}, lits, "other")
		if len(next) == 0 {
			if longer {
				if len(paths) >= maxPaths {
					return false
				}
				paths = append(paths, "/"+strings.Join(append(slices.Clone(prefix), other), "/"))
			}
			return true
		}
		for _, lit := range slices.Sorted(maps.Keys(lits)) {
			var keep []pathSpec
			for _, s := range next {
				if s.segs[d] == "*" || s.segs[d] == lit {
					keep = append(keep, s)
				}
			}
			if !walk(append(slices.Clone(prefix), lit), keep) {
				return false
			}
		}
		var keep []pathSpec
		for _, s := range next {
			if s.segs[d] == "*" {
				keep = append(keep, s)
			}
		}
		return walk(append(slices.Clone(prefix), other), keep)
	}
	ok = walk(nil, pathSpecs(rules))
	return paths, ok
}

// bodyClasses returns one body per class of bodies the rules' body
// conditions cannot tell apart: per field the JSON conditions name
// (spelled exactly, as the proxy matches them: docs/proxy.md#body-rules),
// one of the values named or none of them (the field left out, which
// fails every condition on it as any other value would); and, where a
// rule has a GraphQL condition, the GraphQL requests of graphQLClasses.
// No body stands for the bodies that fail every condition. ok is false
// past maxBodies.
func bodyClasses(rules []config.Rule) (bodies [][]byte, ok bool) {
	bodies, ok = jsonBodyClasses(rules)
	if !ok {
		return nil, false
	}
	gql, ok := graphQLClasses(rules)
	if !ok || len(bodies)+len(gql) > maxBodies {
		return nil, false
	}
	return append(bodies, gql...), true
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
		if n > maxBodies {
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

// Verdicts counts the sandboxes of r.Sandboxes by verdict.
func (r Result) Verdicts() map[Verdict]int {
	out := map[Verdict]int{}
	for _, s := range r.Sandboxes {
		out[s.Verdict]++
	}
	return out
}

// AccessCounts is how many sandboxes got each verdict, for the JSON
// report.
type AccessCounts struct {
	Widened   int `json:"widened"`
	Changed   int `json:"changed"`
	Undecided int `json:"undecided"`
	Narrowed  int `json:"narrowed"`
	Unchanged int `json:"unchanged"`
}

func accessCounts(r Result) AccessCounts {
	v := r.Verdicts()
	return AccessCounts{
		Widened: v[VerdictWidened], Changed: v[VerdictChanged], Undecided: v[VerdictUndecided],
		Narrowed: v[VerdictNarrowed], Unchanged: v[VerdictUnchanged],
	}
}

// The gates --fail-on names: which verdicts fail a CI job.
const (
	// GateWidened trips on a sandbox that may be allowed something new:
	// widened, changed or undecided.
	GateWidened = "widened"
	// GateNarrowed trips on a sandbox that may be refused something it
	// was allowed: narrowed, changed or undecided.
	GateNarrowed = "narrowed"
	// GateAny trips on any sandbox whose access is not unchanged.
	GateAny = "any"
)

// Gates lists the gates.
func Gates() []string { return []string{GateWidened, GateNarrowed, GateAny} }

// Tripped returns the sandboxes whose verdict one of gates fails on, in
// r's order.
func (r Result) Tripped(gates []string) []SandboxChange {
	var out []SandboxChange
	for _, s := range r.Sandboxes {
		for _, g := range gates {
			if g == GateWidened && s.Verdict.MayWiden() || g == GateNarrowed && s.Verdict.MayNarrow() || g == GateAny && s.Verdict != VerdictUnchanged {
				out = append(out, s)
				break
			}
		}
	}
	return out
}
