package netrules

import (
	"errors"
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	ok := Config{ProxyUID: 65531, Port: 3129, DNSPort: 3053, AdminPort: 9090}
	tests := map[string]struct {
		c       Config
		wantErr bool
		v4Has   []string
		v4Not   []string
		v6Has   []string
		v6Not   []string
		// v4Order and v6Order list lines that must appear in this
		// order.
		v4Order, v6Order []string
	}{
		"valid": {c: ok,
			v4Has: []string{
				"-A KEYHOLE_OUTPUT -m owner --uid-owner 65531 -j RETURN",
				"-A KEYHOLE_OUTPUT -p tcp -j REDIRECT --to-ports 3129",
				"-A OUTPUT -p udp --dport 53 -j KEYHOLE_OUTPUT",
				"-A KEYHOLE_OUTPUT -p udp --dport 53 -j REDIRECT --to-ports 3053",
				"-A KEYHOLE_OUTPUT -p tcp --dport 53 -j REDIRECT --to-ports 3053",
				"-A KEYHOLE_OUTPUT -d 127.0.0.1/32 -p udp --dport 3053 -m conntrack --ctstate DNAT -j RETURN",
				"-A KEYHOLE_OUTPUT -o lo -p tcp --dport 9090 -j REJECT --reject-with tcp-reset",
			},
			// No DNS leaves the pod but the proxy's: no rule lets port 53 pass.
			v4Not: []string{"--dport 53 -j RETURN", "-j ACCEPT", "icmp6"},
			v6Has: []string{"-A KEYHOLE_OUTPUT -o lo -p tcp --dport 9090 -j REJECT --reject-with tcp-reset", "icmp6-adm-prohibited",
				// The kernel's neighbour discovery, which belongs to no
				// user: without it no IPv6 neighbour is reached.
				"-A KEYHOLE_OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type router-solicitation -m hl --hl-eq 255 -j RETURN",
				"-A KEYHOLE_OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type neighbour-solicitation -m hl --hl-eq 255 -j RETURN",
				"-A KEYHOLE_OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type neighbour-advertisement -m hl --hl-eq 255 -j RETURN",
			},
			// No other ICMPv6 passes: echo, redirects, router
			// advertisements, MLD.
			v6Not: []string{"REDIRECT", "*nat", "--dport 53", "127.0.0.1", "-j ACCEPT", "echo", "redirect", "router-advertisement", "--icmpv6-type 1"},
			v6Order: []string{
				"-A KEYHOLE_OUTPUT -m owner --uid-owner 65531 -j RETURN",
				"--icmpv6-type neighbour-advertisement -m hl --hl-eq 255 -j RETURN",
				"-A KEYHOLE_OUTPUT -j REJECT --reject-with icmp6-adm-prohibited",
			},
			v4Order: []string{
				// nat: the proxy's own DNS is its resolvers'; everyone
				// else's, loopback included, is redirected.
				"-A KEYHOLE_OUTPUT -m owner --uid-owner 65531 -j RETURN",
				"-A KEYHOLE_OUTPUT -p udp --dport 53 -j REDIRECT --to-ports 3053",
				"-A KEYHOLE_OUTPUT -o lo -j RETURN",
				"-A KEYHOLE_OUTPUT -p tcp -j REDIRECT --to-ports 3129",
				// filter: the proxy's user first, then the admin
				// refusal before loopback passes.
				"*filter",
				"-A KEYHOLE_OUTPUT -m owner --uid-owner 65531 -j RETURN",
				"-A KEYHOLE_OUTPUT -o lo -p tcp --dport 9090 -j REJECT --reject-with tcp-reset",
				"-A KEYHOLE_OUTPUT -o lo -j RETURN",
			}},
		"no admin port": {c: Config{ProxyUID: 65531, Port: 3129, DNSPort: 3053},
			v4Not: []string{"--dport 0", "--dport 9090"}, v6Not: []string{"--dport 0"}},
		"negative UID":                {c: Config{ProxyUID: -1, Port: 3129, DNSPort: 3053}, wantErr: true},
		"port zero":                   {c: Config{ProxyUID: 1, Port: 0, DNSPort: 3053}, wantErr: true},
		"port too big":                {c: Config{ProxyUID: 1, Port: 70000, DNSPort: 3053}, wantErr: true},
		"no DNS port":                 {c: Config{ProxyUID: 1, Port: 3129}, wantErr: true},
		"DNS port 53":                 {c: Config{ProxyUID: 1, Port: 3129, DNSPort: 53}, wantErr: true},
		"admin port too big":          {c: Config{ProxyUID: 1, Port: 3129, DNSPort: 3053, AdminPort: 65536}, wantErr: true},
		"ports collide":               {c: Config{ProxyUID: 1, Port: 3129, DNSPort: 3053, AdminPort: 3129}, wantErr: true},
		"DNS on the transparent port": {c: Config{ProxyUID: 1, Port: 3129, DNSPort: 3129}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v4, err4 := IPv4(tc.c)
			v6, err6 := IPv6(tc.c)
			if (err4 != nil) != tc.wantErr || (err6 != nil) != tc.wantErr {
				t.Fatalf("errors %v, %v; want error %v", err4, err6, tc.wantErr)
			}
			if tc.wantErr {
				if !errors.Is(err4, ErrInvalid) || !errors.Is(err6, ErrInvalid) {
					t.Fatalf("errors %v, %v do not wrap ErrInvalid", err4, err6)
				}
				return
			}
			check := func(what, got string, has, not []string) {
				for _, h := range has {
					if !strings.Contains(got, h+"\n") {
						t.Errorf("%s lacks %q:\n%s", what, h, got)
					}
				}
				for _, n := range not {
					if strings.Contains(got, n) {
						t.Errorf("%s holds %q:\n%s", what, n, got)
					}
				}
			}
			check("IPv4", string(v4), tc.v4Has, tc.v4Not)
			check("IPv6", string(v6), tc.v6Has, tc.v6Not)
			order := func(what, got string, lines []string) {
				rest := got
				for _, l := range lines {
					i := strings.Index(rest, l)
					if i < 0 {
						t.Fatalf("%s lacks %q after the lines before it:\n%s", what, l, got)
					}
					rest = rest[i+len(l):]
				}
			}
			order("IPv4", string(v4), tc.v4Order)
			order("IPv6", string(v6), tc.v6Order)
		})
	}
}
