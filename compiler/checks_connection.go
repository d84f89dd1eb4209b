package compiler

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// Codes of the Connection shape checks: what the schema cannot say about
// how inject entries, hosts and rules fit together.
const (
	codeInjectHostUnlisted   = "ConnectionInjectHostUnlisted"
	codeHostInjectedTwice    = "ConnectionHostInjectedTwice"
	codeHostNotInjected      = "ConnectionHostNotInjected"
	codeInjectFormInvalid    = "ConnectionInjectFormInvalid"
	codeMethodInvalid        = "ConnectionMethodInvalid"
	codePathPrefixInvalid    = "ConnectionPathPrefixInvalid"
	codeRuleShadowed         = "ConnectionRuleShadowed"
	codePlaceholderReserved  = "ConnectionPlaceholderEnvReserved"
	codeHostUnsupported      = "ConnectionHostUnsupported"
	codeHostMisspelled       = "ConnectionHostMisspelled"
	codeBasicUnencoded       = "ConnectionBasicUnencoded"
	codeSecretCrossNamespace = "ConnectionSecretCrossNamespace"
	codeMethodNeverForwarded = "ConnectionMethodNeverForwarded"
	codeHeaderForbidden      = "ConnectionHeaderForbidden"
	codeInjectUnrestricted   = "ConnectionInjectUnrestricted"
)

// ProxyEnvNames returns the variables the renderer sets in every sandbox
// to send its traffic through the proxy. A placeholderEnv may not take
// their names.
func ProxyEnvNames() []string {
	return []string{"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "no_proxy", "all_proxy"}
}

// CABundleEnvNames returns the variables the renderer sets in every
// sandbox to point the common clients at the sandbox's bundle.pem, which
// holds the system roots too, so a variable that replaces a client's own
// roots (rather than adding to them) loses nothing. docs/render.md has the
// table of runtimes and what each reads. A placeholderEnv may not take
// their names.
func CABundleEnvNames() []string {
	return []string{
		"AWS_CA_BUNDLE",                      // AWS CLI and SDKs
		"CARGO_HTTP_CAINFO",                  // cargo
		"CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", // gcloud
		"CURL_CA_BUNDLE",                     // curl, and Python requests after REQUESTS_CA_BUNDLE
		"DENO_CERT",                          // Deno
		"GIT_SSL_CAINFO",                     // git
		"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",   // gRPC C core (Python, Ruby, PHP, C++)
		"NODE_EXTRA_CA_CERTS",                // Node.js, Bun
		"NPM_CONFIG_CAFILE",                  // npm, over an image's npmrc cafile
		"REQUESTS_CA_BUNDLE",                 // Python requests, pip
		"SSL_CERT_FILE",                      // OpenSSL (Python ssl, httpx, aiohttp, Ruby, PHP, .NET, Rust native-tls), Go, rustls-native-certs
	}
}

// ToolEnvNames returns the other variables the renderer sets in every
// sandbox for runtimes that read neither the proxy nor the CA-bundle
// variables (Java's JAVA_TOOL_OPTIONS, wget's WGETRC, Node's opt-in to
// HTTPS_PROXY, PHP's extra ini directory). A placeholderEnv may not take
// their names.
func ToolEnvNames() []string {
	return []string{"JAVA_TOOL_OPTIONS", "NODE_USE_ENV_PROXY", "PHP_INI_SCAN_DIR", "WGETRC"}
}

// ReservedEnvNames returns every variable name a placeholder may not
// take: the proxy, CA-bundle and tool variables the renderer sets.
func ReservedEnvNames() []string {
	return slices.Concat(ProxyEnvNames(), CABundleEnvNames(), ToolEnvNames())
}

// reservedEnvNames is ReservedEnvNames built once, for the checks that
// look each placeholder up in it and never change it.
var reservedEnvNames = sync.OnceValue(ReservedEnvNames)

// rfc9110Methods returns the methods of RFC 9110 section 9 plus PATCH
// (RFC 5789), which the APIs keyhole fronts use.
func rfc9110Methods() []string {
	return []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace, http.MethodPatch}
}

