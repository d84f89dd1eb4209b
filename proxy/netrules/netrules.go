// Package netrules writes the packet-filter rules of transparent mode: in
// the sandbox pod's network namespace, every outbound TCP connection of
// any user but the proxy's is redirected to the proxy's transparent
// listener; UDP and everything else is refused except DNS to the pod's
// resolvers; IPv6 egress is refused, not redirected. docs/proxy.md says
// why each rule is there.
//
// The rules are iptables-restore input, applied by the Debian iptables
// package's iptables-restore and ip6tables-restore (nf_tables backend):
// generating them here keeps them a tested, deterministic value.
package netrules

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Chain is the chain the rules add to the nat and filter tables; OUTPUT
// jumps to it.
const Chain = "KEYHOLE_OUTPUT"

// ErrInvalid wraps every error of a Config that cannot make rules.
var ErrInvalid = errors.New("invalid transparent-mode rules")

// Config is what the rules depend on.
type Config struct {
	// ProxyUID is the user the proxy runs as: its connections are the
	// only ones that leave the pod unredirected.
	ProxyUID int
	// Port is the proxy's transparent listener on 127.0.0.1.
	Port int
	// Resolvers are the DNS servers the pod may query on port 53 (the
	// nameservers of its resolv.conf).
	Resolvers []netip.Addr
}

func (c Config) validate() error {
	if c.ProxyUID < 0 || c.ProxyUID > 1<<32-2 {
		return fmt.Errorf("%w: proxy UID %d", ErrInvalid, c.ProxyUID)
	}
	if c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("%w: port %d", ErrInvalid, c.Port)
	}
	for _, r := range c.Resolvers {
		if !r.IsValid() || r.Zone() != "" {
			return fmt.Errorf("%w: resolver %v", ErrInvalid, r)
		}
	}
	return nil
}

// IPv4 is the iptables-restore input for IPv4: the nat redirect and the
// filter that refuses what is not redirected.
func IPv4(c Config) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# keyhole transparent mode, IPv4: docs/proxy.md")
	w("*nat")
	w(":%s - [0:0]", Chain)
	w("-A OUTPUT -p tcp -j %s", Chain)
	w("-A %s -m owner --uid-owner %d -j RETURN", Chain, c.ProxyUID)
	w("-A %s -o lo -j RETURN", Chain)
	for _, r := range c.Resolvers {
		if r.Is4() || r.Is4In6() {
			w("-A %s -d %s/32 -p tcp --dport 53 -j RETURN", Chain, r.Unmap())
		}
	}
	w("-A %s -p tcp -j REDIRECT --to-ports %d", Chain, c.Port)
	w("COMMIT")
	filter(&b, c, true, func(r netip.Addr) (string, bool) {
		if r.Is4() || r.Is4In6() {
			return r.Unmap().String() + "/32", true
		}
		return "", false
	}, "icmp-admin-prohibited")
	return b.Bytes(), nil
}

// IPv6 is the ip6tables-restore input: no redirect, only the filter, so
// the sandbox's IPv6 egress is refused and clients fall back to IPv4.
func IPv6(c Config) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# keyhole transparent mode, IPv6: docs/proxy.md\n")
	filter(&b, c, false, func(r netip.Addr) (string, bool) {
		if r.Is6() && !r.Is4In6() {
			return r.String() + "/128", true
		}
		return "", false
	}, "icmp6-adm-prohibited")
	return b.Bytes(), nil
}

// filter writes the filter table: the proxy's user, loopback, replies to
// connections already allowed, packets the kernel makes itself, and DNS
// to the resolvers pass; TCP is reset and the rest rejected.
func filter(b *bytes.Buffer, c Config, redirect bool, resolver func(netip.Addr) (string, bool), reject string) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	w("*filter")
	w(":%s - [0:0]", Chain)
	w("-A OUTPUT -j %s", Chain)
	w("-A %s -m owner --uid-owner %d -j RETURN", Chain, c.ProxyUID)
	w("-A %s -o lo -j RETURN", Chain)
	if redirect {
		// The nat redirect's packets: the filter still sees their
		// first route's interface, not lo.
		w("-A %s -d 127.0.0.1/32 -p tcp --dport %d -m conntrack --ctstate DNAT -j RETURN", Chain, c.Port)
	}
	w("-A %s -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN", Chain)
	w("-A %s -m owner ! --socket-exists -j RETURN", Chain)
	for _, r := range c.Resolvers {
		if cidr, ok := resolver(r); ok {
			w("-A %s -d %s -p udp --dport 53 -j RETURN", Chain, cidr)
			w("-A %s -d %s -p tcp --dport 53 -j RETURN", Chain, cidr)
		}
	}
	w("-A %s -p tcp -j REJECT --reject-with tcp-reset", Chain)
	w("-A %s -j REJECT --reject-with %s", Chain, reject)
	w("COMMIT")
}

// Resolvers reads the nameserver lines of a resolv.conf, in order,
// without duplicates. A line that is not an address is an error: a
// resolver the rules cannot name would leave the pod without DNS.
func Resolvers(resolvConf []byte) ([]netip.Addr, error) {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	sc := bufio.NewScanner(bytes.NewReader(resolvConf))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(f[1])
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%w: resolv.conf line %d: nameserver %q is not an IP address", ErrInvalid, n, f[1])
		}
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: resolv.conf: %w", ErrInvalid, err)
	}
	return out, nil
}
