package compiler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template/parse"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/source"
)

// The codes the compiler reports. The Connection condition codes are the
// operator's condition reasons, kept exactly so that a finding in CI reads
// as the failure it prevents.
const (
	codeSchemaInvalid    = "SchemaInvalid"
	codeValueUnknown     = "FluxValueUnknown"
	codeKindUnknown      = "KindUnknown"
	codeSecretMissing    = "ConnectionSecretMissing"
	codeSecretKeyMissing = "ConnectionSecretKeyMissing"
	codeTemplateInvalid  = "ConnectionTemplateInvalid"
	codeTemplateBrace    = "ConnectionTemplateStrayBrace"
	codeInjectionInvalid = "ConnectionInjectionInvalid"
)

// Check is one row of the check table: a stable code, its default
// severity, what it catches, how to fix it, and the function that finds
// it. Rows without a function are reported while loading.
type Check struct {
	Code     string
	Severity diag.Severity
	Purpose  string
	Help     string
	run      func(*pass)
}

// Rule returns the row as the printers and the docs see it.
func (c Check) Rule() diag.Rule {
	return diag.Rule{Code: c.Code, Severity: c.Severity, Purpose: c.Purpose, Help: c.Help}
}

// Rules returns the table keyed by code, for the printers.
func Rules() map[string]diag.Rule {
	m := map[string]diag.Rule{}
	for _, c := range table() {
		m[c.Code] = c.Rule()
	}
	return m
}

// severities is the table's default severity of each code. Compile takes
// it once for every finding to look its own up: building the table (its
// texts formatted) for each of thousands of findings was most of what
// reporting them allocated.
func severities() map[string]diag.Severity {
	m := map[string]diag.Severity{}
	for _, c := range table() {
		m[c.Code] = c.Severity
	}
	return m
}