// unsupportedHost is a host the proxy cannot inject for, and why.
type unsupportedHost struct {
	suffix string
	why    string
}

// unsupportedHosts lists hosts known to need what a header cannot carry.
// Matching is by DNS suffix.
func unsupportedHosts() []unsupportedHost {
	return []unsupportedHost{
		{".amazonaws.com", "AWS APIs sign each request (SigV4), which cannot be injected"},
		{".amazonaws.com.cn", "AWS APIs sign each request (SigV4), which cannot be injected"},
		{".api.aws", "AWS APIs sign each request (SigV4), which cannot be injected"},
	}
}

func hostUnsupported(h string) (string, bool) {
	for _, u := range unsupportedHosts() {
		if strings.HasSuffix("."+h, u.suffix) {
			return u.why, true
		}
	}
	return "", false
}

// HTTP2OnlyHost reports a host known to speak only HTTP/2: a gRPC
// endpoint (a grpc. host, or one under grpc.io). keyhole's own proxy
// speaks HTTP/2 to the sandbox and to such a host; the omnia operator's
// proxy speaks HTTP/1.1 to the sandbox, so its target refuses one.
func HTTP2OnlyHost(h string) bool {
	return strings.HasPrefix(h, "grpc.") || strings.HasSuffix("."+h, ".grpc.io")
}

func checkInjectHosts(p *pass) {
	for _, c := range p.connList {
		w := c.w
		covered := map[string][]int{}
		for i, in := range w.Spec.Placement.Inject {
			for j, h := range in.Hosts {
				// Built only to report: most hosts are fine.
				at := func() path { return path{"spec", "placement", "inject", i, "hosts", j} }
				if !slices.Contains(w.Spec.Hosts, h) {
					p.report(codeInjectHostUnlisted, &c.item, at(), false,
						"inject entry %d covers %s, which spec.hosts does not list; add it to spec.hosts or remove it here", i, h)
				}
				if slices.Contains(covered[h], i) {
					p.report(codeHostInjectedTwice, &c.item, at(), false, "%s is listed twice in this entry; remove the repeat", h)
					continue
				}
				for _, k := range covered[h] {
					if why := splitAmbiguous(w.Spec.Credential.Kind, &w.Spec.Placement.Inject[k], &in, k); why != "" {
						p.report(codeHostInjectedTwice, &c.item, at(), false,
							"%s is also covered by inject entry %d, which sets the credential another way, and %s: the proxy cannot tell which form such a request takes; give each entry rules that split the host's paths (git's smart-HTTP paths one form, the API another), or merge the entries", h, k, why)
						break
					}
				}
				covered[h] = append(covered[h], i)
			}
		}
		for j, h := range w.Spec.Hosts {
			if _, ok := covered[h]; !ok && len(w.Spec.Placement.Inject) > 0 && h != w.tokenHost() {
				p.report(codeHostNotInjected, &c.item, path{"spec", "hosts", j}, false,
					"no inject entry covers %s: the sandbox reaches it through the proxy but without the credential; add it to an entry's hosts if it needs one", h)
			}
			if why, ok := hostUnsupported(h); ok && !(w.awsSigV4() != nil && isAWSHost(h)) {
				p.report(codeHostUnsupported, &c.item, path{"spec", "hosts", j}, false,
					"%s cannot take an injected credential: %s; place that credential with env or files instead", h, why)
			}
		}
	}
}

// splitAmbiguous says why entry b, beside entry k (a) on one host, leaves
// a request two forms, or "" when it does not: the two set the credential
// alike, or no request is allowed by a rule of each.
func splitAmbiguous(kind string, a, b *injectWire, k int) string {
	fa, fb := injectForm(kind, a), injectForm(kind, b)
	if fa == fb || fa == "" || fb == "" {
		return ""
	}
	switch {
	case len(a.Rules) == 0:
		return fmt.Sprintf("entry %d has no rules, so every request to the host takes both forms", k)
	case len(b.Rules) == 0:
		return "this entry has no rules, so every request to the host takes both forms"
	}
	for r, x := range b.Rules {
		for o, y := range a.Rules {
			if m, p, ok := rulesOverlap(x, y); ok {
				return fmt.Sprintf("rule %d here and rule %d there both allow %s %s", r, o, m, p)
			}
		}
	}
	return ""
}

