package compiler

// Wire types: the inputs as they are written, decoded only after the
// document has passed its schema. They carry no policy; resolve turns them
// into the Plan.

import (
	"slices"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
)

// metadata is what the compiler reads of an object's metadata: its
// annotations are read from the tree, when a diagnostic asks (see
// item.ignores).
type metadata struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
}

type connectionWire struct {
	Metadata metadata `yaml:"metadata"`
	Spec     struct {
		Hosts      []string `yaml:"hosts"`
		Credential struct {
			Kind      string `yaml:"kind"`
			SecretRef struct {
				Name      string `yaml:"name"`
				Namespace string `yaml:"namespace"`
			} `yaml:"secretRef"`
			GitHubApp *githubAppWire `yaml:"githubApp"`
			AWSSigV4  *awsSigV4Wire  `yaml:"awsSigV4"`
			OAuth2    *oauth2Wire    `yaml:"oauth2"`
			Google    *googleWire    `yaml:"googleServiceAccount"`
		} `yaml:"credential"`
		Placement struct {
			Inject []injectWire `yaml:"inject"`
			// Env and Files place Secret keys in the sandbox; the
			// compiler reads only whether there are any.
			Env   present `yaml:"env"`
			Files present `yaml:"files"`
		} `yaml:"placement"`
		AllowInternalAddresses bool `yaml:"allowInternalAddresses"`
		// Enforcement is "enforce" (or empty) or "audit"
		// (EnforcementAudit).
		Enforcement string `yaml:"enforcement"`
	} `yaml:"spec"`
}

// present records whether a list has any item, and nothing else.
type present bool

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *present) UnmarshalYAML(n *yaml.Node) error {
	*p = n.Kind == yaml.SequenceNode && len(n.Content) > 0
	return nil
}

// githubAppWire is a githubApp credential's App and installation.
type githubAppWire struct {
	AppID          int64  `yaml:"appId"`
	InstallationID int64  `yaml:"installationId"`
	Owner          string `yaml:"owner"`
	PrivateKeyKey  string `yaml:"privateKeyKey"`
	API            string `yaml:"api"`
}

// api is the REST API host tokens are minted from.
func (g *githubAppWire) api() string {
	if g.API == "" {
		return config.GitHubAPIHost
	}
	return g.API
}

// privateKeyKey is the Secret key of the App's private key.
func (g *githubAppWire) privateKeyKey() string {
	if g.PrivateKeyKey == "" {
		return DefaultGitHubAppKey
	}
	return g.PrivateKeyKey
}

// githubApp returns the Connection's App when its credential is one
// that names an App and one installation, nil otherwise (checkGitHubApps
// reports why).
func (w *connectionWire) githubApp() *githubAppWire {
	g := w.Spec.Credential.GitHubApp
	if w.Spec.Credential.Kind != CredentialKindGitHubApp || g == nil || g.AppID <= 0 || g.InstallationID < 0 || (g.InstallationID == 0) == (g.Owner == "") {
		return nil
	}
	return g
}

type injectWire struct {
	Hosts          []string   `yaml:"hosts"`
	Header         string     `yaml:"header"`
	Value          *string    `yaml:"value"`
	Basic          *basicWire `yaml:"basic"`
	PlaceholderEnv []string   `yaml:"placeholderEnv"`
	Rules          []ruleWire `yaml:"rules"`
}

// template returns the entry's value template parsed, nil where it has
// no value or the value does not parse (checkTemplates says why).
func (in *injectWire) template() *config.Template {
	if in.Value == nil {
		return nil
	}
	t, err := config.ParseTemplate(*in.Value)
	if err != nil {
		return nil
	}
	return t
}

type basicWire struct {
	UsernameKey string `yaml:"usernameKey"`
	PasswordKey string `yaml:"passwordKey"`
}

type ruleWire struct {
	Methods      []string    `yaml:"methods"`
	PathPrefixes []string    `yaml:"pathPrefixes"`
	PathPatterns []string    `yaml:"pathPatterns"`
	EncodedSlash string      `yaml:"encodedSlash"`
	WebSocket    bool        `yaml:"websocket"`
	MCP          *schema.MCP `yaml:"mcp"`
}

// proxy is the rule as the proxy reads it.
func (r ruleWire) proxy() config.Rule {
	return config.Rule{Methods: slices.Clone(r.Methods), PathPrefixes: slices.Clone(r.PathPrefixes), PathPatterns: slices.Clone(r.PathPatterns), EncodedSlash: r.EncodedSlash, WebSocket: r.WebSocket, MCP: proxyMCP(r.MCP)}
}

type secretWire struct {
	Metadata   metadata          `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
}

type sandboxClassWire struct {
	Metadata metadata `yaml:"metadata"`
	Spec     struct {
		Image       string     `yaml:"image"`
		Connections []roleWire `yaml:"connections"`
	} `yaml:"spec"`
}

// roleWire is a role a SandboxClass offers its Connections.
type roleWire struct {
	Role string `yaml:"role"`
}

// bindingOwnerWire is an AgentRuntime or a ToolRegistry: both bind
// Connections to SandboxClass roles under spec.sandbox.
type bindingOwnerWire struct {
	Metadata metadata `yaml:"metadata"`
	Spec     struct {
		Sandbox struct {
			Enabled     *bool         `yaml:"enabled"`
			Connections []bindingWire `yaml:"connections"`
		} `yaml:"sandbox"`
	} `yaml:"spec"`
}

type bindingWire struct {
	Sandbox    string `yaml:"sandbox"`
	Role       string `yaml:"role"`
	Connection string `yaml:"connection"`
}