func table() []Check {
	var loader []Check
	for _, r := range source.Rules() {
		loader = append(loader, Check{Code: r.Code, Severity: r.Severity, Purpose: r.Purpose, Help: r.Help})
	}
	return slices.Concat(loader, []Check{
		{Code: codeKustomizeBuildFailed, Severity: diag.Error,
			Purpose: fmt.Sprintf("A kustomize directory does not build: a missing resource or patch, an invalid kustomization, a patch that matches nothing, or more than keyhole hands kustomize in one build (%d objects, %d keys in one mapping, %d lines of an env file, since kustomize's time grows with the square of those; %d MiB read in all, each read of a file counted, since what it generates is made of what it reads).",
				source.MaxKustomizeObjects, source.MaxKustomizeMappingKeys, source.MaxKustomizeTextLines, source.MaxKustomizeReadBytes>>20),
			Help: "Run `kubectl kustomize` on the directory to see the same failure, and fix the kustomization at the position given; split a kustomization past the limits."},
		{Code: codeKustomizeRemoteBase, Severity: diag.Error,
			Purpose: "A kustomization (or one of its bases) names a remote base: a git repository or an HTTP URL. keyhole fetches nothing by default, so a check never runs a clone or a request that a pull request chose, and gives the same answer tomorrow; the kustomization is not built.",
			Help:    "Vendor the base into the repository, or pass `--allow-remote-bases` to let kustomize fetch it as `kubectl kustomize` does."},
		{Code: codeKindUnknown, Severity: diag.Info,
			Purpose: "A document's kind is not one keyhole checks; it is skipped.",
			Help:    "Nothing to fix when the object is meant for something else."},
		{Code: codeKindNested, Severity: diag.Warning,
			Purpose: "An object of a kind keyhole does not check holds one of keyhole's objects (a Connection, a SandboxClass, an AgentRuntime, a ToolRegistry, an agent-sandbox object) that its controller makes in the cluster: a flux-operator ResourceSet's resources, a Kyverno rule's generated data, a Crossplane Composition's manifests. keyhole does not run that controller, so the object inside is not checked. Objects of GitOps engines keyhole reads (Flux HelmReleases' and Argo CD Applications' values, kustomizations' patches) are read where their unit is.",
			Help:    "Declare the object on its own in the repository to have it checked, or check what the controller renders: pipe its output into `keyhole check -`."},
		{Code: codeKindMisspelled, Severity: diag.Error,
			Purpose: "A document names a kind one or two edits from one of keyhole's (`Conection`), a group one or two edits from keyhole's (`omnia.altairlabs.ai`), or a version of keyhole's group keyhole does not know (`keyhole.dev/v1`); or keyhole.yaml holds something other than keyhole's Config. As written, keyhole would skip the object (a Config's ceiling and excludes with it), and what names it would find nothing.",
			Help:    "Write the apiVersion and kind the message suggests."},
		{Code: codeSchemaInvalid, Severity: diag.Error,
			Purpose: "An object does not match its schema: an unknown or misspelt field, a wrong type, a bad host, header, method, env var name or path prefix, or a Secret name or key the API server refuses (such as `..data`, the kubelet's own name in a mounted Secret).",
			Help:    "Correct the field named in the message; `keyhole schema` prints every schema."},
		{Code: codeValueUnknown, Severity: diag.Info,
			Purpose: "A value of an object a Flux Kustomization builds holds a variable Flux substitutes at deploy from a Secret, whose values keyhole never reads, or from an object the repository does not hold in the clear (`host: git.${CLUSTER_DOMAIN}` with `postBuild.substituteFrom` naming a Secret): the value is unknown until deploy, so it is not checked as written; the object's other fields are checked, and it is compiled and rendered with the variable in it, for Flux to substitute.",
			Help:    "Nothing to fix in git; give the variable in `postBuild.substitute` or a ConfigMap `substituteFrom` names to have the value checked."},
		{Code: codeDuplicateObject, Severity: diag.Error,
			Purpose: "One deploy unit (a kustomization root, or the files outside any kustomization) defines the same Connection, SandboxClass, AgentRuntime, ToolRegistry, agent-sandbox object (Sandbox, SandboxTemplate, SandboxClaim, SandboxWarmPool) or agent twice, or the same Secret a Connection reads: the cluster keeps one, and which one is an accident of order. The message names both positions and how the two differ.",
			Help:    "Remove one definition, or rename it. The same object in two deploy units (two overlays of one base) is normal and not reported."},
	}, operatorChecks(), agentSandboxChecks(), githubAppChecks(), awsSigV4Checks(), tokenCredentialChecks(), workloadChecks(), []Check{
		{Code: codeSecretMissing, Severity: diag.Error, run: checkSecretMissing,
			Purpose: "The Secret a Connection's credential names is not in the input.",
			Help:    "Add the Secret (or its SealedSecret/ExternalSecret) to the repository, correct `spec.credential.secretRef.name`, or pass --allow-missing-secrets when Secrets live elsewhere."},
		{Code: codeTemplateInvalid, Severity: diag.Error, run: checkTemplates,
			Purpose: "An inject entry's `value` does not parse as a template, uses more than references to Secret keys, holds a line break outside them (a block scalar, `value: |`, ends with one), or reads a key Kubernetes cannot hold.",
			Help:    "Write the value as literal text and key references only: `{{ .token }}`, or `{{ index . \"tls.crt\" }}` for a key that is not a Go identifier (a dot, a dash, a leading digit), e.g. `Bearer {{ .token }}`."},
		{Code: codeTemplateBrace, Severity: diag.Warning, run: checkTemplateBraces,
			Purpose: "An inject entry's `value` closes a key reference with a brace too many, `{{ .token }}}`: the template reads the extra brace as literal text, so the proxy sends it with the credential and the upstream refuses the header. A warning, since a value that means the brace (JSON in a header) looks the same.",
			Help:    "Remove the extra brace: `Bearer {{ .token }}`. Where the header means the brace, annotate the Connection `keyhole.dev/ignore: ConnectionTemplateStrayBrace`."},
		{Code: codeValueLiteral, Severity: diag.Error, run: checkValueLiterals,
			Purpose: "An inject entry's `value` reads no Secret key: it is literal text (a token written in, or a `${VAR}` that nothing expands), which render would write as it is into the proxy's ConfigMap and the proxy would send as the header.",
			Help:    "Keep the credential in the Secret `spec.credential.secretRef` names and read it with a key reference, e.g. `Bearer {{ .token }}`; revoke a token that was committed."},
		{Code: codeCredentialLiteral, Severity: diag.Error, run: checkCredentialLiterals,
			Purpose: "A string of a Connection, an agent.yaml or the Config (any field, key or value) has the shape of a known service's token: GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), AWS access key IDs (`AKIA`, `ASIA`), Slack (`xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`), OpenAI and Anthropic (`sk-`, `sk-ant-`), GitLab (`glpat-`), Google (`AIza`), Stripe (`sk_live_`, `rk_live_`), Hugging Face (`hf_`), npm (`npm_`). The message names the shape and the field, never the value.",
			Help:    "Revoke the token, since git has it; keep it in the Secret the Connection names and read it with a key reference, e.g. `Bearer {{ .token }}`."},
		{Code: codeSecretKeyMissing, Severity: diag.Error, run: checkSecretKeys,
			Purpose: "A key that an inject entry's `value` or `basic` names is not in the Secret.",
			Help:    "Add the key to the Secret, or correct the template or key name."},
		{Code: codeInjectionInvalid, Severity: diag.Error, run: checkInjectionValues,
			Purpose: "An injected value cannot go into a header: a key it reads holds a line break other than a trailing one, a NUL or another control character but tab.",
			Help:    "Store the value on one line, without control characters."},
		{Code: codeKeysUnknown, Severity: diag.Info, run: checkKeysUnknown,
			Purpose: "The Secret a Connection reads comes from an ExternalSecret whose keys the input does not list (spec.dataFrom and templateFrom take them from the external store or other objects; creationPolicy Merge keeps the keys the Secret already has), so whether a key the `value` or `basic` names is in the Secret cannot be checked.",
			Help:    "Nothing to fix in git; list the keys with spec.data[].secretKey or spec.target.template.data to have them checked, or make sure the store holds every key the Connection reads."},
		{Code: codeValuesUnknown, Severity: diag.Info, run: checkValuesUnknown,
			Purpose: "The values of the Secret a Connection reads are not in the input (a SealedSecret, an ExternalSecret or a SOPS-encrypted Secret), so whether a key it reads holds a line break other than a trailing one cannot be checked.",
			Help:    "Nothing to fix in git; store each value on one line where the Secret is made."},

		{Code: codeSecretCrossNamespace, Severity: diag.Error, run: checkSecretNamespace,
			Purpose: "A Connection's secretRef names a Secret in another namespace.",
			Help:    "Create the Secret in the namespace the sandboxes run in, beside the Connection."},
		{Code: codeInjectFormInvalid, Severity: diag.Error, run: checkInjectForm,
			Purpose: "An inject entry of a Connection whose credential is a Secret has neither or both of header/value and basic, or basic on a header other than Authorization.",
			Help:    "Give each entry either `header` and `value`, or `basic` with `usernameKey` and `passwordKey`."},
		{Code: codeHeaderForbidden, Severity: diag.Error, run: checkForbiddenHeaders,
			Purpose: "An inject entry's `header` (or a keyhole.yaml catalog connector's header name) is one the proxy never injects, since it frames the request or is hop-by-hop: `Host`, `Content-Length`, `Transfer-Encoding`, `Connection`, `Keep-Alive`, `Proxy-Authorization`, `Proxy-Authenticate`, `Proxy-Connection`, `TE`, `Trailer`, `Upgrade`. The proxy refuses such a config, so render refuses the plan.",
			Help:    "Put the credential in the header the API reads, e.g. `Authorization` or `X-Api-Key`."},
		{Code: codeInjectHostUnlisted, Severity: diag.Error, run: checkInjectHosts,
			Purpose: "An inject entry covers a host that spec.hosts does not list.",
			Help:    "Add the host to spec.hosts, or remove it from the entry."},
		{Code: codeHostInjectedTwice, Severity: diag.Error,
			Purpose: "Two inject entries of one Connection cover the same host and set the credential in different forms (a header and basic auth, two headers), and a request could take both: an entry has no rules, or a rule of each allows one request (the message gives it). The proxy would refuse such a request rather than guess. An entry listing a host twice is reported too.",
			Help:    "Split the host's paths between the entries' rules, e.g. git's smart-HTTP paths (`/acme/*/info/refs`, `/acme/*/git-upload-pack`) in the basic entry and `/api/v4` in the header entry (docs/connections.md, \"One host, two forms\"); or merge the entries."},
		{Code: codeHostNotInjected, Severity: diag.Warning,
			Purpose: "A spec.hosts entry that no inject entry covers: the sandbox reaches it without the credential.",
			Help:    "Add the host to an inject entry if it needs the credential; otherwise nothing to fix."},
		{Code: codeHostUnsupported, Severity: diag.Error,
			Purpose: "A host known to need request signing (AWS SigV4), which a header injection cannot serve. An AWS host of a Connection whose credential is of kind `awsSigV4`, whose requests the proxy signs, is not one. A gRPC host, which speaks only HTTP/2, is not one either: the proxy speaks HTTP/2 to it (`render --target omnia` refuses it, `OmniaHTTP2HostUnsupported`).",
			Help:    "For AWS, give the Connection `credential.kind: awsSigV4`, so the proxy signs the requests with the key it keeps; otherwise place that credential with `env` or `files`."},
		{Code: codeHostMisspelled, Severity: diag.Warning, run: checkHostNearMiss,
			Purpose: "A Connection's host is a typo away from a host of the connector catalog or of another Connection (`api.gihtub.com`, `api.github.com`): one label of four letters or more differs by one edit, or by two in a label of eight or more. The proxy would send the credential to whoever holds that name.",
			Help:    "Correct the host to the one the message suggests; if the host is meant, list it with the other host in one Connection, or add `keyhole.dev/ignore: ConnectionHostMisspelled` to the Connection's annotations."},
		{Code: codeBasicUnencoded, Severity: diag.Warning, run: checkBasicUnencoded,
			Purpose: "A header value writes Basic credentials in the clear (`Basic {{ .email }}:{{ .token }}`): the scheme wants base64 of user:password, a value template only joins text and keys, and the proxy sends the value as written, so the server refuses every request.",
			Help:    "Use `basic: {usernameKey: email, passwordKey: token}`, which the proxy encodes, or keep the encoded pair in one Secret key (`Basic {{ .auth }}`)."},
		{Code: codeMethodInvalid, Severity: diag.Error, run: checkRules,
			Purpose: "A rule lists a method that is not in RFC 9110 (or PATCH), or lists one twice, or sets `websocket: true` without GET, the handshake's method.",
			Help:    "Use upper-case method names, each once per rule; a rule with `websocket: true` lists GET."},
		{Code: codeMCPInvalid, Severity: diag.Error, run: checkMCPRules,
			Purpose: "A rule's `mcp` condition names a JSON-RPC method an MCP client does not send (`tools/cal`), or one twice; sits on a rule that does not allow POST, the method of every MCP request, or beside `websocket: true`; lists tools without allowing `tools/call`; or holds `arguments` for a tool its `tools` does not list. The proxy refuses such a config, or the condition matches nothing. A keyhole.yaml catalog connector's `readOnly` rules are held to the same checks.",
			Help:    "Spell the methods as MCP does (`initialize`, `notifications/initialized`, `tools/list`, `tools/call`; docs/spec.md lists them), allow POST on the rule (with GET and DELETE for the server's event stream and the session's end), and name in `arguments` only tools that `tools` lists."},
		{Code: codeInjectUnrestricted, Severity: diag.Warning, run: checkUnrestricted,
			Purpose: "An inject entry has no rules, so every method on every path of its hosts carries the credential: a sandbox meant to read a repository can also push to it, delete it or change its settings.",
			Help:    "List in `rules` the methods and path prefixes the sandbox needs (docs/connections.md has read-only and read-write rules for GitHub's API and git over HTTPS); to keep every method on purpose, silence the code on the Connection with the annotation `keyhole.dev/ignore: ConnectionInjectUnrestricted`."},
		{Code: codeAuditMode, Severity: diag.Warning, run: checkAuditMode,
			Purpose: "A Connection sets `spec.enforcement: audit`: on its injected hosts the egress proxy forwards a request its rules refuse, without the credential, and logs it with the rule that would allow it, instead of refusing it. Every other refusal holds (docs/spec.md §6). Meant for a rollout: to learn what the rules miss without the proxy stopping the agent.",
			Help:    "Read the proxy's log with `keyhole suggest`, add the rules it proposes, then set `enforcement: enforce` or remove the field. A ceiling with `audit: forbid` refuses audit mode where it must not be used."},
		{Code: codeMethodNeverForwarded, Severity: diag.Warning, run: checkNeverForwarded,
			Purpose: "A rule lists TRACE or CONNECT, which the proxy never forwards to an injected host whatever the rules say (TRACE echoes the request, credential included, back to the sandbox; CONNECT would open a tunnel no rule checks): the rule allows less than it reads as allowing.",
			Help:    "Remove the method from the rule."},
		{Code: codeNpmScopedRefused, Severity: diag.Warning, run: checkNpmScoped,
			Purpose: "An inject entry for an npm registry (registry.npmjs.org, registry.yarnpkg.com, npm.pkg.github.com, or any host whose rules name a scope such as `/@acme`) has rules under which npm cannot read a scoped package: npm reads `@acme/widgets` as `GET /@acme%2fwidgets`, which a rule without `encodedSlash: segment` allows only where it allows it both as sent and with the `%2F` read as `/` (a prefix other than `/` cannot), and its tarballs as `GET /@acme/widgets/-/<file>`.",
			Help:    "Give the rule that names the scope `encodedSlash: segment` and the pattern `/@acme%2F*` (each package document of the scope) beside the prefix `/@acme` (their tarballs); or allow `GET` and `HEAD` under `/` (npm's reads; its writes are `PUT` and `DELETE`); or silence the code on the Connection with the annotation `keyhole.dev/ignore: ConnectionNpmScopedRefused` if it serves no scoped package."},
		{Code: codePathPrefixInvalid, Severity: diag.Error,
			Purpose: "A rule's path prefix holds a query, fragment, dot or empty segment, a percent-encoding (`%41`; `%2F` unless the rule has `encodedSlash: segment`, and then never at a segment's start or end, beside another or around a dot segment), a `;` parameter, a `*`, a backslash, a space or a character outside ASCII, or a trailing slash that changes its meaning: the proxy refuses all but the last, so render would refuse the plan. A keyhole.yaml catalog connector's `readOnly` prefixes and patterns are held to the same rules.",
			Help:    "Write the prefix as plain whole segments, e.g. `/repos/acme/widgets`; it also matches everything under it. Where the upstream reads an encoded `/` as part of a name (npm's `/@acme%2fwidgets`, GitLab's `/api/v4/projects/acme%2Fwidgets`), give the rule `encodedSlash: segment` and spell the `%2F` as the upstream does."},
		{Code: codeRuleShadowed, Severity: diag.Warning,
			Purpose: "A rule allows nothing another rule of the same entry does not already allow.",
			Help:    "Remove the redundant rule, or narrow the broader one."},
		{Code: codePlaceholderReserved, Severity: diag.Error, run: checkPlaceholderEnv,
			Purpose: "A placeholder variable (a Connection's placeholderEnv, or the `env` of a keyhole.yaml catalog connector) collides with the proxy, CA-bundle or tool variables keyhole sets in every sandbox (`HTTPS_PROXY`, `SSL_CERT_FILE`, `JAVA_TOOL_OPTIONS`, `WGETRC`, ...), which render refuses to override.",
			Help:    "Choose another variable name for the placeholder."},
		{Code: codeBindingClassMissing, Severity: diag.Error, run: checkBindingRefs,
			Purpose: "A binding names a SandboxClass that is not in the input.",
			Help:    "Add the SandboxClass, or correct the binding's `sandbox`."},
		{Code: codeBindingRoleUndeclared, Severity: diag.Error,
			Purpose: "A binding's role is not declared by its SandboxClass's spec.connections.",
			Help:    "Declare the role on the SandboxClass, or bind a role it declares."},
		{Code: codeBindingConnectionMissing, Severity: diag.Error,
			Purpose: "A binding names a Connection that is not in the input (in the binding's namespace).",
			Help:    "Add the Connection, or correct the binding's `connection`."},
		{Code: codeBindingHostConflict, Severity: diag.Error, run: checkBindingConflicts,
			Purpose: "Two Connections bound to one sandbox inject the same host: by an AgentRuntime's or ToolRegistry's bindings, or by two sandbox connectors of one agent.yaml (the same connector twice with two connections, or two catalog connectors sharing a host), of which the sandbox would get only the first.",
			Help:    "Bind only one Connection per injected host in a sandbox; give an agent's connectors on one host one connection, or remove one."},
		{Code: codeBindingEnvConflict, Severity: diag.Error,
			Purpose: "Two Connections bound to one sandbox set the same placeholder variable, by bindings or by two sandbox connectors of one agent.yaml whose catalog entries name the same variable.",
			Help:    "Rename one of the placeholderEnv entries, or give the agent's connectors one connection."},
		{Code: codeSandboxNameInvalid, Severity: diag.Error, run: checkSandboxNames,
			Purpose: fmt.Sprintf("A sandbox's name, `<AgentRuntime or ToolRegistry>-<SandboxClass>` for a binding and `<name>-<sandbox>` for an agent, is not a DNS label of at most %d characters: render names the sandbox's objects `<name>%s`, and a Service's name holds at most 63.", MaxSandboxName, SandboxNameSuffix),
			Help:    "Rename the AgentRuntime, ToolRegistry or agent, or the SandboxClass, so that the two joined by `-` make a short DNS label (or change the kustomize namePrefix or nameSuffix that lengthens both)."},
		{Code: codeSandboxNameCollision, Severity: diag.Error, run: checkSandboxCollisions,
			Purpose: "Two sandboxes of one deploy unit have one name in one namespace: an AgentRuntime `a-b` with SandboxClass `c` and an AgentRuntime `a` with SandboxClass `b-c` (both `a-b-c`), an AgentRuntime and a ToolRegistry of one name on one SandboxClass, or an agent.yaml agent and an AgentRuntime of one name on one sandbox. Render names every object of a sandbox after it and refuses the plan. The message names both sources' positions.",
			Help:    "Rename one of the AgentRuntime, ToolRegistry or agent, or its SandboxClass."},
		{Code: codeSandboxImageMissing, Severity: diag.Error, run: checkSandboxImages,
			Purpose: "A sandbox has no container image: its SandboxClass sets no `spec.image` (for an agent.yaml agent: keyhole.yaml sets no `sandboxImage`), and no default image is given with `--sandbox-image`, so render cannot write its Deployment. A SandboxClass is reported once, however many bindings use it.",
			Help:    "Set the SandboxClass's `spec.image` (an agent's: keyhole.yaml's `sandboxImage`), or pass `--sandbox-image IMAGE`, which check, render and diff all take, so that each judges the same render. `render --target omnia` and `explain` need no image and do not report it; a repository rendered only with `--target omnia` can ignore the code in keyhole.yaml."},
		{Code: codeConnectionUnbound, Severity: diag.Info, run: checkUnbound,
			Purpose: "No AgentRuntime or ToolRegistry binds the Connection (reported only when the input binds some Connections).",
			Help:    "Bind it to a sandbox role, or remove it if it is no longer used."},

		{Code: codeAccessAboveCeiling, Severity: diag.Error,
			Purpose: "A sandbox's access is not proven under keyhole.yaml's `ceiling`: a rule (or an inject entry without rules, a connector's read-only rules, a passthrough host) allows a request a ceiling entry forbids for that sandbox, given as the smallest such request; or the sandbox's rules exceed the comparison's bounds, so no proof was possible. The proof decides one request per class of requests the rules and the entry cannot tell apart with the proxy's own decision function, as `keyhole diff` does. An object's `keyhole.dev/ignore` annotation does not silence it; keyhole.yaml's `ignore` does.",
			Help:    "Narrow the rule that allows the request, or, where the ceiling's owners agree, change the ceiling (see docs/ceiling.md)."},
		{Code: codeConfigInvalid, Severity: diag.Error,
			Purpose: "The repository's Config (keyhole.yaml) has an unknown field, an unknown code to ignore, a second Config, a Config outside the repository's root (the git working tree's top, or the working directory outside one: the one Config read, whatever paths are named), a `ceiling` entry keyhole cannot read (an unknown field, no hosts, a host that is not canonical, a method, path or sandbox name pattern the proxy's rules would refuse), or a catalog rule whose `graphql` condition the proxy would refuse or never match (beside a `body` condition, on a rule without `POST`, an operation type listed twice).",
			Help:    "Correct the field named in the message; see the Config section of the README."},
		{Code: codeAgentConnectorUnknown, Severity: diag.Error, run: checkAgents,
			Purpose: "An agent.yaml connector is not in the connector catalog.",
			Help:    "Use a catalog connector (github, gitlab, slack, linear, openai, anthropic), or add yours to keyhole.yaml's catalog."},
		{Code: codeAgentSandboxMissing, Severity: diag.Error,
			Purpose: "A connector has `sandbox: true` but the agent has no `sandbox`.",
			Help:    "Add `sandbox` (e.g. `daytona`) to the agent, or remove `sandbox: true`."},
		{Code: codeAgentConnectionMissing, Severity: diag.Error,
			Purpose: "A sandbox connector's `connection` label resolves to no Connection of the agent's deploy unit (or to several). An agent.yaml joins the deploy unit of the kustomization beside it, or the files read outside any kustomization when none is: one at a GitOps repository's top reads none of the Connections a Flux Kustomization or an Argo CD Application builds, and the message names the unit that has one.",
			Help:    "Name an existing Connection; move the agent.yaml beside a kustomization of the deploy unit that holds its Connections; set `namespace` in keyhole.yaml when the name is in several namespaces."},
		{Code: codeAgentConnectionUnresolved, Severity: diag.Warning,
			Purpose: "A connector without `sandbox: true` names a `connection` label that resolves to no Connection of the agent's deploy unit (or to several), by the rules of `AgentConnectionMissing`. The sandbox does not use such a connector, so nothing keyhole renders fails; the agent's tools use the connection of that label, and a label naming no Connection of the repository is a typo or a connection the app owns elsewhere.",
			Help:    "Name an existing Connection; or, where the connection is the app's and not in this repository, ignore the code for that agent.yaml in keyhole.yaml."},
		{Code: codeAgentReadOnlyUnenforced, Severity: diag.Error,
			Purpose: "A sandbox connector's API cannot tell reads from writes by method and path, so the read-only promise cannot be kept.",
			Help:    "Remove `sandbox: true`, set `read_only: false` on the connector to let its Connection's rules decide, or give the connector `readOnly` rules in keyhole.yaml's catalog."},
		{Code: codeAgentConnectionRulesIgnored, Severity: diag.Warning,
			Purpose: "A read-only agent connector's Connection has rules on one of the connector's hosts that allow a method the catalog's read-only rules do not: the sandbox gets the catalog's read-only rules, and the Connection's do not apply, so what the Connection seems to allow (a model call, a POST) is refused.",
			Help:    "Set `read_only: false` on the connector to let the Connection's rules decide, or drop the rules from the Connection if the read-only rules are what you want."},
		{Code: codeAgentConnectorUnrestricted, Severity: diag.Warning,
			Purpose: "An agent connector with `read_only: false` takes its Connection's rules, and the Connection's entry for one of the connector's hosts has none: every method on every path of that host carries the credential.",
			Help:    "Give the Connection's entry rules that name what the agent needs."},
		{Code: codeAgentConnectorHostUncovered, Severity: diag.Info,
			Purpose: "An agent connector with `read_only: false` takes its Connection's entries, and the Connection has none for one of the connector's hosts: the sandbox reaches that host without the credential.",
			Help:    "Add an inject entry for the host to the Connection if the agent needs the credential there."},
		{Code: codeAgentAllowedDomain, Severity: diag.Error,
			Purpose: "An `allowed_domains` entry is not a hostname.",
			Help:    "Write a lowercase DNS name without scheme, port, path or wildcard, e.g. `pypi.org`."},
		{Code: codeAgentToolUnknown, Severity: diag.Error,
			Purpose: "A connector's `tools` entry is not a tool the connector offers.",
			Help:    "Use a tool the catalog lists for the connector."},
		{Code: codeAgentSetupWithout, Severity: diag.Error,
			Purpose: "`sandbox_options.setup` is present but the agent has no sandbox to run it in.",
			Help:    "Add `sandbox`, or remove `sandbox_options.setup`."},
	})
}

