package policy

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// slashConfig has a host of each kind an encoded '/' meets: without
// rules (a private npm registry the agent may publish to), with a rule
// for every GET (GitLab's read-only connector), with rules that name
// segments.
const slashConfig = `{
  "apiVersion": "proxy.keyhole.dev/v1alpha1", "kind": "ProxyConfig",
  "sandbox": {"namespace": "agents", "name": "support"},
  "hosts": [
    {"name": "npm.example", "connection": "registry",
     "inject": {"secret": "registry", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}}},
    {"name": "gitlab.example", "connection": "gitlab",
     "inject": {"secret": "gitlab", "header": {"name": "PRIVATE-TOKEN", "value": "{{ .token }}"}},
     "rules": [{"methods": ["GET", "HEAD"], "pathPrefixes": ["/"]},
               {"methods": ["POST"], "pathPatterns": ["/*/*/git-upload-pack"]}]},
    {"name": "npm-read.example", "connection": "registry-read",
     "inject": {"secret": "registry", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["GET"], "pathPatterns": ["/*"]}]},
    {"name": "api.example", "connection": "api",
     "inject": {"secret": "api", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["GET"], "pathPrefixes": ["/repos/acme/widgets"]},
               {"methods": ["GET"], "pathPatterns": ["/projects/*/issues"]}]},
    {"name": "npm-scope.example", "connection": "registry-acme",
     "inject": {"secret": "registry", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["GET", "HEAD"], "encodedSlash": "segment",
                "pathPrefixes": ["/@acme"], "pathPatterns": ["/@acme%2F*", "/@acme%2f*/**"]}]},
    {"name": "gitlab-project.example", "connection": "gitlab-widgets",
     "inject": {"secret": "gitlab", "header": {"name": "PRIVATE-TOKEN", "value": "{{ .token }}"}},
     "rules": [{"methods": ["GET"], "encodedSlash": "segment",
                "pathPrefixes": ["/api/v4/projects/acme%2Fwidgets"], "pathPatterns": ["/api/v4/groups/*%2F*"]},
               {"methods": ["POST"], "encodedSlash": "segment", "pathPatterns": ["/api/v4/projects/*/issues"]}]}
  ]
}`

