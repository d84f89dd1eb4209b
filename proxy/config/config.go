// Package config holds the egress proxy's configuration: the versioned file
// that `keyhole render` writes and `keyhole-proxy` loads. It depends only on
// the standard library so that the proxy binary stays lean, and it holds no
// secret values: an injection names Secret keys, and the proxy reads their
// values from mounted files at request time.
package config

// APIVersion and Kind identify the file format. A change that an older
// proxy cannot read gets a new APIVersion.
const (
	APIVersion = "proxy.keyhole.dev/v1alpha1"
	Kind       = "ProxyConfig"
)

// Default locations inside the proxy container; flags override them.
const (
	DefaultSecretsDir = "/var/run/keyhole/secrets"
	DefaultCACert     = "/var/run/keyhole/ca/tls.crt"
	DefaultCAKey      = "/var/run/keyhole/ca/tls.key"
)

// Config is one sandbox's egress policy. Hosts not listed in Hosts or
// Passthrough are refused with host-not-allowed.
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Sandbox names the sandbox this config serves; it appears in logs.
	Sandbox SandboxRef `json:"sandbox"`
	// SecretsDir holds one directory per Secret, one file per key, as a
	// Kubernetes Secret volume mounts them: SecretsDir/<secret>/<key>.
	SecretsDir string `json:"secretsDir,omitempty"`
	// CA is the sandbox's egress CA that signs the leaves for injected hosts.
	CA CA `json:"ca"`
	// Hosts are the injected hosts, sorted by Name, each listed once.
	Hosts []Host `json:"hosts,omitempty"`
	// Passthrough hosts are tunnelled untouched: no TLS termination, no
	// injection, no rules. Sorted, each listed once.
	Passthrough []string `json:"passthrough,omitempty"`
	// InternalHosts are the hosts (each injected or passed through)
	// that the proxy may dial at internal addresses: loopback,
	// link-local (the cloud metadata address), private, shared (CGNAT)
	// and reserved ranges. Any other host that resolves to one is
	// refused. Sorted, each listed once.
	InternalHosts []string `json:"internalHosts,omitempty"`
	// ScrubResponseBodies, when true, also masks the injected credential
	// in the bodies of responses from injected hosts, not only in their
	// headers. The proxy then asks upstreams for uncompressed bodies
	// (a compressed one could hide the credential) and refuses to pass
	// on a body in a content coding it cannot read. docs/proxy.md gives
	// what it costs.
	ScrubResponseBodies bool `json:"scrubResponseBodies,omitempty"`
	// UpstreamProxy, when set, is the forward proxy every upstream
	// connection goes through (upstream.go).
	UpstreamProxy *UpstreamProxy `json:"upstreamProxy,omitempty"`
}

// SandboxRef names a sandbox.
type SandboxRef struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// CA locates the sandbox CA's certificate and key (PEM files).
type CA struct {
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
}

// Host is one injected host: a lowercase DNS name without port, reached on
// 443 through CONNECT.
type Host struct {
	Name string `json:"name"`
	// Connection names the Connection (or agent connector) the injection
	// comes from; it appears in logs and its placeholder is
	// omnia-injected-<Connection>.
	Connection string `json:"connection"`
	Inject     Inject `json:"inject"`
	// Rules, when present, are an allow-list: a request is forwarded only
	// when one rule matches it. No rules means every request is forwarded.
	Rules []Rule `json:"rules,omitempty"`
	// Audit, when true, forwards a request that only the rules refuse,
	// without the credential, and logs it (the Connection's
	// enforcement: audit): what the rules would refuse is seen without
	// the agent being stopped by the proxy. Every other refusal holds.
	Audit bool `json:"audit,omitempty"`
}

// Inject says how the credential reaches the request. Exactly one of
// Header, Basic, Substitute, GitHubApp, AWSSigV4, OAuth2 and Google is
// set.
type Inject struct {
	// Secret is the Secret whose keys the injection reads.
	Secret string `json:"secret,omitempty"`
	// Header sets a header to a template over the Secret's keys, replacing
	// whatever the sandbox sent (the Connection form).
	Header *HeaderInject `json:"header,omitempty"`
	// Basic sets Authorization: Basic from two keys (the Connection form).
	Basic *BasicInject `json:"basic,omitempty"`
	// Substitute replaces the placeholder in the request headers it names
	// (Authorization unless it names others), including inside the base64
	// of Authorization: Basic, with the value of one key (the agent.yaml
	// connector form).
	Substitute *SubstituteInject `json:"substitute,omitempty"`
	// GitHubApp sets a GitHub App installation token the proxy mints
	// from the App's private key, one of the Secret's keys (the
	// Connection form with credential kind githubApp).
	GitHubApp *GitHubAppInject `json:"githubApp,omitempty"`
	// AWSSigV4 signs the request with AWS Signature Version 4 from an
	// access key held in the Secret (the Connection form with credential
	// kind awsSigV4).
	AWSSigV4 *AWSSigV4Inject `json:"awsSigV4,omitempty"`
	// OAuth2 sets an OAuth 2.0 access token the proxy obtains from a
	// token endpoint with the Secret's client credentials or refresh
	// token (credential kind oauth2).
	OAuth2 *OAuth2Inject `json:"oauth2,omitempty"`
	// Google sets a Google access or ID token the proxy mints with the
	// service account key held in the Secret (credential kind
	// googleServiceAccount).
	Google *GoogleInject `json:"googleServiceAccount,omitempty"`
}

