package policy

import (
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// splitConfig is one GitLab host whose API takes a PRIVATE-TOKEN header
// and whose git smart-HTTP paths take basic auth, from one Secret.
func splitConfig() *config.Config {
	basic := &config.Inject{Secret: "gitlab", Basic: &config.BasicInject{UsernameKey: "username", PasswordKey: "token"}}
	return &config.Config{
		APIVersion: config.APIVersion, Kind: config.Kind,
		Sandbox: config.SandboxRef{Name: "agent"},
		Hosts: []config.Host{{
			Name: "gitlab.example.com", Connection: "gitlab",
			Inject: config.Inject{Secret: "gitlab", Header: &config.HeaderInject{Name: "PRIVATE-TOKEN", Value: "{{ .token }}"}},
			Rules: []config.Rule{
				{Methods: []string{"GET"}, PathPrefixes: []string{"/api/v4/projects"}},
				{Methods: []string{"GET"}, PathPatterns: []string{"/acme/*/info/refs"}, Inject: basic},
				{Methods: []string{"POST"}, PathPatterns: []string{"/acme/*/git-upload-pack"}, Inject: basic},
				// Overlaps the API rule with the other form: ambiguous.
				{Methods: []string{"GET"}, PathPrefixes: []string{"/api/v4/projects/1"}, Inject: basic},
			},
		}},
	}
}

func TestDecideSplitForms(t *testing.T) {
	p, err := NewPolicy(splitConfig())
	if err != nil {
		t.Fatal(err)
	}
	req := func(method, target string) RequestInfo {
		h := "gitlab.example.com"
		return RequestInfo{Kind: KindTunnel, Method: method, Target: target, ConnectHost: h + ":443", SNI: h, Host: h, BodyComplete: true}
	}
	tests := map[string]struct {
		req    RequestInfo
		action Action
		form   string // header or basic, for an allowed request
		why    string // in the refusal's message
	}{
		"api gets the header":          {req: req("GET", "/api/v4/projects/7/issues"), action: ActionInject, form: "header"},
		"info refs gets basic":         {req: req("GET", "/acme/widgets.git/info/refs?service=git-upload-pack"), action: ActionInject, form: "basic"},
		"upload pack gets basic":       {req: req("POST", "/acme/widgets.git/git-upload-pack"), action: ActionInject, form: "basic"},
		"receive pack allowed by none": {req: req("POST", "/acme/widgets.git/git-receive-pack"), action: ActionRefuse, why: "no rule"},
		"two forms refused":            {req: req("GET", "/api/v4/projects/1/issues"), action: ActionRefuse, why: "different forms"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := p.Decide(tc.req)
			if d.Action != tc.action {
				t.Fatalf("action %s (%s), want %s", d.Action, d.Message, tc.action)
			}
			if tc.action == ActionRefuse {
				if d.HostPolicy() != nil || !strings.Contains(d.Message, tc.why) {
					t.Fatalf("refusal %q (host policy %v), want one saying %q and carrying no host", d.Message, d.HostPolicy(), tc.why)
				}
				return
			}
			in := d.HostPolicy().Inject
			switch tc.form {
			case "header":
				if in.Header == nil || in.Header.Name != "PRIVATE-TOKEN" || d.HostPolicy().Template() == nil {
					t.Fatalf("inject %+v, want the PRIVATE-TOKEN header with its template", in)
				}
			case "basic":
				if in.Basic == nil || in.Header != nil || d.HostPolicy().Template() != nil {
					t.Fatalf("inject %+v, want basic auth", in)
				}
			}
		})
	}
}

func TestRuleInjectValidated(t *testing.T) {
	tests := map[string]struct {
		edit func(*config.Config)
		want string
	}{
		"other secret": {edit: func(c *config.Config) {
			c.Hosts[0].Rules[1].Inject = &config.Inject{Secret: "other", Basic: c.Hosts[0].Rules[1].Inject.Basic}
		}, want: "not the host's Secret"},
		"no form": {edit: func(c *config.Config) { c.Hosts[0].Rules[1].Inject = &config.Inject{Secret: "gitlab"} }, want: "exactly one is required"},
		"substitute": {edit: func(c *config.Config) {
			c.Hosts[0].Rules[1].Inject = &config.Inject{Secret: "gitlab", Substitute: &config.SubstituteInject{Placeholder: "omnia-injected-gitlab", Key: "token"}}
		}, want: "sets header or basic"},
		"forbidden header": {edit: func(c *config.Config) {
			c.Hosts[0].Rules[1].Inject = &config.Inject{Secret: "gitlab", Header: &config.HeaderInject{Name: "Host", Value: "{{ .token }}"}}
		}, want: "cannot be injected"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := splitConfig()
			tc.edit(c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if err := splitConfig().Validate(); err != nil {
		t.Fatalf("the split config is refused: %v", err)
	}
}
