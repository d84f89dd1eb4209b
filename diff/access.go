package diff

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"keyhole.dev/keyhole/access"
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
	// Address, when set, is the address the request's host resolves to
	// as the proxy dials it: an internal one (the cloud metadata
	// service's) that one side's proxy dials for the host
	// (a Connection's spec.allowInternalAddresses) and the other's
	// refuses.
	Address string `json:"address,omitempty"`
}

// Request is the witness's request on one line: METHOD URL [body]
// [at ADDRESS].
func (w Witness) Request() string {
	out := w.Method + " " + w.URL
	if w.Body != "" {
		out += " " + w.Body
	}
	if w.Address != "" {
		out += " at " + w.Address + " (" + string(policy.ClassifyAddr(netip.MustParseAddr(w.Address))) + ")"
	}
	return out
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
	// WebSocket is set when the request is a WebSocket handshake the
	// proxy upgrades.
	WebSocket bool `json:"websocket,omitempty"`
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
	case policy.ActionAudit:
		return "forwarded without the credential (audit mode: the rules refuse it)"
	case policy.ActionInject:
		if o.WebSocket {
			return "allowed with " + o.Credential + ", upgraded to a WebSocket"
		}
		return "allowed with " + o.Credential
	}
	return string(o.Action)
}

// witnessesPerHost bounds the witnesses reported; the comparison's bounds
// on classes are access.MaxPaths, MaxBodies and MaxRequests.
const (
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
	// A host whose internal addresses one side's proxy dials and the
	// other's refuses (internalHosts, from a Connection's
	// spec.allowInternalAddresses) lets the sandbox reach, through a name
	// that resolves there, the metadata service, the node and the pods.
	if w, ok := internalWitness(pb, ph, base, head); ok {
		gains, a.Widened = true, append(a.Widened, w...)
	}
	if w, ok := internalWitness(ph, pb, head, base); ok {
		loses = true
		for i := range w {
			w[i].Base, w[i].Head = w[i].Head, w[i].Base
		}
		a.Narrowed = append(a.Narrowed, w...)
	}
	// Each witness was found on one host's entries alone; decide it
	// again on the whole plans, as the proxy would serve them.
	for _, ws := range [][]Witness{a.Widened, a.Narrowed} {
		for _, w := range ws {
			gotB, gotH := decideWitness(pb, w), decideWitness(ph, w)
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

// internalAddr is the address an internal-address witness's host
// resolves to: the cloud metadata service, the first thing a sandbox
// allowed internal addresses reaches for.
var internalAddr = netip.MustParseAddr("169.254.169.254")

// internalWitness finds, for each host that to's config lets the proxy
// dial at internal addresses and from's does not, the smallest request to
// it that to allows there, as a witness from from to to (Base from's
// decision, Head to's). ok is false when there is none.
func internalWitness(pFrom, pTo *policy.Policy, from, to *config.Config) ([]Witness, bool) {
	if to == nil {
		return nil, false
	}
	var had []string
	if from != nil {
		had = from.InternalHosts
	}
	toEntries := entries(to)
	var out []Witness
	for _, host := range to.InternalHosts {
		if slices.Contains(had, host) {
			continue
		}
		e := toEntries[host]
		var reqs []request
		switch {
		case e.h != nil:
			reqs, _ = access.Classes(e.h.Rules)
			slices.SortFunc(reqs, request.Compare)
		case e.passthrough:
			reqs = []request{{Method: "GET", Path: "/"}}
		}
		for _, r := range reqs {
			if r.WebSocket {
				continue // decided as the GET it also is
			}
			w := Witness{Method: r.Method, URL: "https://" + host + r.Path, Body: string(r.Body), Address: internalAddr.String()}
			got := decideWitness(pTo, w)
			if !got.Allowed() {
				continue
			}
			w.Base, w.Head, w.Rule = decideWitness(pFrom, w), got, matchingRule(e, r)
			out = append(out, w)
			break
		}
	}
	return out, len(out) > 0
}

// decideWitness is the proxy's decision on w: by its URL, then, for a
// witness at an address, on dialling that address for its host.
func decideWitness(p *policy.Policy, w Witness) Outcome {
	d := p.DecideURL(w.Method, w.URL, []byte(w.Body))
	if w.Address != "" && d.Action != policy.ActionRefuse {
		if dial, _ := p.DecideDial(d.Host, netip.MustParseAddr(w.Address)); dial.Action == policy.ActionRefuse {
			d = dial
		}
	}
	return outcome(p, d)
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
		// The token endpoint the entry's injection dials is a host the
		// config must list; what the entry decides does not depend on it.
		if th := e.h.Inject.TokenHost(); th != "" && th != host {
			c.Passthrough = []string{th}
		}
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
		o.Connection, o.WebSocket = d.Connection, d.WebSocket
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
	reqs, why := access.Classes(rules)
	if why != "" {
		return hostAccess{undecided: fmt.Sprintf("host %s: %s", host, why)}
	}
	var ha hostAccess
	var gained, lost []found
	// The proxy decides a plain http:// request by its host alone
	// (forwarded to a passthrough host, refused elsewhere: credentials go
	// only over HTTPS), so one such request stands for them all.
	plain := []request{{Method: "GET", Path: "/"}}
	for _, try := range []struct {
		scheme string
		reqs   []request
	}{{"https", reqs}, {"http", plain}} {
		scheme := try.scheme
		for _, r := range try.reqs {
			url := r.Scheme(scheme) + "://" + host + r.Path
			ob := outcome(pb, pb.DecideURL(r.Method, url, r.Body))
			oh := outcome(ph, ph.DecideURL(r.Method, url, r.Body))
			if ob == oh || ob.Allowed() == oh.Allowed() && ob.Credential == oh.Credential && ob.WebSocket == oh.WebSocket {
				continue // the same decision, or the same credential under another Connection's name
			}
			w := Witness{Method: r.Method, URL: url, Body: string(r.Body), Base: ob, Head: oh}
			switch {
			case ob.Allowed() && oh.Allowed() && mintedNarrower(b, h) && !(oh.WebSocket && !ob.WebSocket):
				// The same App's token, minted with less scope.
				w.Rule = matchingRule(b, r)
				lost = append(lost, found{w: w, r: r, scheme: scheme, cause: "lose:" + scheme + ":" + w.Rule + ":scope"})
			case !ob.Allowed() || oh.Credential != "" && oh.Credential != ob.Credential || oh.WebSocket && !ob.WebSocket:
				// Newly allowed, a credential it did not carry, or
				// newly upgraded to a WebSocket.
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

// mintedNarrower reports whether both entries inject a token the same
// GitHub App, OAuth 2.0 client or service account mints and the head's
// scope is within the base's: a wider scope is a credential the base did
// not carry, a narrower one is not.
func mintedNarrower(b, h entry) bool {
	if b.h == nil || h.h == nil {
		return false
	}
	bi, hi := b.h.Inject, h.h.Inject
	if bi.Secret != hi.Secret {
		return false
	}
	switch {
	case bi.GitHubApp != nil && hi.GitHubApp != nil:
		return bi.GitHubApp.SameApp(hi.GitHubApp) && bi.GitHubApp.Covers(hi.GitHubApp)
	case bi.OAuth2 != nil && hi.OAuth2 != nil:
		return bi.OAuth2.SameClient(hi.OAuth2) && bi.OAuth2.Covers(hi.OAuth2)
	case bi.Google != nil && hi.Google != nil:
		return bi.Google.SameAccount(hi.Google) && bi.Google.Covers(hi.Google)
	}
	return false
}

func boolWord(b bool) string { return strconv.FormatBool(b) }

// matchingRule names the first rule of e that the proxy matches r with,
// as the reports write rules; "" when e has no rules.
func matchingRule(e entry, r request) string {
	if e.h == nil {
		return ""
	}
	for _, rule := range e.h.Rules {
		if policy.RuleAllows(rule, r.Method, r.Path, policy.Body{Data: r.Body, Complete: true, ContentType: []string{"application/json"}}) && (!r.WebSocket || rule.WebSocket) {
			return DescribeRule(rule)
		}
	}
	return ""
}

// request is one representative request of a class.
type request = access.Request

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
		return cmp.Or(cmp.Compare(schemeRank(a.scheme), schemeRank(b.scheme)), a.r.Compare(b.r))
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
