package netrules

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestResolvers(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []string
		wantErr bool
	}{
		"cluster resolver": {in: "search a.svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n", want: []string{"10.96.0.10"}},
		"dual stack, dup":  {in: "nameserver 10.96.0.10\nnameserver fd00::a\nnameserver 10.96.0.10\n", want: []string{"10.96.0.10", "fd00::a"}},
		"none":             {in: "search x\n", want: nil},
		"a name":           {in: "nameserver dns.example\n", wantErr: true},
		"a zone":           {in: "nameserver fe80::1%eth0\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Resolvers([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			var s []string
			for _, a := range got {
				s = append(s, a.String())
			}
			if strings.Join(s, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v, want %v", s, tc.want)
			}
		})
	}
}

func TestRules(t *testing.T) {
	ok := Config{ProxyUID: 65531, Port: 3129, Resolvers: []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00::a")}}
	tests := map[string]struct {
		c       Config
		wantErr bool
		v4Has   []string
		v4Not   []string
		v6Has   []string
		v6Not   []string
	}{
		"valid": {c: ok,
			v4Has: []string{"-A KEYHOLE_OUTPUT -m owner --uid-owner 65531 -j RETURN", "-j REDIRECT --to-ports 3129", "-d 10.96.0.10/32 -p udp --dport 53 -j RETURN", "--ctstate DNAT"},
			v4Not: []string{"fd00::a"},
			v6Has: []string{"-d fd00::a/128 -p udp --dport 53 -j RETURN", "icmp6-adm-prohibited"},
			v6Not: []string{"REDIRECT", "*nat", "10.96.0.10"}},
		"negative UID": {c: Config{ProxyUID: -1, Port: 3129}, wantErr: true},
		"port zero":    {c: Config{ProxyUID: 1, Port: 0}, wantErr: true},
		"port too big": {c: Config{ProxyUID: 1, Port: 70000}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v4, err4 := IPv4(tc.c)
			v6, err6 := IPv6(tc.c)
			if (err4 != nil) != tc.wantErr || (err6 != nil) != tc.wantErr {
				t.Fatalf("errors %v, %v; want error %v", err4, err6, tc.wantErr)
			}
			check := func(what, got string, has, not []string) {
				for _, h := range has {
					if !strings.Contains(got, h) {
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
		})
	}
}
