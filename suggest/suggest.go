package suggest

import (
	"cmp"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

	"keyhole.dev/keyhole/access"
	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diff"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
	"keyhole.dev/keyhole/source"
)

// Report is what suggest proposes for a log's refusals.
type Report struct {
	// Requests and Skipped are the log's counts (see Log).
	Requests int `json:"requests"`
	Refused  int `json:"refused"`
	Skipped  int `json:"skipped"`
	// Suggestions are one per group of refusals, in Groups' order.
	Suggestions []Suggestion `json:"suggestions"`
	// Patches are the edits of the fixes that stay under the ceiling,
	// one per file, sorted by file.
	Patches []Patch `json:"patches"`
}

// Suggestion is what suggest says about one group of refusals: a Fix,
// or NoFix saying why no rule edit allows them.
type Suggestion struct {
	Sandbox    string   `json:"sandbox"`
	Host       string   `json:"host"`
	Method     string   `json:"method"`
	Reason     string   `json:"reason"`
	Connection string   `json:"connection,omitempty"`
	Count      int      `json:"count"`
	Paths      []string `json:"paths"`
	Fix        *Fix     `json:"fix,omitempty"`
	NoFix      string   `json:"noFix,omitempty"`
	// Notes are about paths of the group the fix leaves out.
	Notes []string `json:"notes,omitempty"`
	// Tools are the MCP tools the refused requests called that the
	// fix adds to a rule's mcp condition.
	Tools []string `json:"tools,omitempty"`
}

// Fix is one rule edit and what it does.
type Fix struct {
	// File and Line are where the edit goes; Edit says what it does.
	File string `json:"file"`
	Line int    `json:"line"`
	Edit string `json:"edit"`
	// Prefixes are the path prefixes the edit allows; Merged names the
	// prefixes that cover several refused paths.
	Prefixes []string `json:"prefixes"`
	Merged   []Merge  `json:"merged,omitempty"`
	// Verdict and Widened are the access engine's comparison of the
	// sandbox's proxy config before and after the edit, as diff gives it.
	Verdict diff.Verdict   `json:"verdict"`
	Widened []diff.Witness `json:"widened,omitempty"`
	// Ceiling is the ceiling's verdict on the config after the edit:
	// under, above, unproven, or none when keyhole.yaml declares no
	// ceiling.
	Ceiling      string                `json:"ceiling"`
	AboveCeiling []diff.CeilingWitness `json:"aboveCeiling,omitempty"`
	// Warnings name what a reviewer may not see in the edit's paths:
	// that it lets code in the sandbox git push, or send GraphQL
	// mutations.
	Warnings []string `json:"warnings,omitempty"`
}

// CeilingNone says the inputs declare no ceiling.
const CeilingNone = "none"

// Patch is the edit of one file.
type Patch struct {
	File string `json:"file"`
	// Diff is the unified diff of the edit.
	Diff string `json:"diff"`
	// Text is the file after the edit, for --write.
	Text []byte `json:"-"`
}

// ReadFile reads a file the plans name, for its text.
type ReadFile func(name string) ([]byte, error)

// Suggest proposes, for each group of the log's refusals, the smallest
// edit of the units' Connection rules that allows what was refused, or
// why none does.
func Suggest(l *Log, units []compiler.Unit, read ReadFile) *Report {
	r := &Report{Requests: l.Requests, Refused: len(l.Refusals), Skipped: l.Skipped, Suggestions: []Suggestion{}, Patches: []Patch{}}
	var edits []edit
	for _, g := range l.Groups() {
		s := Suggestion{Sandbox: g.Sandbox, Host: g.Host, Method: g.Method, Reason: g.Reason, Connection: g.Connection, Count: g.Count, Paths: g.Paths}
		// An edit that would break the ceiling, or that the ceiling
		// cannot be proven for, is reported but left out of the patch:
		// writing it would make check fail.
		if e := suggest(&s, g, units, read); e != nil && (s.Fix.Ceiling == CeilingNone || s.Fix.Ceiling == diff.CeilingUnder) {
			edits = append(edits, *e)
		}
		r.Suggestions = append(r.Suggestions, s)
	}
	r.Patches = patches(edits, read)
	return r
}

func sandboxID(s compiler.Sandbox) string {
	if s.Namespace == "" {
		return s.Name
	}
	return s.Namespace + "/" + s.Name
}