func checkSecretMissing(p *pass) {
	for _, c := range p.connList {
		s, r := p.secretOf(c)
		if s != nil || c.secretName() == "" {
			continue // no secretRef: checkWorkloadIdentity
		}
		hint := didYouMean(r.name, namesIn(p.secrets, r.namespace))
		if renamed := p.renamedSecret(r, c.obj().Name); renamed != "" {
			hint = p.renamedHint(r.namespace, renamed)
		} else if elsewhere, unnamed := p.secretNamespaces(r.name); len(elsewhere) > 0 {
			ns := fmt.Sprintf("; a Secret %s is in namespace %s", r.name, strings.Join(elsewhere, ", "))
			if c.obj().Namespace == "" || unnamed {
				ns += fmt.Sprintf(" (an object that names no namespace is in %s, where render places it; --namespace changes that)", p.opts.DefaultNamespace)
			}
			hint = ns + hint
		}
		if other := p.otherClusterSecret(r); other != nil {
			hint = fmt.Sprintf("; deploy unit %s declares it, but that unit deploys to another cluster (%s), and units of different clusters never share Secrets%s",
				other.Name, orThisCluster(other.Cluster), hint)
		}
		note := p.notCreatedNote(r)
		if hint == "" && note == "" && !p.opts.AllowMissingSecrets {
			// Nothing near it: say how a Secret kept out of Git is
			// declared, and what to pass where it lives elsewhere.
			hint = "; declare it as a SealedSecret, ExternalSecret or SOPS Secret, or pass --allow-missing-secrets"
		}
		p.report(codeSecretMissing, &c.item, path{"spec", "credential", "secretRef", "name"}, false,
			"Secret %s is not in the input; the claim fails at run time when the proxy cannot read it%s%s%s", r, note, hint, p.unreadNote())
	}
}

