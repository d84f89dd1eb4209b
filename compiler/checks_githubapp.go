package compiler

import (
	"slices"

	"keyhole.dev/keyhole/diag"
)

// Codes of the checks on Connections whose credential is a GitHub App.
const (
	codeGitHubAppInvalid  = "GitHubAppCredentialInvalid"
	codeGitHubAppUnscoped = "GitHubAppRuleUnscoped"
)

// githubAppChecks are the rows of the check table for githubApp
// credentials.
func githubAppChecks() []Check {
	return []Check{
		{Code: codeGitHubAppInvalid, Severity: diag.Error, run: checkGitHubApps,
			Purpose: "A Connection's credential does not say which GitHub App mints its tokens, or lets the App's key reach the sandbox: kind `githubApp` without `githubApp` (or `githubApp` under another kind), an `appId` or `installationId` that is not positive, neither or both of `installationId` and `owner`, an inject entry that sets `header`, `value` or `basic` (the proxy sets the minted token itself), or an `env` or `files` placement, or an agent.yaml connector naming the Connection, either of which would put the Secret holding the App's private key in the sandbox.",
			Help:    "Give `githubApp` the App's `appId` and either `installationId` or `owner`; drop `header`, `value` and `basic` from the inject entries, and the env and files placements, and bind the Connection from an AgentRuntime rather than an agent.yaml connector: the sandbox gets a placeholder, never the key or a token."},
		{Code: codeGitHubAppUnscoped, Severity: diag.Error, run: checkGitHubAppScopes,
			Purpose: "A rule of a Connection whose credential is a GitHub App allows a path no App permission set expresses, so the proxy cannot narrow the token it mints to what the rules allow: a REST path outside `/repos/{owner}/{repo}/...` (`/graphql`, `/user`, `/orgs/...`), a prefix over a whole repository, a resource keyhole knows no permission for, or a git path other than `info/refs`, `git-upload-pack`, `git-receive-pack` and `info/lfs`.",
			Help:    "Name the resources the agent needs, e.g. `/repos/acme/widgets/pulls` (pull_requests) or `/repos/acme/widgets/contents` (contents); for what no permission narrows, use a Connection with kind `secret` and a token of the scope you choose."},
	}
}

// checkGitHubApps reports a githubApp credential that does not name its
// App and installation, and placements that would give the sandbox the
// App's key.
func checkGitHubApps(p *pass) {
	for _, c := range p.connList {
		w := c.w
		cred := path{"spec", "credential"}
		g := w.Spec.Credential.GitHubApp
		switch {
		case w.Spec.Credential.Kind == CredentialKindGitHubApp && g == nil:
			p.report(codeGitHubAppInvalid, &c.item, cred.with("kind"), false,
				"kind githubApp needs githubApp with the App's appId and its installationId or owner")
			continue
		case w.Spec.Credential.Kind != CredentialKindGitHubApp && g != nil:
			p.report(codeGitHubAppInvalid, &c.item, cred.with("githubApp"), true,
				"githubApp is read only with kind githubApp; this credential is of kind %s, so the proxy would inject the Secret's values instead", w.Spec.Credential.Kind)
			continue
		case g == nil:
			continue
		}
		at := cred.with("githubApp")
		if g.AppID <= 0 {
			p.report(codeGitHubAppInvalid, &c.item, at.with("appId"), false, "appId is %d; give the App's id, a positive number", g.AppID)
		}
		switch {
		case g.InstallationID < 0:
			p.report(codeGitHubAppInvalid, &c.item, at.with("installationId"), false, "installationId is %d; give the installation's id, a positive number", g.InstallationID)
		case g.InstallationID == 0 && g.Owner == "":
			p.report(codeGitHubAppInvalid, &c.item, at, true, "githubApp names neither installationId nor owner; give one, so the proxy knows which installation's token to mint")
		case g.InstallationID > 0 && g.Owner != "":
			p.report(codeGitHubAppInvalid, &c.item, at.with("owner"), true, "githubApp names both installationId and owner; keep one")
		}
		p.proxyHeldPlacements(codeGitHubAppInvalid, c, "the proxy sets the token it mints itself (Authorization: token on "+g.api()+", basic x-access-token elsewhere)", "the App's private key", "inject the minted token instead")
		if s, r := p.secretOf(c); s != nil && !s.keysUnknown && !s.merges {
			if _, ok := s.values.get(g.privateKeyKey()); !ok {
				p.reportNamedKeyMissing(c, at, s, r, g.privateKeyKey(), "which holds the App's private key")
			}
		}
	}
}

// checkGitHubAppScopes reports each rule path of a githubApp Connection
// that no permission set expresses.
func checkGitHubAppScopes(p *pass) {
	for _, c := range p.connList {
		g := c.w.githubApp()
		if g == nil {
			continue
		}
		scope := githubAppScope(c.w, g.api())
		for _, u := range scope.Unscoped {
			in := c.w.Spec.Placement.Inject[u.entry]
			r := in.Rules[u.rule]
			field, k := "pathPrefixes", slices.Index(r.PathPrefixes, u.path)
			if k < 0 {
				field, k = "pathPatterns", slices.Index(r.PathPatterns, u.path)
			}
			p.report(codeGitHubAppUnscoped, &c.item, path{"spec", "placement", "inject", u.entry, "rules", u.rule, field, k}, false,
				"the token the proxy mints cannot be narrowed to what %s allows: %s", clip(u.path), u.why)
		}
	}
}