// neverWithCredential reports whether the proxy never forwards method
// with a credential, in any letter case.
func neverWithCredential(method string) bool {
	for _, m := range policy.MethodPolicy() {
		if !m.Credential && strings.EqualFold(m.Method, method) {
			return true
		}
	}
	return false
}

func suggest(s *Suggestion, g Group, units []compiler.Unit, read ReadFile) *edit {
	switch policy.Reason(g.Reason) {
	case policy.ReasonHostMismatch:
		s.NoFix = "not a rule problem: the CONNECT target, TLS server name and Host header (or absolute-form target) named different hosts; the client or its proxy settings must name one host"
		return nil
	case policy.ReasonCredentialUnavailable:
		s.NoFix = "not a rule problem: the proxy could not read a Secret key the injection needs (missing, empty, or holding a line break or control character); fix the Secret"
		if g.Connection != "" {
			s.NoFix += " of Connection " + g.Connection
		}
		return nil
	case policy.ReasonUpstreamProxyFailed:
		s.NoFix = "not a rule problem: the forward proxy the config's upstreamProxy names refused or failed the connection (its credentials, its own rules, or a timeout); the proxy's log says which"
		return nil
	case policy.ReasonHostNotAllowed, policy.ReasonL7NotAllowed:
	default:
		s.NoFix = "the log gives a reason the proxy does not: nothing to suggest"
		return nil
	}
	var u *compiler.Unit
	var sb *compiler.Sandbox
	for i := range units {
		for j := range units[i].Plan.Sandboxes {
			if sandboxID(units[i].Plan.Sandboxes[j]) == g.Sandbox && sb == nil {
				u, sb = &units[i], &units[i].Plan.Sandboxes[j]
			}
		}
	}
	if sb == nil {
		s.NoFix = "the inputs define no sandbox " + quote(g.Sandbox) + ": run suggest on the repository that renders it"
		return nil
	}
	if g.Reason == string(policy.ReasonHostNotAllowed) {
		s.NoFix = hostNotAllowed(g, u, sb)
		return nil
	}
	return l7(s, g, u, sb, read)
}

// ruleMethod is a method a rule can name, and the edit can write
// unquoted into YAML.
var ruleMethod = regexp.MustCompile(`^[A-Z][A-Z0-9_-]{0,31}$`)

// quote prints text from the log safely: control bytes and non-ASCII
// escaped, as Go quotes strings.
func quote(s string) string {
	q := fmt.Sprintf("%+q", s)
	return q[1 : len(q)-1]
}

func connections(u *compiler.Unit) []compiler.Object {
	var out []compiler.Object
	for _, o := range u.Plan.Objects {
		if o.Source.Kind == "Connection" {
			out = append(out, o)
		}
	}
	return out
}

// domain is a host's last two labels, the family its Connection's other
// hosts usually share (api.github.com and github.com).
func domain(h string) string {
	labels := strings.Split(h, ".")
	if len(labels) <= 2 {
		return h
	}
	return strings.Join(labels[len(labels)-2:], ".")
}

func hostNotAllowed(g Group, u *compiler.Unit, sb *compiler.Sandbox) string {
	host := g.Host
	if host == "" {
		return "the request named no host the proxy could read (an origin-form request to the proxy, userinfo in the target, or a malformed authority): not a rule problem"
	}
	name, port := host, ""
	if h, p, err := net.SplitHostPort(host); err == nil {
		name, port = h, p
	}
	if port != "" && port != "443" && port != "80" {
		return fmt.Sprintf("the proxy reaches port 443 through CONNECT (80 for plain http://) only; %s is on port %s", quote(name), quote(port))
	}
	for _, h := range sb.Proxy.Hosts {
		if h.Name == name {
			return "the sandbox's config injects " + quote(name) + " now: the refusal came from an older config, or the host resolved to an internal address (a Connection's spec.allowInternalAddresses allows that)"
		}
	}
	var family []string
	for _, c := range connections(u) {
		tree, err := c.Tree()
		if err != nil {
			continue
		}
		hosts := scalars(source.Lookup(source.Lookup(tree, "spec"), "hosts"))
		if slices.Contains(hosts, name) && c.Source.Namespace == sb.Namespace {
			return fmt.Sprintf("Connection %s (%s) names %s but is not bound to sandbox %s: bind it to a role of the sandbox's class", c.Source.Name, c.Pos, name, g.Sandbox)
		}
		if slices.ContainsFunc(hosts, func(h string) bool { return domain(h) == domain(name) }) {
			family = append(family, fmt.Sprintf("Connection %s/%s (%s, hosts %s)", c.Source.Namespace, c.Source.Name, c.Pos, strings.Join(hosts, ", ")))
		}
	}
	if len(family) > 0 {
		slices.Sort(family)
		return fmt.Sprintf("%s is in no Connection of the sandbox; %s would need it in spec.hosts and an inject entry, if its credential is meant for it", quote(name), strings.Join(family, "; "))
	}
	return fmt.Sprintf("%s is in no Connection: a new Connection is needed for a credential there (or, with no credential, the agent's allowed_domains)", quote(name))
}

