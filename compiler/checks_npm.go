package compiler

import (
	"maps"
	"slices"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// codeNpmScopedRefused is the check that a Connection to an npm registry
// can serve scoped packages.
const codeNpmScopedRefused = "ConnectionNpmScopedRefused"

// npmRegistryHosts are the public npm registries, known by name; a
// private one (Artifactory, GitHub Packages under another name,
// Verdaccio) is known by a rule path naming a scope (/@acme).
var npmRegistryHosts = []string{"registry.npmjs.org", "registry.yarnpkg.com", "npm.pkg.github.com"}

// checkNpmScoped warns where an inject entry for an npm registry has
// rules that refuse a scoped package's document: npm asks for @acme/x as
// GET /@acme%2fx, which a rule with encodedSlash: segment allows where
// it names it (/@acme%2F*), and any other rule only where it allows it
// both as sent and with the %2F read as '/' (a prefix /@acme holds the
// tarballs, /@acme/x/-/x-1.0.0.tgz, but not the document). GET under /,
// or a pattern such as /** that holds the path either way, allows it.
func checkNpmScoped(p *pass) {
	for _, c := range p.connList {
		for i, in := range c.w.Spec.Placement.Inject {
			if len(in.Rules) == 0 {
				continue // every path is allowed, scoped names included
			}
			scopes := map[string]bool{}
			rules := make([]config.Rule, 0, len(in.Rules))
			for _, r := range in.Rules {
				rules = append(rules, r.proxy())
				for _, pre := range slices.Concat(r.PathPrefixes, r.PathPatterns) {
					first, _, _ := strings.Cut(strings.TrimPrefix(pre, "/"), "/")
					first = config.SplitEncodedSlash(first)[0]
					if len(first) > 1 && first[0] == '@' {
						scopes[first] = true
					}
				}
			}
			registry := len(scopes) > 0
			for _, h := range in.Hosts {
				registry = registry || slices.Contains(npmRegistryHosts, strings.ToLower(h))
			}
			if !registry {
				continue
			}
			names := slices.Sorted(maps.Keys(scopes))
			if len(names) == 0 {
				names = []string{"@scope"}
			}
			for _, scope := range names {
				if servesScoped(rules, scope) {
					continue
				}
				p.report(codeNpmScopedRefused, &c.item, path{"spec", "placement", "inject", i, "rules"}, false,
					"these rules refuse npm's scoped packages: npm reads %s/<name> as GET /%s%%2f<name>, and its tarballs as GET /%s/<name>/-/<file>; give the rule that names the scope encodedSlash: segment and the pattern /%s%%2F* beside the prefix /%s, or allow GET and HEAD under /", scope, scope, scope, scope, scope)
				break
			}
		}
	}
}

// servesScoped reports whether rules let npm read a package of scope:
// its document, as the proxy decides a path holding %2F, and its
// tarball.
func servesScoped(rules []config.Rule, scope string) bool {
	doc, tarball := "/"+scope+"%2fwidgets", "/"+scope+"/widgets/-/widgets-1.0.0.tgz"
	allows := func(path string) bool {
		return slices.ContainsFunc(rules, func(r config.Rule) bool { return policy.RuleAllows(r, "GET", path, policy.Body{}) })
	}
	return allows(doc) && allows(tarball)
}