// checkForbiddenHeaders reports an inject entry whose header is one the
// proxy never sets (Host, Content-Length, Proxy-Authorization, ...): the
// proxy refuses a config that names one, so render refuses the plan.
func checkForbiddenHeaders(p *pass) {
	for _, c := range p.connList {
		for i, in := range c.w.Spec.Placement.Inject {
			if in.Header != "" && config.HeaderForbidden(in.Header) {
				p.report(codeHeaderForbidden, &c.item, path{"spec", "placement", "inject", i, "header"}, false,
					"inject entry %d sets %s, which the proxy never injects: it frames the request or is hop-by-hop, so the proxy would refuse its config; put the credential in the header the API reads, e.g. Authorization", i, in.Header)
			}
		}
	}
}

func checkInjectForm(p *pass) {
	for _, c := range p.connList {
		if proxyOnlyCredential(c.w.Spec.Credential.Kind) {
			continue // the proxy sets the credential; checkGitHubApps, checkAWSSigV4 and checkTokenCredentials
		}
		for i, in := range c.w.Spec.Placement.Inject {
			at := path{"spec", "placement", "inject", i}
			hasValue := in.Value != nil
			switch {
			case in.Basic != nil && hasValue:
				p.report(codeInjectFormInvalid, &c.item, at.with("basic"), true,
					"inject entry %d has both value and basic; an entry sets a header from a value template or sets basic auth, not both", i)
			case in.Basic != nil && in.Header != "" && !strings.EqualFold(in.Header, "Authorization"):
				p.report(codeInjectFormInvalid, &c.item, at.with("header"), false,
					"inject entry %d uses basic auth, which goes only in the Authorization header, not %s; drop header or set it to Authorization", i, in.Header)
			case in.Basic == nil && !hasValue:
				p.report(codeInjectFormInvalid, &c.item, at, false,
					"inject entry %d sets nothing: give it header and value (e.g. Authorization: \"Bearer {{ .token }}\") or basic with usernameKey and passwordKey", i)
			case hasValue && in.Header == "":
				p.report(codeInjectFormInvalid, &c.item, at.with("value"), true,
					"inject entry %d has a value but no header to put it in; add header, e.g. Authorization", i)
			}
		}
	}
}

func checkRules(p *pass) {
	for _, c := range p.connList {
		for i, in := range c.w.Spec.Placement.Inject {
			for r, rule := range in.Rules {
				at := path{"spec", "placement", "inject", i, "rules", r}
				seen := map[string]bool{}
				for m, method := range rule.Methods {
					switch {
					case !slices.Contains(rfc9110Methods(), method):
						p.report(codeMethodInvalid, &c.item, at.with("methods", m), false,
							"%q is not an HTTP method of RFC 9110; want one of %s", clip(method), strings.Join(rfc9110Methods(), ", "))
					case seen[method]:
						p.report(codeMethodInvalid, &c.item, at.with("methods", m), false, "%s is listed twice in this rule; remove the repeat", method)
					}
					seen[method] = true
				}
				for x, prefix := range rule.PathPrefixes {
					if why := prefixProblem(prefix, rule.EncodedSlash); why != "" {
						p.report(codePathPrefixInvalid, &c.item, at.with("pathPrefixes", x), false, "path prefix %q %s", clip(prefix), why)
					}
				}
				for x, pattern := range rule.PathPatterns {
					if err := config.CheckRulePath(pattern, true, rule.EncodedSlash); err != nil {
						p.report(codePathPrefixInvalid, &c.item, at.with("pathPatterns", x), false, "path pattern %q is refused by the proxy: %v", clip(pattern), err)
					}
				}
				if rule.WebSocket && !slices.Contains(rule.Methods, http.MethodGet) {
					p.report(codeMethodInvalid, &c.item, at.with("websocket"), false,
						"rule %d sets websocket: true but does not list GET: a WebSocket handshake is a GET, so the rule upgrades nothing and the proxy refuses the config; add GET to its methods", r)
				}
				if len(rule.PathPrefixes) == 0 && len(rule.PathPatterns) == 0 {
					p.report(codePathPrefixInvalid, &c.item, at.with("methods"), true,
						"rule %d names no path: give pathPrefixes (\"/\" for every path) or pathPatterns", r)
				}
			}
			checkShadowed(p, c, i, in.Rules)
		}
	}
}