func checkTemplates(p *pass) {
	for _, c := range p.connList {
		for i, in := range c.w.Spec.Placement.Inject {
			if in.Value == nil {
				continue
			}
			t, err := config.ParseTemplate(*in.Value)
			switch {
			case err != nil:
				p.report(codeTemplateInvalid, &c.item, path{"spec", "placement", "inject", i, "value"}, false,
					"value of inject entry %d is not a valid template: %s%s", i, strings.TrimPrefix(err.Error(), config.ErrTemplate.Error()+": "), syntaxHint(*in.Value, err))
			case t.LiteralBreak():
				// The proxy's loader refuses it too (spec.md §5).
				p.report(codeTemplateInvalid, &c.item, path{"spec", "placement", "inject", i, "value"}, false,
					"value of inject entry %d holds a line break outside a key reference, which a header value cannot hold (a block scalar, value: |, ends with one); write the value on one line", i)
			}
		}
	}
}

func checkTemplateBraces(p *pass) {
	for _, c := range p.connList {
		for i, in := range c.w.Spec.Placement.Inject {
			if in.Value == nil {
				continue
			}
			if t, err := config.ParseTemplate(*in.Value); err == nil && t.StrayBrace() {
				p.report(codeTemplateBrace, &c.item, path{"spec", "placement", "inject", i, "value"}, false,
					"value of inject entry %d closes a key reference with a brace too many ({{ .key }}}): the extra brace is literal text, which the proxy would send after the credential; remove it, e.g. \"Bearer {{ .token }}\"", i)
			}
		}
	}
}

