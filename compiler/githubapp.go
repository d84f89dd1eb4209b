package compiler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
)

// A Connection whose credential is a GitHub App has the proxy mint
// installation tokens narrowed to what the Connection's rules allow:
// the repositories their paths name and, for each kind of resource under
// them, read for GET and HEAD, write for any other method. This file
// derives that scope from the rules; the checks report a rule no
// permission set can express.

// CredentialKindSecret and CredentialKindGitHubApp are the values of a
// Connection's spec.credential.kind.
const (
	CredentialKindSecret    = "secret"
	CredentialKindGitHubApp = "githubApp"
)

// DefaultGitHubAppKey is the Secret key a githubApp credential reads
// the App's private key from when privateKeyKey is not set.
const DefaultGitHubAppKey = "private-key.pem"

// githubRepoResources maps the segment after /repos/{owner}/{repo} to
// the App permission that covers it, as GitHub's REST reference lists
// them ("Permissions required for GitHub Apps").
func githubRepoResources() map[string]string {
	return map[string]string{
		"pulls": "pull_requests", "issues": "issues", "labels": "issues", "milestones": "issues", "assignees": "issues",
		"contents": "contents", "git": "contents", "commits": "contents", "branches": "contents", "compare": "contents",
		"tags": "contents", "releases": "contents", "readme": "contents", "tarball": "contents", "zipball": "contents",
		"merges": "contents", "actions": "actions", "statuses": "statuses", "check-runs": "checks", "check-suites": "checks",
		"deployments": "deployments", "environments": "environments", "hooks": "repository_hooks", "pages": "pages",
	}
}

// githubFreePaths are the REST paths a token reads with no permission.
func githubFreePaths() []string {
	return []string{"/rate_limit", "/meta", "/zen", "/octocat", "/emojis", "/versions"}
}

// githubScope is the scope a Connection's token is minted with.
type githubScope struct {
	// Repositories are the repositories the rules name; nil when a rule
	// names any repository (a "*" or a prefix above them).
	Repositories []string
	// Permissions are the permissions the rules need; nil when an entry
	// has no rules, which leaves the installation's own.
	Permissions map[string]string
	// Unscoped lists, for each rule path no permission set expresses,
	// where it is and why.
	Unscoped []unscopedRule
}

// unscopedRule is a rule path the scope cannot express.
type unscopedRule struct {
	entry, rule int
	path        string
	why         string
}

// githubAppScope derives the scope of w's token from its inject
// entries' rules. api is the REST API's host; every other host is read
// as a git host (github.com).
func githubAppScope(w *connectionWire, api string) githubScope {
	perms := map[string]string{}
	repos := map[string]bool{}
	anyRepo, unrestricted := false, false
	var out githubScope
	grant := func(name, level string) {
		if perms[name] != "write" {
			perms[name] = level
		}
	}
	for i, in := range w.Spec.Placement.Inject {
		if len(in.Rules) == 0 {
			unrestricted = true
			continue
		}
		onAPI := slices.Contains(in.Hosts, api)
		onGit := slices.ContainsFunc(in.Hosts, func(h string) bool { return h != api })
		for j, r := range in.Rules {
			level := "read"
			for _, m := range r.Methods {
				if m != "GET" && m != "HEAD" && m != "OPTIONS" {
					level = "write"
				}
			}
			paths := slices.Concat(r.PathPrefixes, r.PathPatterns)
			for k, p := range paths {
				prefix := k < len(r.PathPrefixes)
				var grants []githubGrant
				var why string
				if onAPI {
					var g []githubGrant
					g, why = githubAPIGrants(p, prefix, level)
					grants = append(grants, g...)
				}
				if onGit && why == "" {
					var g []githubGrant
					g, why = githubGitGrants(p, prefix, r.Methods)
					grants = append(grants, g...)
				}
				if why != "" {
					out.Unscoped = append(out.Unscoped, unscopedRule{entry: i, rule: j, path: p, why: why})
					continue
				}
				for _, g := range grants {
					if g.repo == "" {
						anyRepo = anyRepo || g.perm != ""
					} else {
						repos[g.repo] = true
					}
					if g.perm != "" {
						grant(g.perm, g.level)
						grant("metadata", "read")
					}
				}
			}
		}
	}
	if !unrestricted {
		out.Permissions = perms
	}
	if !unrestricted && !anyRepo && len(repos) > 0 {
		out.Repositories = slices.Sorted(maps.Keys(repos))
	}
	return out
}