// checkUnrestricted warns about an inject entry without rules, of a
// Connection a sandbox binding uses: every method on every path of its
// hosts carries the credential (git push, a DELETE), which a reviewer
// reading the Connection may not see. An agent.yaml connector takes its
// hosts and rules from the catalog, not from the Connection's entries, so
// a Connection only agents use is not warned about.
func checkUnrestricted(p *pass) {
	bound := map[*connection]bool{}
	for _, o := range p.owners {
		sb := o.w.Spec.Sandbox
		if sb.Enabled != nil && !*sb.Enabled {
			continue
		}
		for _, b := range sb.Connections {
			if c := p.conns.get(ref{o.ns, b.Connection}); c != nil {
				bound[c] = true
			}
		}
	}
	for _, c := range p.connList {
		if !bound[c] {
			continue
		}
		for i, in := range c.w.Spec.Placement.Inject {
			if len(in.Rules) == 0 && len(in.Hosts) > 0 {
				p.report(codeInjectUnrestricted, &c.item, path{"spec", "placement", "inject", i}, false,
					"inject entry %d has no rules: every method on every path of %s carries the credential (a git push, a DELETE); list the methods and path prefixes the sandbox needs in rules",
					i, strings.Join(in.Hosts, ", "))
			}
		}
	}
}

// checkNeverForwarded warns about a rule that names a method the proxy
// never forwards with a credential, whatever the rules say (TRACE echoes
// the request, the credential included; CONNECT opens a tunnel no rule
// checks): the rule allows less than it reads as allowing.
func checkNeverForwarded(p *pass) {
	for _, c := range p.connList {
		for i, in := range c.w.Spec.Placement.Inject {
			for r, rule := range in.Rules {
				for m, method := range rule.Methods {
					if why, never := neverForwarded(method); never && slices.Contains(rfc9110Methods(), method) {
						p.report(codeMethodNeverForwarded, &c.item, path{"spec", "placement", "inject", i, "rules", r, "methods", m}, false,
							"the proxy never forwards %s to an injected host, whatever the rules allow (its method policy: %s); remove it from the rule", method, why)
					}
				}
			}
		}
	}
}

// neverForwarded reports whether the proxy's method policy refuses
// method on injected hosts, and why.
func neverForwarded(method string) (string, bool) {
	for _, r := range policy.MethodPolicy() {
		if !r.Credential && strings.EqualFold(r.Method, method) {
			return r.Why, true
		}
	}
	return "", false
}