func l7(s *Suggestion, g Group, u *compiler.Unit, sb *compiler.Sandbox, read ReadFile) *edit {
	if neverWithCredential(g.Method) {
		s.NoFix = "the proxy never forwards " + quote(g.Method) + " with a credential, whatever a rule says (docs/proxy.md, Methods and headers on injected hosts)"
		return nil
	}
	if !ruleMethod.MatchString(g.Method) {
		s.NoFix = "a rule names methods in upper case, as clients send them, and methods are case-sensitive: " + quote(g.Method) + " is not one a rule can name"
		return nil
	}
	hi := slices.IndexFunc(sb.Proxy.Hosts, func(h config.Host) bool { return h.Name == g.Host })
	if hi < 0 {
		s.NoFix = quote(g.Host) + " is not an injected host of the sandbox now: the refusal came from an older config"
		return nil
	}
	host := sb.Proxy.Hosts[hi]
	if len(host.Rules) == 0 {
		s.NoFix = "the host has no rules, so no rule refused it: the request was sent over plain http://, carried a method or path override, a body the proxy cannot check, a target that is not a clean path, or a method outside the seven a host without rules forwards"
		return nil
	}
	if len(g.MCPTools) > 0 {
		mcpTools(s, g, u, sb, hi)
		return nil
	}
	p, err := policy.NewPolicy(&sb.Proxy)
	if err != nil {
		s.NoFix = "the sandbox's proxy config does not load: " + err.Error()
		return nil
	}
	var need []string
	for _, path := range g.Paths {
		if path == "" {
			s.Notes = append(s.Notes, "a refusal without a path names no request a rule can allow")
			continue
		}
		refused := path
		if parent, ok := aboveEncodedSlash(path); ok {
			// The proxy allows a path holding %2F only under a prefix
			// that holds it read either way: one above that segment,
			// and only if, read with its '/' decoded, it is a path.
			decoded := strings.NewReplacer("%2F", "/", "%2f", "/").Replace(path)
			if err := config.CheckPathPrefix(decoded); err != nil {
				s.Notes = append(s.Notes, fmt.Sprintf("%s: not a path a rule can name, read with its encoded '/' decoded (%v)", quote(path), err))
				continue
			}
			if config.CheckRulePath(strings.TrimSuffix(refused, "/"), false, config.EncodedSlashSegment) == nil {
				s.Notes = append(s.Notes, fmt.Sprintf("%s holds an encoded '/': where the upstream reads it as part of a name (npm's /@acme%%2fwidgets, GitLab's /api/v4/projects/acme%%2Fwidgets), a rule of its own with encodedSlash: segment and the prefix %s allows it without all of %s", quote(refused), quote(strings.TrimSuffix(refused, "/")), quote(parent)))
			}
			path = parent
		}
		if err := config.CheckPathPrefix(path); err != nil {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: not a path a rule can name (%v)", quote(path), err))
			continue
		}
		if d := p.DecideURL(g.Method, "https://"+g.Host+refused, nil); d.Allowed() {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: the rules already allow %s on it; the proxy refused it for something no rule changes (plain http://, a method or path override, or a body the rule's condition does not accept)", quote(refused), quote(g.Method)))
			continue
		}
		need = append(need, path)
	}
	if len(need) == 0 {
		s.NoFix = "no rule edit allows these requests (see the notes)"
		return nil
	}
	ci := slices.IndexFunc(connections(u), func(o compiler.Object) bool {
		return o.Source.Name == host.Connection && o.Source.Namespace == sb.Namespace
	})
	if ci < 0 {
		s.NoFix = fmt.Sprintf("the rules for %s come from %s, which is not a Connection of the inputs (an agent.yaml connector's rules are the connector catalog's): no Connection rule to edit", quote(g.Host), quote(host.Connection))
		return nil
	}
	conn := connections(u)[ci]
	tree, err := conn.Tree()
	if err != nil || tree == nil {
		s.NoFix = fmt.Sprintf("Connection %s cannot be read again: %v", conn.Source.Name, err)
		return nil
	}
	if e := injectEntry(tree, g.Host); e != nil && source.Lookup(e, "rules") == nil {
		// The host has rules (checked above) that the Connection does
		// not write: an agent.yaml connector's catalog entry adds them.
		s.NoFix = fmt.Sprintf("the rules on %s come from the connector catalog (an agent.yaml connector's rules), not from Connection %s (%s), whose inject entry has none: no Connection rule to edit", quote(g.Host), conn.Source.Name, conn.Pos)
		return nil
	}
	src, err := read(conn.Pos.File)
	if err != nil {
		s.NoFix = fmt.Sprintf("Connection %s's file cannot be read: %v", conn.Source.Name, err)
		return nil
	}
	prefixes, merges := Prefixes(need)
	pl, err := ruleEdit(conn.Pos.File, src, tree, g.Host, g.Method, prefixes)
	if err != nil {
		s.NoFix = fmt.Sprintf("no place for the edit in Connection %s (%s): %v", conn.Source.Name, conn.Pos, err)
		return nil
	}
	after := sb.Proxy
	after.Hosts = slices.Clone(sb.Proxy.Hosts)
	after.Hosts[hi].Rules = append(slices.Clone(host.Rules), config.Rule{Methods: []string{g.Method}, PathPrefixes: prefixes})
	acc := diff.CompareAccess(&sb.Proxy, &after)
	f := &Fix{File: pl.file, Line: pl.line, Edit: pl.what, Prefixes: prefixes, Merged: merges, Verdict: acc.Verdict, Widened: acc.Widened, Ceiling: CeilingNone,
		Warnings: warnings(g.Method, g.Paths)}
	ceilingVerdict(f, u.Plan.Ceiling, sb, &after)
	s.Fix = f
	return &pl.edit
}

func ceilingVerdict(f *Fix, c access.Ceiling, sb *compiler.Sandbox, after *config.Config) {
	if len(c.Limits) == 0 {
		return
	}
	vs, undecided, err := c.Check(access.Sandbox{Namespace: sb.Namespace, Name: sb.Name, Labels: sb.Labels}, after)
	switch {
	case err != nil || len(undecided) > 0:
		f.Ceiling = diff.CeilingUnproven
	case len(vs) > 0:
		f.Ceiling = diff.CeilingAbove
	default:
		f.Ceiling = diff.CeilingUnder
	}
	for _, v := range vs {
		f.AboveCeiling = append(f.AboveCeiling, diff.CeilingWitness{Method: v.Method, URL: v.URL, Body: v.Body, Limit: c.Limits[v.Limit].Describe()})
	}
}

// patches applies the edits per file: the same edit asked for twice
// (two sandboxes of one Connection) is made once.
func patches(edits []edit, read ReadFile) []Patch {
	byFile := map[string][]edit{}
	for _, e := range edits {
		if !slices.Contains(byFile[e.file], e) {
			byFile[e.file] = append(byFile[e.file], e)
		}
	}
	out := []Patch{}
	for file, es := range byFile {
		src, err := read(file)
		if err != nil {
			continue // reported on the fix already
		}
		text := apply(src, es)
		out = append(out, Patch{File: file, Diff: diff.Unified(file, file, string(src), string(text)), Text: text})
	}
	slices.SortFunc(out, func(a, b Patch) int { return cmp.Compare(a.File, b.File) })
	return out
}

// warnings says what an edit allowing the refused POSTs to paths lets
// code in the sandbox do that the paths do not show: a git push (smart
// HTTP's git-receive-pack is a POST like the fetch's git-upload-pack), or
// any GraphQL operation, mutations included (a rule without a graphql
// condition does not look at the document, and the log holds no body to
// tell a query from a mutation).
func warnings(method string, paths []string) []string {
	if method != "POST" {
		return nil
	}
	var out []string
	for _, p := range paths {
		p, _, _ = strings.Cut(p, "?")
		if repo, ok := strings.CutSuffix(p, "/git-receive-pack"); ok {
			out = append(out, fmt.Sprintf("%s is git push: code in the sandbox could push to %s with the credential", p, strings.TrimSuffix(strings.TrimPrefix(repo, "/"), ".git")))
		}
		if p == "/graphql" || strings.HasSuffix(p, "/graphql") {
			out = append(out, fmt.Sprintf("POST %s allows every GraphQL operation, mutations included; if the agent only reads, give the rule graphql: {operations: [query]} instead", p))
		}
	}
	return out
}

// aboveEncodedSlash returns the segments of path before the first one
// holding an encoded '/' (%2F, either case), "/" if that is the first,
// and whether path holds one: npm's /@acme%2fwidgets, GitLab's
// /api/v4/projects/group%2Fproject. The proxy allows such a path where a
// rule allows it both as sent and with the '/' decoded, which a prefix
// above that segment does and one naming it cannot.
func aboveEncodedSlash(path string) (string, bool) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, seg := range segs {
		if strings.Contains(strings.ToUpper(seg), "%2F") {
			return "/" + strings.Join(segs[:i], "/"), true
		}
	}
	return path, false
}