// TestDecideEncodedSlash: an encoded '/' inside a segment is allowed
// where no rule could be confused by it, that is on a host without rules
// or where a rule allows the request both as sent and with the '/' read
// as a separator; everywhere else, and wherever it would leave an empty
// or dot segment, it is refused.
func TestDecideEncodedSlash(t *testing.T) {
	p := policyOf(t, slashConfig)
	tests := map[string]struct {
		host, method, target string
		allowed              bool
		why                  string // in the refusal
	}{
		"scoped package, no rules":          {host: "npm.example", method: "GET", target: "/@acme%2fwidgets", allowed: true},
		"scoped package upper case":         {host: "npm.example", method: "GET", target: "/@acme%2Fwidgets", allowed: true},
		"scoped publish, no rules":          {host: "npm.example", method: "PUT", target: "/@acme%2fwidgets", allowed: true},
		"scoped tarball":                    {host: "npm.example", method: "GET", target: "/@acme/widgets/-/widgets-1.0.0.tgz", allowed: true},
		"dot part":                          {host: "npm.example", method: "GET", target: "/@acme%2f..%2fother", why: "dot segment"},
		"encoded dot part":                  {host: "npm.example", method: "GET", target: "/a%2F%2e%2e%2Fb", why: "dot segment"},
		"leading slash":                     {host: "npm.example", method: "GET", target: "/%2fetc", why: "empty segment"},
		"trailing slash":                    {host: "npm.example", method: "GET", target: "/a%2f/b", why: "empty segment"},
		"two slashes":                       {host: "npm.example", method: "GET", target: "/a%2f%2fb", why: "empty segment"},
		"encoded backslash":                 {host: "npm.example", method: "GET", target: "/a%5cb", why: `encoded '\'`},
		"GitLab project, GET everywhere":    {host: "gitlab.example", method: "GET", target: "/api/v4/projects/group%2Fproject/issues", allowed: true},
		"GitLab subgroup":                   {host: "gitlab.example", method: "GET", target: "/api/v4/projects/group%2Fsub%2Fproject", allowed: true},
		"GitLab write to the project":       {host: "gitlab.example", method: "POST", target: "/api/v4/projects/group%2Fproject/issues", why: "both as sent and with its encoded '/' read as a separator"},
		"git-upload-pack a segment short":   {host: "gitlab.example", method: "POST", target: "/group%2Fproject/git-upload-pack", why: "encoded '/'"},
		"a pattern's one segment":           {host: "npm-read.example", method: "GET", target: "/@acme%2fwidgets", why: "encoded '/'"},
		"a pattern's one segment, plain":    {host: "npm-read.example", method: "GET", target: "/widgets", allowed: true},
		"under a prefix either way":         {host: "api.example", method: "GET", target: "/repos/acme/widgets/contents/a%2Fb.txt", allowed: true},
		"a prefix's segment spelled across": {host: "api.example", method: "GET", target: "/repos/acme%2Fwidgets", why: "encoded '/'"},
		"out of a prefix by dots":           {host: "api.example", method: "GET", target: "/repos/acme/widgets%2F..%2F..%2Fother", why: "dot segment"},
		"a pattern read two ways":           {host: "api.example", method: "GET", target: "/projects/a%2Fb/issues", why: "encoded '/'"},

		// encodedSlash: segment, a registry restricted to one scope.
		"segment: scoped document":          {host: "npm-scope.example", method: "GET", target: "/@acme%2fwidgets", allowed: true},
		"segment: scoped document, upper":   {host: "npm-scope.example", method: "HEAD", target: "/@acme%2Fwidgets?write=true", allowed: true},
		"segment: tarball":                  {host: "npm-scope.example", method: "GET", target: "/@acme/widgets/-/widgets-1.0.0.tgz", allowed: true},
		"segment: tarball, encoded":         {host: "npm-scope.example", method: "GET", target: "/@acme%2fwidgets/-/widgets-1.0.0.tgz", allowed: true},
		"segment: other scope":              {host: "npm-scope.example", method: "GET", target: "/@other%2fx", why: "encodedSlash: segment"},
		"segment: scope spelled across":     {host: "npm-scope.example", method: "GET", target: "/@acme%2fwidgets%2fx", why: "encodedSlash: segment"},
		"segment: out by dots":              {host: "npm-scope.example", method: "GET", target: "/@acme%2f..%2f@other%2fx", why: "dot segment"},
		"segment: out by encoded dots":      {host: "npm-scope.example", method: "GET", target: "/@acme%2f%2e%2e%2f@other%2fx", why: "dot segment"},
		"segment: out by a dot piece":       {host: "npm-scope.example", method: "GET", target: "/@acme%2f.", why: "dot segment"},
		"segment: empty piece":              {host: "npm-scope.example", method: "GET", target: "/@acme%2f%2fwidgets", why: "empty segment"},
		"segment: trailing piece":           {host: "npm-scope.example", method: "GET", target: "/@acme%2f", why: "empty segment"},
		"segment: double encoded":           {host: "npm-scope.example", method: "GET", target: "/@acme%2fwid%252F..%252Fx", why: "decoding twice"},
		"segment: double encoded slash":     {host: "npm-scope.example", method: "GET", target: "/@acme%252fwidgets", why: "no rule"},
		"segment: encoded backslash":        {host: "npm-scope.example", method: "GET", target: "/@acme%2fwidgets%5c..", why: `encoded '\'`},
		"segment: publish":                  {host: "npm-scope.example", method: "PUT", target: "/@acme%2fwidgets", why: "no rule"},
		"segment: dist-tag write":           {host: "npm-scope.example", method: "PUT", target: "/-/package/@acme%2fwidgets/dist-tags/latest", why: "no rule"},
		"segment: fullwidth dots":           {host: "npm-scope.example", method: "GET", target: "/@acme%2f%EF%BC%8E%EF%BC%8E%2fx", why: "Unicode"},
		"segment: GitLab project":           {host: "gitlab-project.example", method: "GET", target: "/api/v4/projects/acme%2Fwidgets/issues", allowed: true},
		"segment: GitLab project itself":    {host: "gitlab-project.example", method: "GET", target: "/api/v4/projects/acme%2fwidgets", allowed: true},
		"segment: GitLab other project":     {host: "gitlab-project.example", method: "GET", target: "/api/v4/projects/acme%2Fother/issues", why: "encodedSlash: segment"},
		"segment: GitLab subproject":        {host: "gitlab-project.example", method: "GET", target: "/api/v4/projects/acme%2Fwidgets%2Fsub", why: "encodedSlash: segment"},
		"segment: GitLab dots":              {host: "gitlab-project.example", method: "GET", target: "/api/v4/projects/acme%2F..%2Fother/issues", why: "dot segment"},
		"segment: GitLab decoded":           {host: "gitlab-project.example", method: "GET", target: "/api/v4/projects/acme/widgets/issues", why: "no rule"},
		"segment: GitLab group":             {host: "gitlab-project.example", method: "GET", target: "/api/v4/groups/acme%2Fsub", allowed: true},
		"segment: GitLab group, one piece":  {host: "gitlab-project.example", method: "GET", target: "/api/v4/groups/acme", why: "no rule"},
		"segment: GitLab group, 3 pieces":   {host: "gitlab-project.example", method: "GET", target: "/api/v4/groups/acme%2Fa%2Fb", why: "encodedSlash: segment"},
		"segment: a star takes no %2F":      {host: "gitlab-project.example", method: "POST", target: "/api/v4/projects/acme%2Fwidgets/issues", why: "encodedSlash: segment"},
		"segment: a star takes a plain one": {host: "gitlab-project.example", method: "POST", target: "/api/v4/projects/42/issues", allowed: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := p.Decide(RequestInfo{Kind: KindTunnel, Method: tc.method, Target: tc.target, ConnectHost: tc.host + ":443", SNI: tc.host, Host: tc.host, BodyComplete: true})
			if d.Allowed() != tc.allowed {
				t.Fatalf("%s %s on %s: %s %s %q", tc.method, tc.target, tc.host, d.Action, d.Reason, d.Message)
			}
			if !tc.allowed && (d.Reason != ReasonL7NotAllowed || !strings.Contains(d.Message, tc.why)) {
				t.Fatalf("refused %s %q, want l7-not-allowed saying %q", d.Reason, d.Message, tc.why)
			}
		})
	}
}

