package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// GitHubAppInject injects a GitHub App installation token the proxy mints
// itself: it signs the App's JWT with the private key held in the
// injection's Secret, asks the API for an installation token narrowed to
// Repositories and Permissions, caches it and renews it before it
// expires. The key never leaves the proxy, and neither does the token:
// the sandbox sends a placeholder, or nothing, and the proxy sets the
// header.
type GitHubAppInject struct {
	// AppID is the App's numeric id, the JWT's issuer.
	AppID int64 `json:"appId"`
	// InstallationID is the installation whose token is minted. When it
	// is 0, Owner names where to look it up.
	InstallationID int64 `json:"installationId,omitempty"`
	// Owner is "org" (or a user) or "owner/repo": the installation is
	// the one GET /orgs/{org}/installation (then /users/{user}/installation)
	// or GET /repos/{owner}/{repo}/installation returns.
	Owner string `json:"owner,omitempty"`
	// PrivateKeyKey is the key of the Secret that holds the App's private
	// key, PEM (PKCS #1 or PKCS #8 RSA).
	PrivateKeyKey string `json:"privateKeyKey"`
	// API is the host of the REST API the token is minted from:
	// api.github.com, or a GitHub Enterprise Server host (whose API is
	// under /api/v3).
	API string `json:"api"`
	// Scheme says how the token is sent: GitHubSchemeToken sets
	// Authorization: token <token> (the REST API), GitHubSchemeBasic sets
	// basic auth x-access-token:<token> (git over HTTPS).
	Scheme string `json:"scheme"`
	// Repositories, when set, narrow the token to these repositories of
	// the installation (names without the owner), sorted.
	Repositories []string `json:"repositories,omitempty"`
	// Permissions narrow the token to these permissions, each "read" or
	// "write" (GitHub's names: contents, pull_requests, metadata, ...).
	// Empty means every permission the installation has.
	Permissions map[string]string `json:"permissions,omitempty"`
}

// The schemes a GitHub App injection sends its token with.
const (
	GitHubSchemeToken = "token"
	GitHubSchemeBasic = "basic"
)

// GitHubAPIHost is the REST API host of github.com.
const GitHubAPIHost = "api.github.com"

// GitHubPermissionLevels are the access levels a minted token's
// permission may have, narrowest first.
func GitHubPermissionLevels() []string { return []string{"read", "write"} }

// githubName is a GitHub owner or repository name as the API accepts it
// in a path: letters, digits, '-', '_' and '.', not "." or "..".
var githubName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

// CheckGitHubName reports whether s is a GitHub owner or repository
// name the proxy puts in an API path as is.
func CheckGitHubName(s string) error {
	if !githubName.MatchString(s) || s == "." || s == ".." {
		return fmt.Errorf("%q is not a GitHub owner or repository name", s)
	}
	return nil
}

// githubPermission is a permission name as GitHub spells them.
var githubPermission = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)

func (v *validator) githubApp(at string, g *GitHubAppInject) {
	if g.AppID <= 0 {
		v.addf(at+".appId", "is %d, want a positive App id", g.AppID)
	}
	switch {
	case g.InstallationID < 0:
		v.addf(at+".installationId", "is %d, want a positive installation id", g.InstallationID)
	case g.InstallationID == 0 && g.Owner == "":
		v.addf(at, "names neither installationId nor owner")
	case g.InstallationID > 0 && g.Owner != "":
		v.addf(at, "names both installationId and owner; one says which installation")
	case g.Owner != "":
		owner, repo, isRepo := strings.Cut(g.Owner, "/")
		if err := CheckGitHubName(owner); err != nil {
			v.addf(at+".owner", "%v", err)
		} else if isRepo {
			if err := CheckGitHubName(repo); err != nil {
				v.addf(at+".owner", "%v", err)
			}
		}
	}
	v.key(at+".privateKeyKey", g.PrivateKeyKey)
	if err := CheckHostName(g.API); err != nil {
		v.addf(at+".api", "%v", err)
	}
	if g.Scheme != GitHubSchemeToken && g.Scheme != GitHubSchemeBasic {
		v.addf(at+".scheme", "is %q, want %q or %q", g.Scheme, GitHubSchemeToken, GitHubSchemeBasic)
	}
	if !slices.IsSorted(g.Repositories) || len(slices.Compact(slices.Clone(g.Repositories))) != len(g.Repositories) {
		v.addf(at+".repositories", "is not sorted with each name once")
	}
	for i, r := range g.Repositories {
		if err := CheckGitHubName(r); err != nil {
			v.addf(fmt.Sprintf("%s.repositories[%d]", at, i), "%v", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(g.Permissions)) {
		if !githubPermission.MatchString(name) {
			v.addf(at+".permissions", "%q is not a GitHub permission name", name)
		}
		if !slices.Contains(GitHubPermissionLevels(), g.Permissions[name]) {
			v.addf(at+".permissions."+name, "is %q, want read or write", g.Permissions[name])
		}
	}
}

// Scope describes what a minted token may do: its permissions (name:level,
// sorted) on its repositories. It names no secret.
func (g *GitHubAppInject) Scope() string {
	var b strings.Builder
	if len(g.Permissions) == 0 {
		b.WriteString("every permission of the installation")
	}
	for i, name := range slices.Sorted(maps.Keys(g.Permissions)) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name + ":" + g.Permissions[name])
	}
	if len(g.Repositories) == 0 {
		b.WriteString(" on every repository of the installation")
	} else {
		b.WriteString(" on " + strings.Join(g.Repositories, ", "))
	}
	return b.String()
}

// Installation names the installation: its id, or the owner it is
// looked up by.
func (g *GitHubAppInject) Installation() string {
	if g.InstallationID > 0 {
		return fmt.Sprint(g.InstallationID)
	}
	return "of " + g.Owner
}

// SameApp reports whether g and o mint from the same App, installation,
// key and API: their tokens then differ only in scope.
func (g *GitHubAppInject) SameApp(o *GitHubAppInject) bool {
	return g.AppID == o.AppID && g.InstallationID == o.InstallationID && g.Owner == o.Owner &&
		g.PrivateKeyKey == o.PrivateKeyKey && g.API == o.API && g.Scheme == o.Scheme
}

// Covers reports whether every token o mints could also be minted by g:
// g's repositories include o's (none listed means all of them) and each
// of o's permissions is one of g's at the same or a higher level (none
// listed means the installation's own).
func (g *GitHubAppInject) Covers(o *GitHubAppInject) bool {
	if len(g.Repositories) > 0 && (len(o.Repositories) == 0 || !containsAll(g.Repositories, o.Repositories)) {
		return false
	}
	if len(g.Permissions) == 0 {
		return true
	}
	if len(o.Permissions) == 0 {
		return false
	}
	for name, level := range o.Permissions {
		if have, ok := g.Permissions[name]; !ok || slices.Index(GitHubPermissionLevels(), have) < slices.Index(GitHubPermissionLevels(), level) {
			return false
		}
	}
	return true
}

func containsAll(set, sub []string) bool {
	for _, s := range sub {
		if !slices.Contains(set, s) {
			return false
		}
	}
	return true
}
