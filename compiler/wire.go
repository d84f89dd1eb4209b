package compiler

// Wire types: the inputs as they are written, decoded only after the
// document has passed its schema. They carry no policy; resolve turns them
// into the Plan.

import (
	"slices"

	"keyhole.dev/keyhole/proxy/config"
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
		} `yaml:"credential"`
		Placement struct {
			Inject []injectWire `yaml:"inject"`
		} `yaml:"placement"`
		AllowInternalAddresses bool `yaml:"allowInternalAddresses"`
	} `yaml:"spec"`
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
	Methods      []string `yaml:"methods"`
	PathPrefixes []string `yaml:"pathPrefixes"`
	PathPatterns []string `yaml:"pathPatterns"`
	EncodedSlash string   `yaml:"encodedSlash"`
	WebSocket    bool     `yaml:"websocket"`
}

// proxy is the rule as the proxy reads it.
func (r ruleWire) proxy() config.Rule {
	return config.Rule{Methods: slices.Clone(r.Methods), PathPrefixes: slices.Clone(r.PathPrefixes), PathPatterns: slices.Clone(r.PathPatterns), EncodedSlash: r.EncodedSlash, WebSocket: r.WebSocket}
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