// syntaxHint says how a value is written when Go's template parser itself
// refuses it (an unclosed action, a stray brace): its own message
// ("unclosed action") names the fault but not the form keyhole takes.
// The refusals of keyhole's own limits (a function, a pipeline, a field)
// say what to write already, after a "; ".
func syntaxHint(value string, err error) string {
	tree := parse.New("value")
	tree.Mode = parse.SkipFuncCheck
	if _, perr := tree.Parse(value, "{{", "}}", map[string]*parse.Tree{}); perr == nil || strings.Contains(err.Error(), "; ") {
		return ""
	}
	return `; write literal text and references to the Secret's keys, each opened with {{ and closed with }}: "Bearer {{ .token }}"`
}

// keyUse is one Secret key an inject entry reads, and where it names it:
// in the value of inject entry inject, or in its basic field (field). The
// path is built only for a diagnostic: every Connection's keys are looked
// at by several checks, and few are reported.
type keyUse struct {
	key    string
	inject int
	field  string // "value", "usernameKey" or "passwordKey"
	// offset is where in the template value the reference starts, or -1
	// when the use is a whole field (a basic key).
	offset int
}

// at is the path of the field that names the key.
func (u keyUse) at() path {
	if u.field == "value" {
		return path{"spec", "placement", "inject", u.inject, "value"}
	}
	return path{"spec", "placement", "inject", u.inject, "basic", u.field}
}