// HeaderInject sets Name to Value rendered over the Secret's keys. Value
// uses only plain key references, e.g. "Bearer {{ .token }}".
type HeaderInject struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// BasicInject sets Authorization: Basic base64(username:password).
type BasicInject struct {
	UsernameKey string `json:"usernameKey"`
	PasswordKey string `json:"passwordKey"`
}

// SubstituteInject replaces Placeholder by the value of Key, in the
// request headers Headers names and nowhere else: a placeholder in any
// other header goes out as the placeholder, so that a header an upstream
// echoes back (X-Request-Id, Origin) never carries the credential.
type SubstituteInject struct {
	Placeholder string `json:"placeholder"`
	Key         string `json:"key"`
	// Headers are the header names (any letter case) whose values may
	// hold the placeholder: those the connector's clients send the
	// credential in. Empty means DefaultSubstituteHeaders.
	Headers []string `json:"headers,omitempty"`
}

// DefaultSubstituteHeaders are the headers a substitute injection that
// names none acts on: Authorization, which carries Bearer tokens and
// basic auth alike.
func DefaultSubstituteHeaders() []string { return []string{"Authorization"} }

// HeaderNames returns the headers the substitution acts on: Headers, or
// DefaultSubstituteHeaders when it is empty.
func (s *SubstituteInject) HeaderNames() []string {
	if len(s.Headers) == 0 {
		return DefaultSubstituteHeaders()
	}
	return s.Headers
}

// Rule allows the listed methods on the listed paths. A request matches
// when its method is in Methods and its path matches one of PathPrefixes
// or PathPatterns, and, when Body is set, its JSON body matches too.
type Rule struct {
	Methods []string `json:"methods"`
	// PathPrefixes match whole segments: /repos/acme/widgets matches
	// /repos/acme/widgets and /repos/acme/widgets/pulls, not
	// /repos/acme/widgets-old. "/" matches every path.
	PathPrefixes []string `json:"pathPrefixes,omitempty"`
	// PathPatterns match segment by segment: "*" matches exactly one
	// segment and a final "**" matches the rest, e.g.
	// /*/*/git-upload-pack.
	PathPatterns []string `json:"pathPatterns,omitempty"`
	// Body, when set, requires a JSON object body whose top-level string
	// fields named here hold one of the listed values, e.g. a Git LFS
	// batch request {"operation": ["download"]}.
	Body map[string][]string `json:"body,omitempty"`
	// GraphQL, when set, requires a GraphQL-over-HTTP request body whose
	// operations are all of the listed types, e.g. {"operations":
	// ["query"]} for a read-only POST /graphql. A rule sets Body or
	// GraphQL, not both.
	GraphQL *GraphQL `json:"graphql,omitempty"`
	// MCP, when set, holds the rule's POST requests to a Model Context
	// Protocol server's streamable HTTP endpoint to the JSON-RPC methods,
	// tools and resources it lists (MCP). A rule sets one of Body,
	// GraphQL and MCP.
	MCP *MCP `json:"mcp,omitempty"`
	// EncodedSlash says how the rule reads an encoded '/' (%2F, either
	// case) in a request's path. Empty: as the upstream might either
	// way, so a path holding one matches only where the rule allows it
	// both as sent and with each %2F read as '/'. EncodedSlashSegment:
	// as part of its segment, as npm's registries (/@scope%2fname) and
	// GitLab's API (/projects/group%2Fproject) read it; the rule's
	// paths may then hold %2F too.
	EncodedSlash string `json:"encodedSlash,omitempty"`
	// WebSocket lets a WebSocket handshake (GET with Upgrade: websocket)
	// on the rule's paths upgrade: the proxy injects the credential on
	// the handshake and relays the frames that follow, scrubbed of it.
	// Without it the proxy never asks an upstream to upgrade.
	WebSocket bool `json:"websocket,omitempty"`
	// Inject, when set, is how the credential reaches a request this
	// rule decides, in place of the host's Inject: one host, such as a
	// self-hosted GitLab, takes a header on its API and basic auth on
	// git's smart-HTTP paths. It names the host's Secret and sets Header
	// or Basic. The proxy refuses a request that rules of two different
	// forms both allow.
	Inject *Inject `json:"inject,omitempty"`
}

// EncodedSlashSegment is the EncodedSlash mode in which an encoded '/'
// is part of its segment: a request's %2F matches only a %2F the rule's
// path spells at the same place, and a "*" matches a segment (or, beside
// a %2F, a piece of one) that holds none.
const EncodedSlashSegment = "segment"

// EncodedSlashModes lists the values EncodedSlash may have besides
// empty.
func EncodedSlashModes() []string { return []string{EncodedSlashSegment} }

// The GraphQL operation types a GraphQL condition lists.
const (
	GraphQLQuery        = "query"
	GraphQLMutation     = "mutation"
	GraphQLSubscription = "subscription"
)

// GraphQLOperations lists the operation types, in the order the
// documents and reports give them.
func GraphQLOperations() []string {
	return []string{GraphQLQuery, GraphQLMutation, GraphQLSubscription}
}

// GraphQL is a rule's GraphQL body condition: the request is one JSON
// object (or, with Batches, an array of them) whose "query" is a GraphQL
// document every operation of which is of a type in Operations.
type GraphQL struct {
	// Operations are the operation types a document may hold: "query",
	// "mutation", "subscription".
	Operations []string `json:"operations"`
	// PersistedQueries allows a request naming a stored document by its
	// hash (extensions.persistedQuery), whose operations the proxy cannot
	// see: it allows whatever the hash names.
	PersistedQueries bool `json:"persistedQueries,omitempty"`
	// Batches allows a JSON array of requests, each held to the same
	// condition.
	Batches bool `json:"batches,omitempty"`
}