// mcpTools proposes, for refused calls of MCP tools (the log names
// them), adding the tools the host's MCP rules do not list to the first
// rule with an mcp condition on the refused paths, weighed as every fix
// is. The edit is said, not patched: the tools list is written in many
// YAML shapes.
func mcpTools(s *Suggestion, g Group, u *compiler.Unit, sb *compiler.Sandbox, hi int) {
	host := sb.Proxy.Hosts[hi]
	ri := slices.IndexFunc(host.Rules, func(r config.Rule) bool {
		return r.MCP != nil && slices.Contains(r.Methods, "POST") && slices.ContainsFunc(g.Paths, func(p string) bool {
			return policy.RuleAllows(config.Rule{Methods: []string{"POST"}, PathPrefixes: r.PathPrefixes, PathPatterns: r.PathPatterns, EncodedSlash: r.EncodedSlash}, "POST", p, policy.Body{})
		})
	})
	if ri < 0 {
		s.NoFix = "the refused requests called MCP tools, and no rule with an mcp condition covers their paths: give the rule that covers them an mcp condition listing the tools"
		return
	}
	rule := host.Rules[ri]
	var add []string
	for _, t := range g.MCPTools {
		if t != "" && rule.MCP.Tools != nil && !slices.Contains(rule.MCP.Tools, t) {
			add = append(add, t)
		}
	}
	if len(add) == 0 {
		s.NoFix = "the rule's mcp condition lists the tools called already: the calls were refused for their arguments, their method or how the body was written (explain --request with the body says which)"
		return
	}
	quoted := make([]string, len(add))
	for i, t := range add {
		quoted[i] = quote(t)
	}
	file, line, where := "", 0, "the Connection of "+quote(host.Connection)
	if ci := slices.IndexFunc(connections(u), func(o compiler.Object) bool {
		return o.Source.Name == host.Connection && o.Source.Namespace == sb.Namespace
	}); ci >= 0 {
		c := connections(u)[ci]
		file, line, where = c.Pos.File, c.Pos.Line, "Connection "+c.Source.Name
	}
	after := sb.Proxy
	after.Hosts = slices.Clone(sb.Proxy.Hosts)
	after.Hosts[hi].Rules = slices.Clone(host.Rules)
	m := *rule.MCP
	m.Tools = append(slices.Clone(m.Tools), add...)
	after.Hosts[hi].Rules[ri].MCP = &m
	acc := diff.CompareAccess(&sb.Proxy, &after)
	f := &Fix{File: file, Line: line, Edit: fmt.Sprintf("add %s to the tools of the mcp condition of rule %d of %s on %s (edit by hand: not in the patch)", strings.Join(quoted, ", "), ri, where, quote(g.Host)),
		Verdict: acc.Verdict, Widened: acc.Widened, Ceiling: CeilingNone}
	ceilingVerdict(f, u.Plan.Ceiling, sb, &after)
	s.Tools, s.Fix = add, f
}