// githubGrant is one permission a rule path needs, on one repository
// ("" for any).
type githubGrant struct {
	repo, perm, level string
}

// githubAPIGrants reads one REST API rule path: /repos/{owner}/{repo}
// and the resource under it. why says what makes a path inexpressible.
func githubAPIGrants(p string, prefix bool, level string) ([]githubGrant, string) {
	p = strings.TrimSuffix(p, "/")
	if slices.Contains(githubFreePaths(), p) {
		return []githubGrant{{}}, ""
	}
	seg := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(seg) < 3 || seg[0] != "repos" || seg[1] == "**" || seg[2] == "**" {
		return nil, "a token's permissions cover repositories' resources under /repos/{owner}/{repo}/..., and this path is not one"
	}
	repo := seg[2]
	if repo == "*" || seg[1] == "*" {
		repo = ""
	}
	if len(seg) == 3 {
		if prefix {
			return nil, "a prefix of a whole repository covers every kind of resource in it, which no permission set names; name the resources, e.g. /repos/{owner}/{repo}/pulls"
		}
		if level != "read" {
			return nil, "changing a repository itself needs the administration permission, which keyhole does not grant a minted token"
		}
		return []githubGrant{{repo: repo, perm: "metadata", level: "read"}}, ""
	}
	res := seg[3]
	perm, ok := githubRepoResources()[res]
	if !ok {
		return nil, fmt.Sprintf("keyhole knows no App permission for a repository's %q resources", res)
	}
	// A commit's statuses and checks are the statuses and checks
	// permissions' own.
	if res == "commits" && len(seg) >= 6 {
		switch seg[5] {
		case "status", "statuses":
			perm = "statuses"
		case "check-runs", "check-suites":
			perm = "checks"
		}
	}
	return []githubGrant{{repo: repo, perm: perm, level: level}}, ""
}

// githubGitGrants reads one git-over-HTTPS rule path, /{owner}/{repo}
// (with or without .git) and what follows: fetching is contents:read,
// pushing (git-receive-pack) contents:write.
func githubGitGrants(p string, prefix bool, methods []string) ([]githubGrant, string) {
	seg := strings.Split(strings.TrimPrefix(strings.TrimSuffix(p, "/"), "/"), "/")
	if len(seg) < 2 || seg[0] == "**" || seg[1] == "**" || seg[0] == "" {
		return nil, "a git host's token covers /{owner}/{repo}/... paths, and this path names no repository"
	}
	repo := strings.TrimSuffix(seg[1], ".git")
	if repo == "*" || seg[0] == "*" {
		repo = ""
	}
	write := slices.ContainsFunc(methods, func(m string) bool { return m != "GET" && m != "HEAD" && m != "OPTIONS" })
	rest := strings.Join(seg[2:], "/")
	switch {
	case rest == "git-upload-pack", rest == "info/refs":
		return []githubGrant{{repo: repo, perm: "contents", level: "read"}}, ""
	case rest == "git-receive-pack":
		return []githubGrant{{repo: repo, perm: "contents", level: "write"}}, ""
	case strings.HasPrefix(rest, "info/lfs"):
		level := "read"
		if write {
			level = "write" // the batch endpoint is a POST for downloads and uploads alike
		}
		return []githubGrant{{repo: repo, perm: "contents", level: level}}, ""
	case prefix && (rest == "" || rest == "**"):
		level := "read"
		if write {
			level = "write"
		}
		return []githubGrant{{repo: repo, perm: "contents", level: level}}, ""
	}
	return nil, "a git host's token covers git-upload-pack, git-receive-pack, info/refs and info/lfs under a repository, and this path is none of them"
}

// githubAppInject is the proxy's injection for one host of a githubApp
// Connection: the token goes as Authorization: token to the API host,
// as basic x-access-token to git hosts.
func githubAppInject(w *connectionWire, host string, scope githubScope) *config.GitHubAppInject {
	g := w.Spec.Credential.GitHubApp
	api := g.api()
	scheme := config.GitHubSchemeBasic
	if host == api {
		scheme = config.GitHubSchemeToken
	}
	return &config.GitHubAppInject{
		AppID: g.AppID, InstallationID: g.InstallationID, Owner: g.Owner,
		PrivateKeyKey: g.privateKeyKey(), API: api, Scheme: scheme,
		Repositories: slices.Clone(scope.Repositories), Permissions: maps.Clone(scope.Permissions),
	}
}
