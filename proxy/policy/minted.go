package policy

import (
	"net/http"
	"strings"
)

// A minted token (a GitHub App injection) is the proxy's, not the
// sandbox's: one token serves every request of its scope, from every
// client of this proxy and every Connection that mints the same scope,
// until it is close to expiry. GitHub lets a token revoke itself (DELETE /installation/token,
// under /api/v3 on GitHub Enterprise Server); a sandbox that did would
// leave the proxy sending a dead token, for up to an hour, for every
// request of that scope, its own and other clients'. The request has no use
// to a sandbox, which never holds the token, so it is refused on a host
// that injects a minted token, whatever the rules allow.

// revokesMintedToken reports whether a request with method and path (as
// TargetPath returns it) to host h revokes the token h injects.
func revokesMintedToken(h *HostPolicy, method, path string) bool {
	if h.Inject.GitHubApp == nil || !strings.EqualFold(method, http.MethodDelete) {
		return false
	}
	path = strings.TrimRight(path, "/")
	return strings.EqualFold(path, "/installation/token") || strings.EqualFold(path, "/api/v3/installation/token")
}