// keysUsed lists the keys in, inject entry i, reads: its template's
// references or its basic keys.
func keysUsed(in *injectWire, i int) []keyUse {
	var uses []keyUse
	if t := in.template(); t != nil {
		for _, r := range t.Refs() {
			uses = append(uses, keyUse{key: r.Key, inject: i, field: "value", offset: r.Offset})
		}
	}
	if b := in.Basic; b != nil {
		uses = append(uses,
			keyUse{key: b.UsernameKey, inject: i, field: "usernameKey", offset: -1},
			keyUse{key: b.PasswordKey, inject: i, field: "passwordKey", offset: -1})
	}
	return uses
}

// firstUses lists the keys the inject entries read, each key once per
// entry, at its first use there: a check of a key's presence or value
// reports it once for each entry that reads it.
func firstUses(inject []injectWire) []keyUse {
	var uses []keyUse
	for i := range inject {
		seen := map[string]bool{}
		for _, u := range keysUsed(&inject[i], i) {
			if !seen[u.key] {
				seen[u.key] = true
				uses = append(uses, u)
			}
		}
	}
	return uses
}

func checkSecretKeys(p *pass) {
	for _, c := range p.connList {
		s, r := p.secretOf(c)
		if s == nil || s.keysUnknown || s.merges {
			continue // keys unknown: checkKeysUnknown says so
		}
		for _, u := range firstUses(c.w.Spec.Placement.Inject) {
			if _, ok := s.values.get(u.key); ok {
				continue
			}
			keys := s.keys()
			near := didYouMean(u.key, keys)
			if n := diag.Suggest(u.key, keys); n != "" && s.declared != nil {
				// A key an ExternalSecret, a SealedSecret or a SOPS
				// Secret writes is as likely to be the misspelt one
				// as the key the Connection reads.
				near = fmt.Sprintf("; %s writes %q, one edit from it: correct whichever of the two is misspelt", s.decl().from, n)
			}
			p.reportUse(codeSecretKeyMissing, &c.item, u, "key %q is not in Secret %s%s (it has: %s)%s", u.key, r, near, listOrNone(keys), s.replacedNote(u.key, near != ""))
		}
	}
}