// prefixProblem says why a path prefix of a rule whose encodedSlash is
// encodedSlash cannot mean what it seems to, or "" when it is sound. The
// proxy matches prefixes against the path as sent and refuses these forms
// in requests rather than normalizing them, so a prefix holding one
// could never match, or would match other than intended.
func prefixProblem(prefix, encodedSlash string) string {
	if encodedSlash == config.EncodedSlashSegment && config.HasEncodedSlash(prefix) {
		// The proxy's own check knows the pieces an encoded '/'
		// delimits; what it accepts is sound.
		if err := config.CheckRulePath(prefix, false, encodedSlash); err != nil {
			return "is refused by the proxy: " + err.Error()
		}
		return ""
	}
	switch {
	case !strings.HasPrefix(prefix, "/"):
		return "does not start with /"
	case strings.ContainsAny(prefix, "?"):
		return "holds a query (?); a prefix matches the path only"
	case strings.ContainsAny(prefix, "#"):
		return "holds a fragment (#), which is never sent"
	case strings.Contains(strings.ToUpper(prefix), "%2F"):
		return "holds an encoded / (%2F), which a rule names only with encodedSlash: segment: add it to the rule where the upstream reads %2F as part of a name (npm's /@acme%2fwidgets, GitLab's /api/v4/projects/acme%2Fwidgets), or write the segments plainly; without it, a request's %2F is allowed where a rule allows it both as sent and read as /"
	case strings.Contains(strings.ToUpper(prefix), "%5C"):
		return "holds an encoded \\ (%5C), which the proxy refuses in a rule and in requests"
	case strings.ContainsAny(prefix, ";"):
		return "holds a ; parameter, which the proxy refuses in requests"
	case strings.IndexFunc(prefix, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return "holds a control character"
	case strings.Contains(prefix, "*"):
		return "holds *, which a prefix matches only literally (the proxy refuses it); write the literal path above what varies, which also matches everything under it"
	case strings.Contains(prefix, "%"):
		return "holds a percent-encoding, which the proxy refuses in a rule: it matches the path as sent; write the path literally"
	case strings.Contains(prefix, "\\"):
		return "holds a backslash, which the proxy refuses in requests"
	case strings.IndexFunc(prefix, func(r rune) bool { return r > 0x7e || r == ' ' }) >= 0:
		return "holds a space or a character outside ASCII, which the proxy refuses in a rule: a request sends it percent-encoded"
	}
	if prefix == "/" {
		return ""
	}
	if strings.HasSuffix(prefix, "/") {
		return fmt.Sprintf("ends with /: prefixes match whole segments, so write %q, which also matches everything under it", strings.TrimRight(prefix, "/"))
	}
	for _, seg := range strings.Split(prefix[1:], "/") {
		switch seg {
		case "":
			return "has an empty segment (//), which the proxy refuses in requests"
		case ".", "..":
			return "has a dot segment (. or ..), which the proxy refuses in requests"
		}
	}
	// Whatever else the proxy's loader refuses, render would refuse.
	if err := config.CheckPathPrefix(prefix); err != nil {
		return "is refused by the proxy: " + err.Error()
	}
	return ""
}

// checkShadowed warns about a rule that allows nothing another rule of
// the same entry does not already allow.
func checkShadowed(p *pass, c *connection, i int, rules []ruleWire) {
	for r, rule := range rules {
		for o, other := range rules {
			if o == r || !covers(other, rule) {
				continue
			}
			// Of two identical rules, only the later one is redundant.
			if covers(rule, other) && o > r {
				continue
			}
			p.report(codeRuleShadowed, &c.item, path{"spec", "placement", "inject", i, "rules", r}, false,
				"rule %d allows nothing that rule %d does not already allow; remove it or narrow rule %d", r, o, o)
			break
		}
	}
}

// covers reports whether every request rule b allows is allowed by a.
func covers(a, b ruleWire) bool {
	for _, m := range b.Methods {
		if !slices.Contains(a.Methods, m) {
			return false
		}
	}
	if b.WebSocket && !a.WebSocket {
		// b also lets a handshake upgrade, which a does not.
		return false
	}
	if a.EncodedSlash != b.EncodedSlash && (a.EncodedSlash != "" || !slices.Contains(a.PathPrefixes, "/")) {
		// The two read an encoded '/' apart: only "/" read both ways
		// holds every path whichever way b reads it.
		return false
	}
	if len(b.PathPrefixes)+len(b.PathPatterns) == 0 || len(a.PathPrefixes)+len(a.PathPatterns) == 0 {
		// A rule without paths is refused on its own; it covers and is
		// covered by nothing.
		return false
	}
	for _, bp := range b.PathPrefixes {
		if !slices.ContainsFunc(a.PathPrefixes, func(ap string) bool { return policy.MatchPrefix(ap, bp) }) {
			return false
		}
	}
	// A pattern is covered by the same pattern, or by a prefix of every
	// path; telling more of two patterns is not worth a false warning.
	for _, bq := range b.PathPatterns {
		if !slices.Contains(a.PathPatterns, bq) && !slices.Contains(a.PathPrefixes, "/") {
			return false
		}
	}
	return true
}

func checkPlaceholderEnv(p *pass) {
	for _, c := range p.connList {
		for i, in := range c.w.Spec.Placement.Inject {
			for j, name := range in.PlaceholderEnv {
				if slices.Contains(reservedEnvNames(), name) {
					p.report(codePlaceholderReserved, &c.item, path{"spec", "placement", "inject", i, "placeholderEnv", j}, false,
						"%s is set by keyhole in every sandbox (proxy, CA-bundle and tool variables); choose another name for the placeholder", name)
				}
			}
		}
	}
}

func checkSecretNamespace(p *pass) {
	for _, c := range p.connList {
		ns := c.w.Spec.Credential.SecretRef.Namespace
		if ns != "" && ns != c.ns {
			p.report(codeSecretCrossNamespace, &c.item, path{"spec", "credential", "secretRef", "namespace"}, false,
				"the Secret is in namespace %s but the Connection in %s; the proxy mounts Secrets from the sandbox's namespace only, so create the Secret in %s", ns, c.ns, c.ns)
		}
	}
}

// clip shortens a user value quoted in a message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:61] + "..."
}

