package policy

import (
	"net/netip"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

func TestClassifyAddr(t *testing.T) {
	tests := map[string]struct {
		addr string
		want AddrClass
	}{
		"loopback":                  {addr: "127.0.0.1", want: AddrLoopback},
		"loopback, high":            {addr: "127.255.0.9", want: AddrLoopback},
		"IPv6 loopback":             {addr: "::1", want: AddrLoopback},
		"IPv4-mapped loopback":      {addr: "::ffff:127.0.0.1", want: AddrLoopback},
		"cloud metadata":            {addr: "169.254.169.254", want: AddrLinkLocal},
		"IPv6 link-local":           {addr: "fe80::1", want: AddrLinkLocal},
		"AWS IPv6 metadata":         {addr: "fd00:ec2::254", want: AddrPrivate},
		"10/8":                      {addr: "10.96.0.1", want: AddrPrivate},
		"172.16/12":                 {addr: "172.31.255.255", want: AddrPrivate},
		"192.168/16":                {addr: "192.168.1.1", want: AddrPrivate},
		"IPv4-mapped private":       {addr: "::ffff:10.0.0.1", want: AddrPrivate},
		"CGNAT":                     {addr: "100.64.0.1", want: AddrSharedCGNAT},
		"CGNAT, top":                {addr: "100.127.255.254", want: AddrSharedCGNAT},
		"unspecified":               {addr: "0.0.0.0", want: AddrUnspecified},
		"this network":              {addr: "0.1.2.3", want: AddrUnspecified},
		"IPv6 unspecified":          {addr: "::", want: AddrUnspecified},
		"multicast":                 {addr: "239.1.2.3", want: AddrMulticast},
		"link-local multicast":      {addr: "224.0.0.1", want: AddrLinkLocal},
		"IPv6 multicast":            {addr: "ff02::1", want: AddrLinkLocal},
		"IPv6 global multicast":     {addr: "ff0e::1", want: AddrMulticast},
		"broadcast":                 {addr: "255.255.255.255", want: AddrReserved},
		"class E":                   {addr: "240.0.0.1", want: AddrReserved},
		"benchmarking":              {addr: "198.18.0.1", want: AddrReserved},
		"IETF protocol assignments": {addr: "192.0.0.170", want: AddrReserved},
		"site-local":                {addr: "fec0::1", want: AddrReserved},
		"NAT64 of the metadata":     {addr: "64:ff9b::a9fe:a9fe", want: AddrLinkLocal},
		"local NAT64 of loopback":   {addr: "64:ff9b:1::7f00:1", want: AddrLoopback},
		"6to4 of a private address": {addr: "2002:0a00:0001::1", want: AddrPrivate},
		"public":                    {addr: "140.82.112.6", want: AddrPublic},
		"public, next to CGNAT":     {addr: "100.128.0.1", want: AddrPublic},
		"public, next to 172.16/12": {addr: "172.32.0.1", want: AddrPublic},
		"IPv6 public":               {addr: "2606:50c0:8000::154", want: AddrPublic},
		"NAT64 of a public address": {addr: "64:ff9b::8c52:7006", want: AddrPublic},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ClassifyAddr(netip.MustParseAddr(tc.addr)); got != tc.want {
				t.Fatalf("ClassifyAddr(%s) = %s, want %s", tc.addr, got, tc.want)
			}
		})
	}
	if got := ClassifyAddr(netip.Addr{}); got != AddrInvalid {
		t.Fatalf("the zero Addr is %s, want %s", got, AddrInvalid)
	}
}

func TestDecideDial(t *testing.T) {
	cfg := &config.Config{APIVersion: config.APIVersion, Kind: config.Kind, Sandbox: config.SandboxRef{Name: "s"},
		Hosts: []config.Host{
			{Name: "api.example.com", Connection: "c", Inject: config.Inject{Secret: "sec", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}}},
			{Name: "git.corp.internal", Connection: "c", Inject: config.Inject{Secret: "sec", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}}},
		},
		Passthrough:   []string{"mirror.corp.internal", "pypi.org"},
		InternalHosts: []string{"git.corp.internal", "mirror.corp.internal"},
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		host, addr string
		allowed    bool
		class      AddrClass
	}{
		"public":                          {host: "api.example.com", addr: "140.82.112.6", allowed: true, class: AddrPublic},
		"injected host at the metadata":   {host: "api.example.com", addr: "169.254.169.254", class: AddrLinkLocal},
		"passthrough at loopback":         {host: "pypi.org", addr: "127.0.0.1", class: AddrLoopback},
		"passthrough with a port":         {host: "pypi.org:80", addr: "10.0.0.1", class: AddrPrivate},
		"opted-in injected host":          {host: "git.corp.internal", addr: "10.1.2.3", allowed: true, class: AddrPrivate},
		"opted-in passthrough, port":      {host: "mirror.corp.internal:443", addr: "192.168.0.10", allowed: true, class: AddrPrivate},
		"opted-in host, no address":       {host: "git.corp.internal", addr: "", class: AddrInvalid},
		"IPv4-mapped metadata":            {host: "api.example.com", addr: "::ffff:169.254.169.254", class: AddrLinkLocal},
		"a name not in the config at all": {host: "evil.example", addr: "10.0.0.1", class: AddrPrivate},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var a netip.Addr
			if tc.addr != "" {
				a = netip.MustParseAddr(tc.addr)
			}
			d, class := p.DecideDial(tc.host, a)
			if d.Allowed() != tc.allowed || class != tc.class {
				t.Fatalf("DecideDial(%s, %s) = %+v, %s; want allowed %v, %s", tc.host, tc.addr, d, class, tc.allowed, tc.class)
			}
			if !d.Allowed() && (d.Reason != ReasonHostNotAllowed || !strings.Contains(d.Message, string(tc.class)) || !strings.Contains(d.Message, "internalHosts")) {
				t.Fatalf("refusal %s %q, want host-not-allowed naming the class and internalHosts", d.Reason, d.Message)
			}
		})
	}
}