// reportNamedKeyMissing reports, at the credential field at, that key,
// which the credential names for a purpose of its own (role: "which holds
// the App's private key"), is not in Secret r; credential kinds that read
// fixed keys rather than template references share it.
func (p *pass) reportNamedKeyMissing(c *connection, at path, s *secret, r ref, key, role string) {
	have := s.keys()
	p.report(codeSecretKeyMissing, &c.item, at, true, "key %q, %s, is not in Secret %s%s (it has: %s)",
		key, role, r, didYouMean(key, have), listOrNone(have))
}

func checkInjectionValues(p *pass) {
	for _, c := range p.connList {
		s, r := p.secretOf(c)
		if s == nil {
			continue
		}
		for _, u := range firstUses(c.w.Spec.Placement.Inject) {
			v, ok := s.values.get(u.key)
			if !ok || !v.known || v.err() == nil || errors.Is(v.err(), config.ErrValueEmpty) {
				continue
			}
			if errors.Is(v.err(), config.ErrValueControl) {
				p.reportUse(codeInjectionInvalid, &c.item, u,
					"key %q of Secret %s%s holds a control character (other than tab), which a header value may not hold; store the value without it", u.key, r, s.keyAt(u.key))
				continue
			}
			if errors.Is(v.err(), config.ErrValueNUL) {
				p.reportUse(codeInjectionInvalid, &c.item, u,
					"key %q of Secret %s%s holds a NUL byte, which cannot go into a header; store the value without it", u.key, r, s.keyAt(u.key))
				continue
			}
			p.reportUse(codeInjectionInvalid, &c.item, u,
				"key %q of Secret %s%s holds a line break other than a single trailing one, so the injected value spans more than one line; store the value on one line", u.key, r, s.keyAt(u.key))
		}
	}
}