// TestTargetPathSlashes: TargetPath itself still refuses every encoded
// '/' (explain's and the ceiling's reading of a path), marking the
// refusal so the decision can lift it; with slashes, what it accepts
// splits, at every encoded '/', into segments that are neither empty nor
// dot segments.
func TestTargetPathSlashes(t *testing.T) {
	for _, target := range []string{"/@acme%2fwidgets", "/a/b%2Fc/d?x=1", "/a%2Fb/"} {
		if _, err := TargetPath(target); !errors.Is(err, ErrTarget) || !errors.Is(err, errEncodedSlash) {
			t.Errorf("TargetPath(%q): %v, want the encoded '/' refused", target, err)
		}
		path, err := targetPath(target, true)
		if err != nil {
			t.Fatalf("targetPath(%q, true): %v", target, err)
		}
		if want, _, _ := strings.Cut(target, "?"); path != want {
			t.Errorf("targetPath(%q, true) = %q, want the path as sent", target, path)
		}
		if dec := decodeSlashes(path); strings.Contains(strings.TrimSuffix(dec, "/"), "//") || strings.Contains(dec, "%2") {
			t.Errorf("decodeSlashes(%q) = %q", path, dec)
		}
	}
	if _, err := TargetPath("/a%5cb"); errors.Is(err, errEncodedSlash) {
		t.Error("an encoded '\\' is marked as an encoded '/'")
	}
}

// assertEitherWay fails t unless h has no rules or one of them allows
// the request with path (holding an encoded '/'): a rule with
// encodedSlash: segment as its reading says, and so that the request
// read with each '/' decoded lies where the rule, read so too, points
// (decodedRule); any other rule both as sent and with the '/' read as a
// separator.
func assertEitherWay(t *testing.T, h *HostPolicy, method, path string, body Body) {
	t.Helper()
	if len(h.Rules) == 0 {
		return
	}
	for _, r := range h.Rules {
		if r.EncodedSlash == config.EncodedSlashSegment {
			if RuleAllows(r, method, path, body) {
				if !MatchRule(decodedRule(r), method, decodeSlashes(path), body) {
					t.Fatalf("%s %s allowed by %+v, whose reading with '/' decoded does not allow %s", method, path, r, decodeSlashes(path))
				}
				return
			}
			continue
		}
		if MatchRule(r, method, path, body) && MatchRule(r, method, decodeSlashes(path), body) {
			return
		}
	}
	t.Fatalf("%s %s allowed with an encoded '/' though no rule allows it read either way", method, path)
}