// checkHostNearMiss warns of a Connection host a typo away from a host
// of the connector catalog or of another Connection: api.gihtub.com is
// someone else's, and the proxy would send it the credential. A host is
// near another when the two differ in one label only, of four letters or
// more, by one edit (a swap of two neighbouring letters counts one), or
// two in a label of eight letters or more. Labels that differ in a digit name regions and
// instances (us-east-1, us-east-2), not typos.
func checkHostNearMiss(p *pass) {
	type known struct {
		host  string
		whose func() string
	}
	var hosts []known
	for _, name := range slices.Sorted(maps.Keys(p.catalog)) {
		for _, h := range p.catalog[name].Hosts {
			hosts = append(hosts, known{h.Host, func() string { return "the " + name + " connector's" }})
		}
	}
	// Hosts a typo apart differ in one label: each host is indexed under
	// each of its labels blanked, so a host meets only those candidates,
	// and a repository of many Connections costs a few lookups each. A
	// label no typo can be (typoLabel) is not blanked: the numbered hosts
	// of many Connections (api-0001.example.com, api-0002...) would all
	// share one shape, and each host would meet every other.
	index := shapeIndex{}
	add := func(i int) { index.add(hosts[i].host, i) }
	for i := range hosts {
		add(i)
	}
	// Of two Connections a typo apart, the later is told: one finding
	// for one mistake, whichever of the two it is.
	for _, c := range p.connList {
		own := c.w.Spec.Hosts
		for j, h := range own {
			var near *known
			eachLabel(h, func(shape, label string) {
				for _, k := range index[shape] {
					if near == nil && hosts[k].host != h && !slices.Contains(own, hosts[k].host) && labelNear(label, hostLabel(hosts[k].host, h)) {
						near = &hosts[k]
					}
				}
			})
			if near != nil {
				p.report(codeHostMisspelled, &c.item, path{"spec", "hosts", j}, false,
					"%s is a typo away from %s, %s host: the proxy would send this Connection's credential to %s; did you mean %s?",
					h, near.host, near.whose(), h, near.host)
			}
		}
		for _, h := range own {
			hosts = append(hosts, known{h, func() string { return "Connection " + c.ref().String() + "'s" }})
			add(len(hosts) - 1)
		}
	}
}

// eachLabel calls f with host's shape with each label blanked, and that
// label, for each label that is a typoLabel: a shape of the others would
// meet no host labelNear finds, and is not made.
func eachLabel(host string, f func(shape, label string)) {
	start := 0
	for start <= len(host) {
		end := strings.IndexByte(host[start:], '.')
		if end < 0 {
			end = len(host)
		} else {
			end += start
		}
		if typoLabel(host[start:end]) {
			f(host[:start]+"\x00"+host[end:], host[start:end])
		}
		start = end + 1
	}
}

// shapeIndex holds hosts, by their number, under each shape of theirs
// (eachLabel).
type shapeIndex map[string][]int