// keyAt is " (FILE:LINE:COL)", where the Secret writes key's value, for
// a message about the value that is placed at the Connection reading it:
// the fix is in the Secret. It is "" when the place is not known (a
// Secret released and not read again, a key a generator makes).
func (s *secret) keyAt(key string) string {
	if s.declared != nil {
		return ""
	}
	root, _ := s.tree()
	if root == nil {
		return ""
	}
	for _, field := range []string{"stringData", "data"} {
		values, _ := child(root, field)
		if n, _ := child(values, key); n != nil {
			pos, _ := s.doc.Where(n)
			return " (" + pos.String() + ")"
		}
	}
	return ""
}

// secretNamespaces lists the namespaces that hold a Secret of that name
// in this unit, and whether one of those Secrets names no namespace of
// its own (and so is in the default one).
func (p *pass) secretNamespaces(name string) (namespaces []string, unnamed bool) {
	for r, s := range p.secrets {
		if r.name != name {
			continue
		}
		if !slices.Contains(namespaces, r.namespace) {
			namespaces = append(namespaces, r.namespace)
		}
		unnamed = unnamed || s.obj().Namespace == ""
	}
	slices.Sort(namespaces)
	return namespaces, unnamed
}

// namesIn returns the names of m's keys in namespace ns, in no order:
// the candidates a did-you-mean hint picks from.
func namesIn[V any](m map[ref]V, ns string) []string {
	var names []string
	for r := range m {
		if r.namespace == ns {
			names = append(names, r.name)
		}
	}
	return names
}

// listCap is how many names a message lists before it says how many more
// there are: a Secret may hold thousands of keys, and a message is one
// line a reader takes in at a glance.
const listCap = 20

// listOrNone lists keys sorted, at most listCap of them, or says there are
// none.
func listOrNone(keys []string) string {
	if len(keys) == 0 {
		return "no keys"
	}
	return capList(keys)
}

// capList lists names sorted, at most listCap of them and then how many
// more there are.
func capList(names []string) string {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) <= listCap {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:listCap], ", "), len(names)-listCap)
}

// otherClusterSecret returns the first unit of another cluster that holds
// the Secret r, or nil.
func (p *pass) otherClusterSecret(r ref) *source.Unit {
	for _, o := range p.units {
		if o.unit.Cluster != p.unit.Cluster && o.secrets[r] != nil {
			return o.unit
		}
	}
	return nil
}

// orThisCluster names a unit's cluster in a message.
func orThisCluster(cluster string) string {
	if cluster == "" {
		return "the cluster the repository's plain kustomizations deploy to"
	}
	return cluster
}
