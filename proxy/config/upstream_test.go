package config

import (
	"errors"
	"strings"
	"testing"
)

// TestUpstreamProxyValidate: an upstreamProxy the proxy could not use as
// written is refused, each problem at its field.
func TestUpstreamProxyValidate(t *testing.T) {
	tests := map[string]struct {
		up   UpstreamProxy
		want string // "" means valid
	}{
		"minimal":           {up: UpstreamProxy{URL: "http://squid.egress:3128"}},
		"every field":       {up: UpstreamProxy{URL: "http://10.0.0.5:3128", Auth: &BasicInjectSecret{Secret: "corp-proxy", UsernameKey: "u", PasswordKey: "p"}, NoProxy: []string{"git.corp.example", ".corp.example", "10.0.0.0/8", "fd00::/8"}, Resolve: ResolveUpstream, AllowInternalAddress: true}},
		"https scheme":      {up: UpstreamProxy{URL: "https://squid:3128"}, want: `upstreamProxy.url: has scheme "https"`},
		"user in the URL":   {up: UpstreamProxy{URL: "http://u:p@squid:3128"}, want: "upstreamProxy.url: holds user information"},
		"a path":            {up: UpstreamProxy{URL: "http://squid:3128/x"}, want: "upstreamProxy.url: has a path"},
		"no host":           {up: UpstreamProxy{URL: "http://:3128"}, want: "upstreamProxy.url: names no host"},
		"bad port":          {up: UpstreamProxy{URL: "http://squid:99999"}, want: "upstreamProxy.url: has port"},
		"bad resolve":       {up: UpstreamProxy{URL: "http://squid:3128", Resolve: "dns"}, want: `upstreamProxy.resolve: is "dns"`},
		"bad auth key":      {up: UpstreamProxy{URL: "http://squid:3128", Auth: &BasicInjectSecret{Secret: "s", UsernameKey: "..x", PasswordKey: "p"}}, want: "upstreamProxy.auth.usernameKey"},
		"bare address":      {up: UpstreamProxy{URL: "http://squid:3128", NoProxy: []string{"10.0.0.1"}}, want: "upstreamProxy.noProxy[0]: \"10.0.0.1\" is an address"},
		"bad range":         {up: UpstreamProxy{URL: "http://squid:3128", NoProxy: []string{"10.0.0.0/33"}}, want: "upstreamProxy.noProxy[0]"},
		"upper-case domain": {up: UpstreamProxy{URL: "http://squid:3128", NoProxy: []string{".Corp.example"}}, want: "upstreamProxy.noProxy[0]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := Config{APIVersion: APIVersion, Kind: Kind, Sandbox: SandboxRef{Name: "s"}, UpstreamProxy: &tc.up}
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}