// add indexes host as number i.
func (x shapeIndex) add(host string, i int) {
	eachLabel(host, func(shape, _ string) { x[shape] = append(x[shape], i) })
}

// typoLabel reports whether a label may be one of two labelNear finds
// a typo apart: four letters or more, and no digit (a, b and api, app
// are other names; us-east-1 and us-east-2 other regions).
func typoLabel(l string) bool {
	return len(l) >= 4 && !strings.ContainsAny(l, "0123456789")
}

// hostLabel is the label of a that differs from b, two hosts of one
// shape (eachLabel).
func hostLabel(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	i = strings.LastIndexByte(a[:i], '.') + 1
	j := strings.IndexByte(a[i:], '.')
	if j < 0 {
		return a[i:]
	}
	return a[i : i+j]
}

// labelNear reports whether two labels, the one place two hosts differ,
// are a typo apart: no digit in either, both of four letters or more, one
// edit apart, or two in labels of eight or more.
func labelNear(a, b string) bool {
	if a == b || !typoLabel(a) || !typoLabel(b) {
		return false
	}
	short := min(len(a), len(b))
	limit := 1
	if short >= 8 {
		limit = 2
	}
	return diag.Distance(a, b) <= limit
}

// basicRefs matches the key references of a value template.
var basicRefs = regexp.MustCompile(`\{\{[^}]*\}\}`)

// checkBasicUnencoded warns of a header value that writes Basic
// credentials in the clear, "Basic {{ .email }}:{{ .token }}": the
// scheme wants base64 of user:password, a template only joins text and
// keys, and the proxy sends the value as written, which the server
// refuses. A Secret key holding the encoded pair ("Basic {{ .auth }}")
// is fine; the basic field encodes a user and password itself.
func checkBasicUnencoded(p *pass) {
	for _, c := range p.connList {
		for i, in := range c.w.Spec.Placement.Inject {
			if in.Value == nil {
				continue
			}
			v := strings.TrimSpace(*in.Value)
			scheme, rest, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Basic") {
				continue
			}
			refs := basicRefs.FindAllString(rest, -1)
			if len(refs) > 1 || strings.Contains(basicRefs.ReplaceAllString(rest, ""), ":") {
				p.report(codeBasicUnencoded, &c.item, path{"spec", "placement", "inject", i, "value"}, false,
					"inject entry %d sends Basic credentials unencoded: the scheme wants base64 of user:password, which a value template cannot make, so the server refuses it; use basic with usernameKey and passwordKey (the proxy encodes them), or a Secret key that holds the encoded pair", i)
			}
		}
	}
}

// proxyHeldPlacements reports, under code, what a Connection whose Secret
// only the proxy reads (a GitHub App's key, an AWS key, an OAuth 2.0
// client's or a service account's credentials) sets that would inject
// something else, an inject entry's header, value or basic, or place the
// Secret in the sandbox, env or files. how says what the proxy sets
// itself, holds what the Secret holds, instead what to do in place of a
// placement.
func (p *pass) proxyHeldPlacements(code string, c *connection, how, holds, instead string) {
	w := c.w
	for i, in := range w.Spec.Placement.Inject {
		var set []string
		if in.Header != "" {
			set = append(set, "header")
		}
		if in.Value != nil {
			set = append(set, "value")
		}
		if in.Basic != nil {
			set = append(set, "basic")
		}
		if len(set) > 0 {
			p.report(code, &c.item, path{"spec", "placement", "inject", i, set[0]}, true,
				"inject entry %d sets %s, but %s; drop %s", i, strings.Join(set, " and "), how, strings.Join(set, " and "))
		}
	}
	for _, where := range []struct {
		name string
		set  present
	}{{"env", w.Spec.Placement.Env}, {"files", w.Spec.Placement.Files}} {
		if where.set {
			p.report(code, &c.item, path{"spec", "placement", where.name}, true,
				"placement.%s would put keys of Secret %s, which holds %s, in the sandbox; only the proxy may read it: drop %s and %s", where.name, w.Spec.Credential.SecretRef.Name, holds, where.name, instead)
		}
	}
}