// decodedRule is a rule with encodedSlash: segment as an upstream that
// reads %2F as '/' reads it: each %2F of its paths a separator, each "*"
// piece a "*" segment, the rule itself without the field.
func decodedRule(r config.Rule) config.Rule {
	dec := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			out = append(out, decodeSlashes(p))
		}
		return out
	}
	r.PathPrefixes, r.PathPatterns, r.EncodedSlash = dec(r.PathPrefixes), dec(r.PathPatterns), ""
	return r
}

// TestSegmentReadingBothWays is the property docs/security.md argues:
// over random paths and random rules with encodedSlash: segment, every
// path such a rule allows (and the proxy accepts) is, read by an
// upstream that takes each %2F for '/', a clean path that the rule read
// the same way allows: the same literal segments at the same places, a
// "*" one segment, under the same prefix. An encoded '/' never lets a
// request reach, in the other reading, what the rule does not name.
func TestSegmentReadingBothWays(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Rules draw mostly pieces they may hold, paths mostly pieces a rule
	// names, and both the pieces the proxy must refuse.
	good := []string{"a", "b", "@acme", "-", "*", "x%2Fy"}
	bad := []string{"..", ".", "%2e", "%2E%2e", "", "**", "%252F", "%5C", "%2525"}
	slashes := []string{"%2F", "%2f"}
	segment := func(wild bool) string {
		n := 1 + rng.IntN(3)
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(slashes[rng.IntN(2)])
			}
			p := good[rng.IntN(len(good))]
			if rng.IntN(6) == 0 {
				p = bad[rng.IntN(len(bad))]
			}
			if !wild && strings.Contains(p, "*") {
				p = "a"
			}
			b.WriteString(p)
		}
		return b.String()
	}
	path := func(wild bool) string {
		n := 1 + rng.IntN(4)
		var b strings.Builder
		for range n {
			b.WriteString("/" + segment(wild))
		}
		return b.String()
	}
	checked, allowed := 0, 0
	for range 200000 {
		r := config.Rule{Methods: []string{"GET"}, EncodedSlash: config.EncodedSlashSegment}
		if rng.IntN(2) == 0 {
			r.PathPrefixes = []string{path(false)}
		} else {
			r.PathPatterns = []string{path(true)}
		}
		cfg := &config.Config{APIVersion: config.APIVersion, Kind: config.Kind, Sandbox: config.SandboxRef{Name: "s"},
			Hosts: []config.Host{{Name: "h.example", Connection: "c", Inject: config.Inject{Secret: "s", Header: &config.HeaderInject{Name: "A", Value: "v"}}, Rules: []config.Rule{r}}}}
		if cfg.Validate() != nil {
			continue
		}
		target := path(false)
		if rng.IntN(4) != 0 {
			// Most paths are the rule's own, its wildcards filled with
			// random pieces (holding %2F or not, clean or not) and, at
			// times, a segment more.
			target = slices.Concat(r.PathPrefixes, r.PathPatterns)[0]
			for strings.Contains(target, "*") {
				target = strings.Replace(target, "*", segment(false), 1)
			}
			if rng.IntN(3) == 0 {
				target += "/" + segment(false)
			}
		}
		p, err := targetPath(target, true)
		if err != nil {
			continue
		}
		checked++
		if ruleAllows(r, "GET", p, config.HasEncodedSlash(p), Body{}) != nil {
			continue
		}
		allowed++
		dec := decodeSlashes(p)
		if got, err := TargetPath(dec); err != nil || got != dec {
			t.Fatalf("%s allowed by %+v reads, decoded, as %s, which the proxy refuses: %v", p, r, dec, err)
		}
		if !MatchRule(decodedRule(r), "GET", dec, Body{}) {
			t.Fatalf("%s allowed by %+v reads, decoded, as %s, which the decoded rule %+v does not allow", p, r, dec, decodedRule(r))
		}
		if config.HasEncodedSlash(p) && doubleEncoded(p) {
			t.Fatalf("%s allowed by %+v holds a double encoding", p, r)
		}
	}
	t.Logf("%d valid rule and path pairs, %d allowed", checked, allowed)
	if checked < 50000 || allowed < 5000 {
		t.Fatalf("only %d valid rule and path pairs, %d allowed: the generator is too narrow", checked, allowed)
	}
}
